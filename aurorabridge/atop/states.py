"""Aurora status filters as Peloton states (for queries).

Each ScheduleStatus maps to every pod state that reads back as it (the
inverse of ptoa.states), so a filter and a listing can never disagree:
filtering on PENDING finds PENDING, READY and PLACING pods.  Statuses the
bridge never reports (THROTTLED, RESTARTING, DRAINING, PARTITIONED) match no
pod.  (Update status filters are applied after reading, on the Aurora side:
one workflow state reads as several update statuses depending on its
opaque data.)
"""

from __future__ import annotations

from collections.abc import Iterable

from aurorabridge.ptoa.states import POD_TO_SCHEDULE


def pod_states(statuses: Iterable[int]) -> list[int]:
    """Pod states matching any of `statuses` (sorted)."""
    wanted = set(statuses)
    return sorted(p for p, s in POD_TO_SCHEDULE.items() if s in wanted)
