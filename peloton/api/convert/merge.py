"""Instance configs merged over the default config, top-level fields only.

This is Peloton's taskconfig.Merge: for each top-level field
of the instance's config, a set value replaces the default's, an unset one
keeps it; nothing is merged recursively (an instance that sets `resource`
replaces the whole resource block).  "Set" follows Go's zero values:
a non-empty string, a non-zero number, a present message, a non-empty
list.  Booleans always come from the instance config, because Go cannot
tell false from unset; so an instance config must repeat `controller` or
`revocable` if the default sets them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.common.slices import Slicer
from peloton.core.errors import InvalidArgument
from peloton.core.model.task import TaskSpec

_M = TypeVar("_M", bound=Message)


def _is_set(msg: Message, fd: Any) -> bool:
    # `fd` is a FieldDescriptor; the pure-Python and upb stubs name two different classes.
    """Whether `fd` of `msg` counts as given, by Go's zero-value rule (bools always do)."""
    value = getattr(msg, fd.name)
    if fd.is_repeated:
        return len(value) > 0
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return msg.HasField(fd.name)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return True
    return bool(value)


def overridden_fields(override: Message | None) -> frozenset[str]:
    """Names of the top-level fields an instance config replaces."""
    if override is None:
        return frozenset()
    return frozenset(fd.name for fd in override.DESCRIPTOR.fields if _is_set(override, fd))


def _merge(base: _M, override: _M) -> _M:
    merged = type(base)()
    merged.CopyFrom(base)
    for fd in override.DESCRIPTOR.fields:
        if not _is_set(override, fd):
            continue
        name = fd.name
        merged.ClearField(name)
        if fd.is_repeated:
            getattr(merged, name).extend(getattr(override, name))
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(merged, name).CopyFrom(getattr(override, name))
        else:
            setattr(merged, name, getattr(override, name))
    return merged


def merge_task_config(base: task_pb2.TaskConfig | None,
                      override: task_pb2.TaskConfig | None) -> task_pb2.TaskConfig | None:
    """An instance's effective v0 TaskConfig (None only if both are None; may be `base` itself)."""
    if override is None:
        return base
    if base is None:
        return override
    return _merge(base, override)


def _chooser(own: str, mine: frozenset[str], default_name: str) -> Callable[[str], str]:
    """Prefix of a top-level field: the instance's own config if it set the field."""
    return lambda top: own if top in mine else default_name


#: check(spec, lowest instance using it, where(top-level field) -> prefix, used by other instances too)
Check = Callable[[TaskSpec, int, Callable[[str], str], bool], None]


def expand_instances(count: int, default: _M | None, overrides: Mapping[int, _M], *,
                     merge: Callable[[_M | None, _M | None], _M | None],
                     convert: Callable[[_M, str], TaskSpec], check: Check,
                     default_name: str, override_name: str) -> tuple[TaskSpec, dict[int, TaskSpec]]:
    """Convert a job's default and per-instance configs into (default spec, differing instances).

    Each instance's merged config is converted and checked, as Peloton validates
    every instance; the default is checked once, for the instances that use it
    unchanged, and only converted (not checked) when every instance overrides it.
    Returned instance specs are the full merged specs of instances that differ
    from the default.
    """
    for key in overrides:
        if key >= count:
            name = f"{override_name}[{key}]"
            raise InvalidArgument(f"{name}: instance {key} is beyond the instance count {count}",
                                  field=name)
    users = count - len(overrides)
    lowest = next(i for i in range(len(overrides) + 1) if i not in overrides)
    if default is None:
        if users > 0:
            raise InvalidArgument(f"{default_name}: instance {lowest} has no task config",
                                  field=default_name)
        default_spec = TaskSpec()
    else:
        default_spec = convert(default, default_name)
        if users > 0:
            check(default_spec, lowest, lambda _top: default_name, users > 1 or lowest != 0)
    specs: dict[int, TaskSpec] = {}
    tick = Slicer(every=1)  # 800 instance configs of 60 KiB took a second to convert
    for key in sorted(overrides):
        tick()
        own = f"{override_name}[{key}]"
        mine = overridden_fields(overrides[key])
        merged = merge(default, overrides[key])
        assert merged is not None  # the override is not None
        spec = convert(merged, own)
        check(spec, key, _chooser(own, mine, default_name), False)
        if spec != default_spec:
            specs[key] = spec
    return default_spec, specs
