"""Small readers shared by the ptoa converters: job keys, timestamps, instance ranges, pod ids.

Peloton conventions they decode: job names `role/env/name`; pod names
`<job-uuid>-<instance>`; pod (Mesos task) ids `<job-uuid>-<instance>-<run>`;
timestamps RFC 3339 strings (possibly with nanoseconds); and instance ranges
in workflow and diff results, which Peloton produces as *inclusive*
[from, to] (util.ConvertInstanceIDListToInstanceRange), unlike the half-open
ranges it accepts in requests such as RestartSpec.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from aurorabridge.thrift_api import api

_FRACTION = re.compile(r"(\.\d{6})\d+")


def job_key(job_name: str) -> Any | None:
    """The Aurora JobKey of a bridge job name; None if the name is not `role/env/name`."""
    parts = job_name.split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return api.JobKey(role=parts[0], environment=parts[1], name=parts[2])


def timestamp_ms(value: str) -> int:
    """Milliseconds since the epoch of an RFC 3339 timestamp; 0 when empty or unreadable."""
    if not value:
        return 0
    try:
        text = _FRACTION.sub(r"\1", value.strip()).replace("Z", "+00:00")
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        return 0


def instance_of(pod_name: str) -> int:
    """The instance id in a pod name `<job-uuid>-<instance>` (-1 if malformed)."""
    head, _, tail = pod_name.rpartition("-")
    return int(tail) if head and tail.isdigit() else -1


def pod_name_of(pod_id: str) -> str:
    """The pod name `<job-uuid>-<instance>` of a pod id `<job-uuid>-<instance>-<run>`."""
    return pod_id.rpartition("-")[0]


def run_of(pod_id: str) -> int:
    """The run number in a pod id `<job-uuid>-<instance>-<run>` (0 if malformed)."""
    _, _, tail = pod_id.rpartition("-")
    return int(tail) if tail.isdigit() else 0


def ranges(ids: Iterable[int]) -> list[Any]:
    """Aurora Ranges (inclusive) covering `ids`, merged and sorted."""
    out: list[Any] = []
    for i in sorted(set(ids)):
        if out and out[-1].last == i - 1:
            out[-1].last = i
        else:
            out.append(api.Range(first=i, last=i))
    return out


def ids_of_ranges(peloton_ranges: Iterable[Any]) -> list[int]:
    """Instance ids of Peloton result ranges (inclusive [from, to])."""
    ids: set[int] = set()
    for r in peloton_ranges:
        ids.update(range(getattr(r, "from"), r.to + 1))
    return sorted(ids)
