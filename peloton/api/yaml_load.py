"""Load Peloton's job, stateless job, resource pool and update YAML files into proto messages.

The CLI must accept the original's example files as they are, so this reads
them the way Peloton's Go CLI did:
- keys match proto field names case-insensitively with underscores ignored
  (`defaultconfig`, `defaultConfig` and `default_config` are one field);
- enums may be given by number (`type: 1`) or by name (`type: SERVICE`);
- map keys are converted to the map's key type (`instanceconfig: {0: ...}`);
- null values are skipped (`healthcheck: null`);
- unknown keys are not fatal here (the originals carry keys such as
  `minimuminstancecount` that Go silently ignored) but each is reported back
  as a warning and as an `UnknownField` with its line and the closest known
  field, so a typo does not pass unnoticed (the CLI refuses them unless
  `--lenient`, except the `LEGACY_KEYS` Peloton's own examples carry);
- a value of the wrong type is an InvalidArgument naming its path;
- YAML syntax errors name `source:line:column`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from typing import Any, Generic, TypeVar, cast

import yaml
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.core.errors import InvalidArgument

M = TypeVar("M", bound=Message)

_INT_BOUNDS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1), FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1), FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)


#: Keys Peloton's own example files carry that its API never had (Go ignored them).
LEGACY_KEYS = frozenset({"minimuminstancecount", "minimuminstancepercent"})


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A key that names no field: where it is, and the closest field the message has."""

    path: str
    key: str
    line: int = 0
    closest: str = ""

    @property
    def legacy(self) -> bool:
        """One of the keys Peloton's example files carry (tolerated)."""
        return _norm(self.key) in LEGACY_KEYS

    def describe(self, source: str = "") -> str:
        """'job.yaml:7: defaultconfig.resource.cpulimt: unknown field (did you mean cpuLimit?)'."""
        where = f"{source}:{self.line}: " if source and self.line else (
            f"{source}: " if source else "")
        hint = f" (did you mean {self.closest}?)" if self.closest else ""
        return f"{where}{self.path}: unknown field{hint}"


@dataclass(frozen=True, slots=True)
class Loaded(Generic[M]):
    """A loaded message and the warnings (unknown keys) met on the way."""

    message: M
    warnings: tuple[str, ...] = ()
    unknown: tuple[UnknownField, ...] = ()


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


@cache
def _fields(descriptor: Descriptor) -> dict[str, Any]:
    """Normalized key -> field descriptor, by proto name and JSON (camelCase) name."""
    out: dict[str, Any] = {}
    for fd in descriptor.fields:
        out[_norm(fd.name)] = fd
        out.setdefault(_norm(fd.json_name), fd)
    return out


def _bad(path: str, expected: str, value: object) -> InvalidArgument:
    return InvalidArgument(f"{path}: expected {expected}, got {type(value).__name__} {value!r}",
                           field=path)


def _enum(fd: Any, value: object, path: str) -> int:
    values = fd.enum_type.values_by_number
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value in values:
            return value
    elif isinstance(value, str):
        for ev in fd.enum_type.values:
            if ev.name == value or ev.name.lower() == value.lower():
                return int(ev.number)
    names = ", ".join(f"{ev.name} ({ev.number})" for ev in fd.enum_type.values)
    raise InvalidArgument(f"{path}: {value!r} is not one of {names}", field=path)


def _scalar(fd: Any, value: object, path: str) -> object:
    kind = fd.type
    if kind == FieldDescriptor.TYPE_ENUM:
        return _enum(fd, value, path)
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise _bad(path, "true or false", value)
        return value
    if kind in _INT_BOUNDS:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _bad(path, "an integer", value)
        low, high = _INT_BOUNDS[kind]
        if not low <= value <= high:
            raise InvalidArgument(f"{path}: {value} is out of range [{low}, {high}]", field=path)
        return value
    if kind in _FLOATS:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise _bad(path, "a number", value)
        return float(value)
    if kind == FieldDescriptor.TYPE_BYTES:
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode()
        raise _bad(path, "a string", value)
    # string: YAML scalars that look like numbers or booleans are taken as written, as Go's yaml does.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, date):  # an unquoted 2019-01-01 is a date to YAML
        return value.isoformat()
    raise _bad(path, "a string", value)


def _timestamp(out: Timestamp, value: object, path: str) -> None:
    if isinstance(value, datetime):
        out.FromDatetime(value)
        return
    if not isinstance(value, str):
        raise _bad(path, "an RFC 3339 time", value)
    try:
        out.FromJsonString(value)
    except ValueError:
        raise InvalidArgument(f"{path}: {value!r} is not an RFC 3339 time", field=path) from None


def _message(out: Message, value: object, path: str, warnings: list[str]) -> None:
    if out.DESCRIPTOR.full_name == Timestamp.DESCRIPTOR.full_name and not isinstance(value, Mapping):
        assert isinstance(out, Timestamp)
        _timestamp(out, value, path)
        return
    if not isinstance(value, Mapping):
        raise _bad(path, "a mapping", value)
    out.SetInParent()
    fields = _fields(out.DESCRIPTOR)
    for key, item in value.items():
        here = f"{path}.{key}" if path else str(key)
        fd = fields.get(_norm(str(key)))
        if fd is None:
            names = [f.name for f in out.DESCRIPTOR.fields]
            close = difflib.get_close_matches(_norm(str(key)), [_norm(n) for n in names], 1, 0.6)
            closest = "" if _norm(str(key)) in LEGACY_KEYS else next(
                (n for n in names if close and _norm(n) == close[0]), "")
            hint = f" (did you mean {closest}?)" if closest else ""
            warnings.append(f"{here}: unknown field, ignored{hint}")
            if isinstance(warnings, _Notes):
                warnings.unknown.append(UnknownField(here, str(key), 0, closest))
        elif item is not None:
            _field(out, fd, item, here, warnings)


