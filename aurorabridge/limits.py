"""The documented maxima of Aurora requests, checked on the decoded call before anything runs.

The same maxima as the gRPC front (peloton/api/limits.py), on Thrift structs:
strings at most 64 KiB and without NUL (the executor's config blob,
`executorConfig.data`, up to 1 MiB), names and job key parts 256
characters, metadata values 4,096, at most 128 metadata entries and 10,000
entries in any other list, set or map, structs nested at most 32 deep.  The
HTTP body itself is capped (`max_body_bytes`, 64 MiB, 413 before it is read).
A violation answers INVALID_REQUEST naming the field's path
(`description.taskConfig.metadata[3].value`).
"""

from __future__ import annotations

from typing import Any

from peloton.api.limits import (
    MAX_DEPTH,
    MAX_LABEL_VALUE,
    MAX_LABELS,
    MAX_LIST,
    MAX_SHORT,
    MAX_STRING,
)
from peloton.core.errors import InvalidArgument

MAX_EXECUTOR_DATA = 1024 * 1024
SHORT_FIELDS = frozenset({"role", "environment", "name", "user", "tier", "contactEmail", "key"})


def check_args(method: str, args: Any) -> None:
    """Raise InvalidArgument naming the first field of a call's arguments beyond its maximum."""
    _struct(args, "", 0, method)


def _struct(value: Any, path: str, depth: int, parent: str) -> None:
    if depth > MAX_DEPTH:
        raise InvalidArgument(f"{path}: nested more than {MAX_DEPTH} levels deep", field=path)
    spec = getattr(type(value), "thrift_spec", None) or {}
    for entry in spec.values():
        name = entry[1]
        item = getattr(value, name, None)
        if item is not None:
            _value(item, f"{path}.{name}" if path else name, depth, type(value).__name__, name)


def _value(value: Any, where: str, depth: int, struct: str, field: str) -> None:
    if isinstance(value, str | bytes):
        _string(value, where, _string_limit(struct, field))
    elif isinstance(value, dict):
        _count(value, where, MAX_LIST)
        for key, item in value.items():
            _value(key, f"{where}[key]", depth, struct, "key")
            _value(item, f"{where}[{key!r}]" if isinstance(key, str | int) else where, depth,
                   struct, field)
    elif isinstance(value, list | set | frozenset | tuple):
        _count(value, where, MAX_LABELS if field == "metadata" else MAX_LIST)
        for i, item in enumerate(value):
            _value(item, f"{where}[{i}]", depth, struct, field)
    elif hasattr(type(value), "thrift_spec"):
        _struct(value, where, depth + 1, struct)


def _string_limit(struct: str, field: str) -> int:
    if struct == "ExecutorConfig" and field == "data":
        return MAX_EXECUTOR_DATA
    if struct == "Metadata" and field == "value":
        return MAX_LABEL_VALUE
    if field in SHORT_FIELDS:
        return MAX_SHORT
    return MAX_STRING


def _string(value: str | bytes, where: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{where}: {len(value):,} characters is more than the maximum of "
                              f"{limit:,}", field=where)
    if (b"\x00" if isinstance(value, bytes) else "\x00") in value:  # type: ignore[operator]
        raise InvalidArgument(f"{where}: contains a NUL character", field=where)


def _count(value: Any, where: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{where}: {len(value):,} entries is more than the maximum of "
                              f"{limit:,}", field=where)
