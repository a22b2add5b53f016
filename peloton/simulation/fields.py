"""Strict, typed access to one JSON or YAML mapping, naming `path.key` in every error.

All of the simulation's formats are read through `Fields`, and every value through the
daemons' config reader (`peloton.common.config.convert`), so a cluster, pools, what-if or
trace file and a daemon's config agree on what strict means: unknown keys are errors (a
typo never passes silently), a boolean is not a number, 2.0 is not an integer, numbers
are finite, null means "not given".  Errors are `InvalidArgument` with `field` set to the
dotted path (`changes[2].drain.count`); the loaders wrap them into `InputError` with the
file (and line, for JSON lines).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from peloton.common.config import WrongValue, convert
from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import Resources
from peloton.simulation.errors import InputError

#: Resource keys of our own formats (the `Resources` field names).
RESOURCE_KEYS = ("cpu", "mem_mb", "disk_mb", "gpu")


def kind_of(value: object) -> str:
    """How an error message names a value's JSON/YAML type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "a mapping"


def typed(tp: type, value: object, field: str) -> Any:
    """`value` as `tp` by the config reader's rules; InvalidArgument naming `field`."""
    try:
        return convert(tp, value, field)
    except WrongValue as exc:
        raise InvalidArgument(exc.detail, field=field) from None


def number(value: object, field: str) -> float:
    """A finite int or float as float (booleans and NaN/inf refused)."""
    return float(typed(float, value, field))


def join(prefix: str, key: str) -> str:
    """`prefix.key`, or `key` at the top level."""
    return f"{prefix}.{key}" if prefix else key


class Fields:
    """One mapping's members, typed; unknown keys rejected at construction."""

    def __init__(self, data: object, prefix: str, allowed: Sequence[str]) -> None:
        if not isinstance(data, dict):
            raise InvalidArgument(f"must be a mapping, got {kind_of(data)}", field=prefix or None)
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            raise InvalidArgument(f"unknown key {unknown[0]!r} (known: {', '.join(allowed)})",
                                  field=join(prefix, unknown[0]))
        self.data: dict[Any, Any] = data
        self.prefix = prefix

    def has(self, key: str) -> bool:
        """The key is present and not null."""
        return self.data.get(key) is not None

    def field(self, key: str) -> str:
        """The dotted name of `key` for messages."""
        return join(self.prefix, key)

    def get(self, key: str, *, required: bool = False) -> Any:
        """The raw value (None when absent or null; InvalidArgument if required)."""
        value = self.data.get(key)
        if value is None and required:
            raise InvalidArgument("is required", field=self.field(key))
        return value

    def string(self, key: str, default: str = "", *, required: bool = False) -> str:
        """A string member."""
        value = self.get(key, required=required)
        if value is None:
            return default
        return str(typed(str, value, self.field(key)))

    def number(self, key: str, default: float = 0.0, *, required: bool = False,
               minimum: float | None = None, positive: bool = False) -> float:
        """A number member, optionally >= `minimum` or > 0."""
        value = self.get(key, required=required)
        if value is None:
            return default
        out = number(value, self.field(key))
        if minimum is not None and out < minimum:
            raise InvalidArgument(f"must be >= {minimum:g}, got {out:g}", field=self.field(key))
        if positive and out <= 0:
            raise InvalidArgument(f"must be > 0, got {out:g}", field=self.field(key))
        return out

    def integer(self, key: str, default: int = 0, *, required: bool = False,
                minimum: int | None = None) -> int:
        """An integer member (2.0 refused), optionally >= `minimum`."""
        value = self.get(key, required=required)
        if value is None:
            return default
        value = int(typed(int, value, self.field(key)))
        if minimum is not None and value < minimum:
            raise InvalidArgument(f"must be >= {minimum}, got {value}", field=self.field(key))
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """A true/false member."""
        value = self.get(key)
        if value is None:
            return default
        return bool(typed(bool, value, self.field(key)))

    def items(self, key: str, *, required: bool = False) -> list[Any]:
        """A list member ([] when absent)."""
        value = self.get(key, required=required)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidArgument(f"must be a list, got {kind_of(value)}", field=self.field(key))
        return value

    def resources(self, key: str, *, required: bool = False) -> Resources:
        """A `{cpu, mem_mb, disk_mb, gpu}` mapping of amounts >= 0 (missing kinds are 0)."""
        raw = self.get(key, required=required)
        if raw is None:
            return Resources()
        res = Fields(raw, self.field(key), RESOURCE_KEYS)
        return Resources(cpu=res.number("cpu", minimum=0), mem_mb=res.number("mem_mb", minimum=0),
                         disk_mb=res.number("disk_mb", minimum=0), gpu=res.number("gpu", minimum=0))

    def labels(self, key: str) -> tuple[tuple[str, str], ...]:
        """A `{key: value}` mapping of strings (numbers and booleans written as YAML shows them)."""
        raw = self.get(key)
        if raw is None:
            return ()
        if not isinstance(raw, dict):
            raise InvalidArgument(f"must be a mapping of label key to value, got {kind_of(raw)}",
                                  field=self.field(key))
        out = []
        for k, v in raw.items():
            out.append((str(k), scalar_text(v, join(self.field(key), str(k)))))
        return tuple(sorted(out))


def scalar_text(value: object, field: str) -> str:
    """A YAML scalar as the text a label holds (`true` and `3` as written)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise InvalidArgument(f"must be a string or number, got {kind_of(value)}", field=field)


def load_yaml(text: str, source: str) -> dict[Any, Any]:
    """One YAML document that must be a mapping (InputError naming `source` otherwise)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(source, f"invalid YAML: {getattr(exc, 'problem', None) or exc}",
                         line=line) from None
    if not isinstance(data, dict):
        raise InputError(source, f"must be a YAML mapping, got {kind_of(data)}")
    return data


def check_version(fields: Fields, supported: int, what: str) -> None:
    """The document's `version` must be the one this release reads."""
    version = fields.integer("version", required=True)
    if version != supported:
        raise InvalidArgument(f"{what} version {version} is not supported (this release reads "
                              f"version {supported})", field="version")


def read_text(path: str | Path) -> str:
    """A UTF-8 file's text, or InputError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text: {exc}") from None