def _field(out: Message, fd: Any, value: object, path: str, warnings: list[str]) -> None:
    target = getattr(out, fd.name)
    entry = fd.message_type
    if entry is not None and entry.GetOptions().map_entry:
        if not isinstance(value, Mapping):
            raise _bad(path, "a mapping", value)
        key_fd, value_fd = entry.fields_by_name["key"], entry.fields_by_name["value"]
        for raw_key, item in value.items():
            here = f"{path}[{raw_key}]"
            key = _scalar(key_fd, raw_key, here)
            if item is None:
                continue
            if value_fd.message_type is not None:
                _message(target[key], item, here, warnings)
            else:
                target[key] = _scalar(value_fd, item, here)
        return
    if fd.is_repeated:
        if not isinstance(value, list):
            raise _bad(path, "a list", value)
        for i, item in enumerate(value):
            if item is None:
                continue
            if entry is not None:
                _message(target.add(), item, f"{path}[{i}]", warnings)
            else:
                target.append(_scalar(fd, item, f"{path}[{i}]"))
        return
    if entry is not None:
        _message(target, value, path, warnings)
    else:
        setattr(out, fd.name, _scalar(fd, value, path))


class _Notes(list[str]):
    """The warnings of one load, and its unknown fields as records."""

    def __init__(self) -> None:
        super().__init__()
        self.unknown: list[UnknownField] = []


def message_from_data(data: object, message_type: type[M]) -> Loaded[M]:
    """Fill a new `message_type` from already-parsed YAML/JSON data (a mapping)."""
    out = message_type()
    warnings = _Notes()
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"expected a mapping of {message_type.DESCRIPTOR.name} fields, "
                              f"got {type(data).__name__}", field=None)
    _message(out, data, "", warnings)
    unknown = tuple(warnings.unknown)
    if not out.IsInitialized():
        # proto2 messages (Mesos') have required fields; name them now, not at serialization.
        missing: list[str] = cast(Any, out).FindInitializationErrors()
        raise InvalidArgument(f"required fields missing: {', '.join(missing)}", field=missing[0])
    return Loaded(out, tuple(warnings), unknown)


def _key_lines(node: yaml.Node, path: str, lines: dict[str, int]) -> None:
    """path -> 1-based line of every mapping key under `node` (paths as `_message` builds)."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            for here in (f"{path}.{key}" if path else key, f"{path}[{key}]"):
                lines.setdefault(here, key_node.start_mark.line + 1)
            _key_lines(value_node, f"{path}.{key}" if path else key, lines)
            _key_lines(value_node, f"{path}[{key}]", lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _key_lines(item, f"{path}[{i}]", lines)


def load_yaml(text: str | bytes, message_type: type[M], source: str = "") -> Loaded[M]:
    """Parse YAML text into a `message_type` message (see the module notes for the rules);
    `source` (a file name) prefixes syntax errors and locates unknown fields."""
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{source or 'input'}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise InvalidArgument(f"{where}: invalid YAML: {problem}", field=None) from None
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"{source or 'input'}: invalid YAML: {exc}", field=None) from None
    if data is None:
        raise InvalidArgument("the YAML document is empty", field=None)
    loaded = message_from_data(data, message_type)
    if loaded.unknown:
        lines: dict[str, int] = {}
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is not None:
            _key_lines(root, "", lines)
        loaded = Loaded(loaded.message, loaded.warnings, tuple(
            UnknownField(u.path, u.key, lines.get(u.path, 0), u.closest) for u in loaded.unknown))
    return loaded


def load_job_config(text: str | bytes, source: str = "") -> Loaded[job_pb2.JobConfig]:
    """A v0 job YAML (example/*.yaml) -> JobConfig."""
    return load_yaml(text, job_pb2.JobConfig, source)


def load_stateless_job_spec(text: str | bytes, source: str = "") -> Loaded[stateless_pb2.JobSpec]:
    """A v1alpha stateless job YAML (example/stateless/*.yaml) -> JobSpec."""
    return load_yaml(text, stateless_pb2.JobSpec, source)


def load_respool_config(text: str | bytes, source: str = "") -> Loaded[respool_pb2.ResourcePoolConfig]:
    """A resource pool YAML (example/default_respool.yaml) -> ResourcePoolConfig."""
    return load_yaml(text, respool_pb2.ResourcePoolConfig, source)


def load_update_config(text: str | bytes, source: str = "") -> Loaded[update_pb2.UpdateConfig]:
    """A v0 update settings YAML -> UpdateConfig (batchSize, rollbackOnFailure, ...)."""
    return load_yaml(text, update_pb2.UpdateConfig, source)


def load_update_spec(text: str | bytes, source: str = "") -> Loaded[stateless_pb2.UpdateSpec]:
    """A v1alpha update settings YAML -> UpdateSpec (batch_size, rollback_on_failure, ...)."""
    return load_yaml(text, stateless_pb2.UpdateSpec, source)
