"""The documented maxima of every request on the gRPC front, checked before anything runs.

Every request to a public service (`peloton.api.*` and our public extensions
`pelotonpy.api|ext|auth.*`: service_registry.PUBLIC_PREFIXES) is walked once, field by
field, at the edge (service_registry), and the first value beyond its
maximum is refused with INVALID_ARGUMENT naming the field's path
(`config.labels[3].value`); nothing is stored.  Requests larger than
`grpc_server.MAX_RECEIVE_BYTES` (64 MiB) never get this far
(RESOURCE_EXHAUSTED), and replies larger than `MAX_REPLY_BYTES` are refused
with a request to page (service_registry).  The Aurora endpoint applies the
same maxima to Thrift structs (aurorabridge/limits.py).

| what                                   | maximum            |
|----------------------------------------|--------------------|
| any string                             | 64 KiB, no NUL     |
| names, owners, teams, ids, label keys  | 256 characters     |
| label values                           | 4,096 characters   |
| descriptions                           | 16 KiB             |
| labels on one entity                   | 128                |
| any other list or map                  | 10,000 entries     |
| per-instance configs                   | = instance maximum |
| instances of a job                     | 100,000            |
| constraint nesting                     | 8 levels           |
| message nesting                        | 32 levels          |
| request                                | 64 MiB             |
| reply (unary)                          | 64 MiB: page it    |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from peloton.common.slices import Slicer
from peloton.core.errors import InvalidArgument

MAX_STRING = 64 * 1024
MAX_SHORT = 256
MAX_LABEL_VALUE = 4096
MAX_DESCRIPTION = 16 * 1024
MAX_LABELS = 128
MAX_LIST = 10_000
MAX_INSTANCES = 100_000
MAX_CONSTRAINT_DEPTH = 8
MAX_DEPTH = 32
MAX_REPLY_BYTES = 64 * 1024 * 1024

#: String fields held to MAX_SHORT wherever they appear.
SHORT_FIELDS = frozenset({"name", "job_name", "owner", "owningTeam", "owning_team", "ldapGroups",
                          "ldap_groups", "key", "hostname", "username", "role", "environment",
                          "respool_path", "user"})
#: (message name, field) pairs that are ids: held to MAX_SHORT.
ID_MESSAGES = frozenset({"JobID", "PodName", "PodID", "UpdateID", "TaskID", "ResourcePoolID",
                         "EntityVersion", "VolumeID", "SecretID", "HostPoolID"})
INSTANCE_FIELDS = frozenset({"instanceCount", "instance_count"})
PER_INSTANCE_MAPS = frozenset({"instanceConfig", "instance_spec"})


def _string_limit(message: str, field: str) -> int:
    if message in ID_MESSAGES:
        return MAX_SHORT
    if field == "description":
        return MAX_DESCRIPTION
    if message == "Label" and field == "value":
        return MAX_LABEL_VALUE
    if field in SHORT_FIELDS:
        return MAX_SHORT
    return MAX_STRING


def _list_limit(field: str) -> int:
    if field == "labels":
        return MAX_LABELS
    if field in PER_INSTANCE_MAPS:
        return MAX_INSTANCES
    return MAX_LIST


def check_request(request: Message, tick: Callable[[], None] | None = None) -> None:
    """Raise InvalidArgument naming the first field of `request` beyond its maximum.

    The walk is sliced (peloton/common/slices.py): `tick` is called per field, and by
    default yields to the hub every few milliseconds, so walking a 48 MB request does
    not stop every other call (it took 2.3 s for 720,000 environment variables)."""
    _message(request, "", 0, 0, tick or Slicer())


def _message(msg: Message, path: str, depth: int, constraints: int,
             tick: Callable[[], None]) -> None:
    if depth > MAX_DEPTH:
        raise InvalidArgument(f"{path}: nested more than {MAX_DEPTH} levels deep", field=path)
    short = msg.DESCRIPTOR.name
    if short == "Constraint":
        constraints += 1
        if constraints > MAX_CONSTRAINT_DEPTH:
            raise InvalidArgument(f"{path}: constraints nested more than {MAX_CONSTRAINT_DEPTH} "
                                  "levels deep", field=path)
    for field, value in msg.ListFields():
        tick()
        where = f"{path}.{field.name}" if path else field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            _count(value, where, _list_limit(field.name))
            for key, item in value.items():
                entry = f"{where}[{key!r}]"
                if isinstance(key, str):
                    _string(key, entry, MAX_SHORT)
                _value(item, entry, short, field.name, depth, constraints, tick)
        elif field.is_repeated:
            _count(value, where, _list_limit(field.name))
            for i, item in enumerate(value):
                _value(item, f"{where}[{i}]", short, field.name, depth, constraints, tick)
        else:
            _value(value, where, short, field.name, depth, constraints, tick)


def _value(value: Any, where: str, message: str, field: str, depth: int, constraints: int,
           tick: Callable[[], None]) -> None:
    if isinstance(value, Message):
        _message(value, where, depth + 1, constraints, tick)
    elif isinstance(value, str):
        _string(value, where, _string_limit(message, field))
    elif (isinstance(value, int) and not isinstance(value, bool) and field in INSTANCE_FIELDS
          and value > MAX_INSTANCES):
        raise InvalidArgument(f"{where}: {value} instances is more than the maximum of "
                                  f"{MAX_INSTANCES:,}", field=where)


def _string(value: str, where: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{where}: {len(value):,} characters is more than the maximum of "
                              f"{limit:,}", field=where)
    if "\x00" in value:
        raise InvalidArgument(f"{where}: contains a NUL character", field=where)


def _count(value: Any, where: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{where}: {len(value):,} entries is more than the maximum of "
                              f"{limit:,}", field=where)
