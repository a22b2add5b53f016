"""Daemon configuration: YAML files merged in order, then environment overrides, into frozen dataclasses.

Peloton's daemons take `-c base.yaml -c production.yaml` (later files win)
and then environment variables such as `ELECTION_ZK_SERVERS`
(`pkg/common/config/parse.go`, `cmd/*/main.go`).  Here:

1. every file is read with `yaml.safe_load` and deep-merged into the one
   before it: mappings merge key by key, anything else (lists included) is
   replaced;
2. every leaf field of the schema can be set from the environment as
   `<PREFIX>_<SECTION>_<KEY>` (default prefix `PELOTON`, so
   `PELOTON_ELECTION_ZK_SERVERS`), and explicit aliases map Peloton's own
   names (`ELECTION_ZK_SERVERS`) to keys; the prefixed name wins over an alias;
3. the result is converted into the schema: frozen dataclasses whose field
   types drive the conversion (str, int, float, bool, Path, Enum, X | None,
   tuple[X, ...], list[X], dict[str, X], nested dataclasses).  Environment
   values are text: tuples and lists split at commas, bools accept
   true/false/1/0/yes/no/on/off, and an empty value sets an optional field
   to None.

Every error is `InvalidArgument` whose `field` is the dotted key
(`election.zk_servers`): unknown keys, wrong types, missing required keys,
and whatever a section's `__post_init__` rejects (it raises
`InvalidArgument(field="<its own key>")`, which is prefixed with the
section's path, or `ValueError`, which is attributed to the section).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from peloton.core.errors import InvalidArgument, NotFound

T = TypeVar("T")

#: Peloton's environment names for keys every daemon has; applied when the schema has the key.
COMMON_ENV_ALIASES: Mapping[str, str] = {"ELECTION_ZK_SERVERS": "election.zk_servers"}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class _EnvText(str):
    """A value that came from an environment variable (parsed from text, named in errors)."""

    var: str = ""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`base` updated by `override`, recursing into mappings present in both."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_yaml_files(files: Sequence[str | Path]) -> dict[str, Any]:
    """Read and deep-merge YAML files in order; a missing or malformed file is an error."""
    merged: dict[str, Any] = {}
    for name in files:
        path = Path(name)
        try:
            data = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            raise NotFound(f"config file not found: {path}", field="config") from None
        except yaml.YAMLError as exc:
            raise InvalidArgument(f"config file {path} is not valid YAML: {exc}", field="config") from exc
        if data is None:
            continue
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"config file {path} must hold a mapping at the top", field="config")
        merged = deep_merge(merged, data)
    return merged


def env_overrides(schema: type[Any], env: Mapping[str, str], *, prefix: str = "PELOTON",
                  aliases: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The nested mapping of schema keys set by `env` (aliases first, prefixed names over them)."""
    leaves = dict(_leaf_keys(schema))
    chosen_aliases = ({k: v for k, v in COMMON_ENV_ALIASES.items() if v in leaves}
                      if aliases is None else dict(aliases))
    for var, key in chosen_aliases.items():
        if key not in leaves:
            raise ValueError(f"environment alias {var} names unknown config key {key}")
    names = [(var, key) for var, key in chosen_aliases.items()]
    names += [(f"{prefix}_{key.replace('.', '_')}".upper(), key) for key in leaves]
    result: dict[str, Any] = {}
    for var, key in names:
        if var in env:
            text = _EnvText(env[var])
            text.var = var
            node = result
            *sections, leaf = key.split(".")
            for section in sections:
                node = node.setdefault(section, {})
            node[leaf] = text
    return result


def load_config(schema: type[T], files: Sequence[str | Path] = (), *,
                env: Mapping[str, str] | None = None, env_prefix: str = "PELOTON",
                env_aliases: Mapping[str, str] | None = None) -> T:
    """Files, then environment (`os.environ` unless given), converted into `schema`."""
    data = read_yaml_files(files)
    overrides = env_overrides(schema, os.environ if env is None else env,
                              prefix=env_prefix, aliases=env_aliases)
    return from_mapping(schema, deep_merge(data, overrides))


