"""Load Peloton's job, stateless job, resource pool and update YAML files into proto messages.

The CLI must accept the original's example files as they are, so this reads
them the way Peloton's Go CLI did:
- keys match proto field names case-insensitively with underscores ignored
  (`defaultconfig`, `defaultConfig` and `default_config` are one field);
- enums may be given by number (`type: 1`) or by name (`type: SERVICE`);
- map keys are converted to the map's key type (`instanceconfig: {0: ...}`);
- null values are skipped (`healthcheck: null`);
- unknown keys are not fatal (the originals carry keys such as
  `minimuminstancecount` that Go silently ignored) but each is reported back
  as a warning naming its path, so a typo does not pass unnoticed;
- a value of the wrong type is an InvalidArgument naming its path.
"""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Loaded(Generic[M]):
    """A loaded message and the warnings (unknown keys) met on the way."""

    message: M
    warnings: tuple[str, ...] = ()


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
            warnings.append(f"{here}: unknown field, ignored")
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


def message_from_data(data: object, message_type: type[M]) -> Loaded[M]:
    """Fill a new `message_type` from already-parsed YAML/JSON data (a mapping)."""
    out = message_type()
    warnings: list[str] = []
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"expected a mapping of {message_type.DESCRIPTOR.name} fields, "
                              f"got {type(data).__name__}", field=None)
    _message(out, data, "", warnings)
    if not out.IsInitialized():
        # proto2 messages (Mesos') have required fields; name them now, not at serialization.
        missing: list[str] = cast(Any, out).FindInitializationErrors()
        raise InvalidArgument(f"required fields missing: {', '.join(missing)}", field=missing[0])
    return Loaded(out, tuple(warnings))


def load_yaml(text: str | bytes, message_type: type[M]) -> Loaded[M]:
    """Parse YAML text into a `message_type` message (see the module notes for the rules)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"invalid YAML: {exc}", field=None) from None
    if data is None:
        raise InvalidArgument("the YAML document is empty", field=None)
    return message_from_data(data, message_type)


def load_job_config(text: str | bytes) -> Loaded[job_pb2.JobConfig]:
    """A v0 job YAML (example/*.yaml) -> JobConfig."""
    return load_yaml(text, job_pb2.JobConfig)


def load_stateless_job_spec(text: str | bytes) -> Loaded[stateless_pb2.JobSpec]:
    """A v1alpha stateless job YAML (example/stateless/*.yaml) -> JobSpec."""
    return load_yaml(text, stateless_pb2.JobSpec)


def load_respool_config(text: str | bytes) -> Loaded[respool_pb2.ResourcePoolConfig]:
    """A resource pool YAML (example/default_respool.yaml) -> ResourcePoolConfig."""
    return load_yaml(text, respool_pb2.ResourcePoolConfig)


def load_update_config(text: str | bytes) -> Loaded[update_pb2.UpdateConfig]:
    """A v0 update settings YAML -> UpdateConfig (batchSize, rollbackOnFailure, ...)."""
    return load_yaml(text, update_pb2.UpdateConfig)


def load_update_spec(text: str | bytes) -> Loaded[stateless_pb2.UpdateSpec]:
    """A v1alpha update settings YAML -> UpdateSpec (batch_size, rollback_on_failure, ...)."""
    return load_yaml(text, stateless_pb2.UpdateSpec)
