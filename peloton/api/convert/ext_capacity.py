"""Core values -> our capacity extension messages (pelotonpy.ext.capacity)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from peloton.api.gen.pelotonpy.ext import capacity_pb2 as pb
from peloton.core.model.resources import KINDS, Resources
from peloton.core.ports import HostSummary


def amounts_to_pb(res: Resources) -> pb.Amounts:
    """Resources as Amounts (an unbounded kind, e.g. the root before capacity is known, as 0)."""
    def finite(x: float) -> float:
        return x if math.isfinite(x) else 0.0

    return pb.Amounts(cpu=finite(res.cpu), mem_mb=finite(res.mem_mb),
                      disk_mb=finite(res.disk_mb), gpu=finite(res.gpu))


def host_capacity_to_pb(s: HostSummary) -> pb.HostCapacity:
    """One host's summary as HostCapacity."""
    return pb.HostCapacity(
        hostname=s.info.hostname, state=s.info.state.value, connected=s.connected,
        total=amounts_to_pb(s.capacity), allocated=amounts_to_pb(s.allocated), tasks=s.tasks,
        labels=[pb.Label(key=lb.key, value=lb.value) for lb in s.info.labels])


def host_capacities_to_pb(summaries: Sequence[HostSummary],
                          cluster: Resources) -> pb.ListHostCapacityResponse:
    """Every host, plus the cluster's UP capacity and what its connected UP hosts hold."""
    used = Resources()
    for s in summaries:
        if s.connected and s.info.state.value == "UP":
            used = used + s.allocated
    return pb.ListHostCapacityResponse(
        hosts=[host_capacity_to_pb(s) for s in sorted(summaries, key=lambda s: s.info.hostname)],
        cluster_total=amounts_to_pb(cluster), cluster_allocated=amounts_to_pb(used))


def above(limit: Resources, capacity: Resources) -> list[str]:
    """Kinds whose limit exceeds the cluster's capacity (for flagging in views)."""
    return [k.value for k in KINDS
            if math.isfinite(limit.get(k)) and limit.get(k) > capacity.get(k) + 1e-9]