def from_mapping(schema: type[T], data: Mapping[str, Any], path: str = "") -> T:
    """Build the dataclass `schema` from `data`; errors name the dotted key."""
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"{path or 'config'}: expected a mapping, got {_show(data)}",
                              field=path or None)
    if not (dataclasses.is_dataclass(schema) and isinstance(schema, type)):
        raise TypeError(f"config schema {schema!r} is not a dataclass")
    hints = typing.get_type_hints(schema)
    fields = {f.name: f for f in dataclasses.fields(schema) if f.init}
    for key in data:
        if key not in fields:
            raise InvalidArgument(f"unknown config key {_join(path, str(key))}", field=_join(path, str(key)))
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        key = _join(path, name)
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InvalidArgument(f"config key {key} is required", field=key)
    try:
        return typing.cast(T, schema(**kwargs))
    except InvalidArgument as exc:
        field = _join(path, exc.field) if exc.field else (path or None)
        raise InvalidArgument(f"{field or 'config'}: {exc.message}", field=field) from exc
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"{path or 'config'}: {exc}", field=path or None) from exc


class WrongValue(InvalidArgument):
    """A value of the wrong type or range; `detail` is the message without the key, for
    readers (the simulation's files) that name the place their own way."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"config key {key}: {detail}", field=key)
        self.detail = detail


def convert(tp: Any, value: Any, key: str) -> Any:
    """`value` as the type `tp` by this reader's rules, the one set every file format shares
    (daemon and auth configs here, the simulation's files through `simulation.fields`):
    a boolean is not a number, 2.0 is not an integer, numbers are finite, None only where
    the type allows it.  WrongValue names `key` and the value."""
    return _convert(tp, value, key)


def _convert(tp: Any, value: Any, key: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    from_env = isinstance(value, _EnvText)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        empty = value is None or (from_env and value.strip().lower() in ("", "null", "none"))
        if empty and type(None) in args:
            return None
        errors: list[InvalidArgument] = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _convert(arg, value, key)
            except InvalidArgument as exc:
                errors.append(exc)
        raise errors[0] if errors else _bad(key, value, "a value")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_mapping(tp, value, key)
    if origin in (tuple, list):
        items = ([p.strip() for p in value.split(",") if p.strip()] if isinstance(value, str)
                 else value)
        if not isinstance(items, list | tuple):
            raise _bad(key, value, "a list")
        item_type = args[0] if args else Any
        converted = [_convert(item_type, _retag(item, value), f"{key}[{i}]") for i, item in enumerate(items)]
        return tuple(converted) if origin is tuple else converted
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _bad(key, value, "a mapping")
        value_type = args[1] if len(args) == 2 else Any
        return {str(k): _convert(value_type, v, _join(key, str(k))) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for member in tp:
            if str(value).upper() == member.name.upper() or value == member.value:
                return member
        raise _bad(key, value, "one of " + ", ".join(m.name for m in tp))
    return _scalar(tp, value, key, from_env)


def _scalar(tp: Any, value: Any, key: str, from_env: bool) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
        if from_env and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise _bad(key, value, "true or false")
    if tp in (int, float):
        expected = "an integer" if tp is int else "a number"
        if from_env:
            try:
                return tp(value.strip())
            except ValueError:
                raise _bad(key, value, expected) from None
        allowed = int if tp is int else int | float
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise _bad(key, value, expected)
        if tp is float and not math.isfinite(value):  # YAML's .nan and .inf parse as floats
            raise _bad(key, value, "a finite number")
        return tp(value)
    if tp in (str, Path):
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _bad(key, value, "a string")
        return tp(str(value))
    raise TypeError(f"config key {key}: unsupported field type {tp!r}")


def _leaf_keys(schema: type[Any], path: str = "") -> list[tuple[str, Any]]:
    leaves: list[tuple[str, Any]] = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        tp = hints[f.name]
        nested = [a for a in (typing.get_args(tp) or (tp,)) if dataclasses.is_dataclass(a)]
        if nested and isinstance(nested[0], type):
            leaves += _leaf_keys(nested[0], _join(path, f.name))
        else:
            leaves.append((_join(path, f.name), tp))
    return leaves


def _retag(item: Any, parent: Any) -> Any:
    if isinstance(parent, _EnvText) and isinstance(item, str):
        text = _EnvText(item)
        text.var = parent.var
        return text
    return item


def _bad(key: str, value: Any, expected: str) -> WrongValue:
    source = f" (from ${value.var})" if isinstance(value, _EnvText) else ""
    return WrongValue(key, f"expected {expected}, got {_show(value)}{source}")


def _show(value: Any) -> str:
    text = repr(str(value) if isinstance(value, _EnvText) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
