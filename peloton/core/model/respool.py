"""Resource pool configuration values.

A pool has, per resource kind, a reservation (guaranteed), a limit (never
exceeded) and a share (weight for what is left over).  Reservations are
ELASTIC (lent to siblings while unused) or STATIC (always held).  The
controller limit caps controller tasks and the slack limit caps revocable
work, both as a percentage of the reservation.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from peloton.core.model.resources import ResourceKind


class ReservationType(StrEnum):
    """Whether unused reservation may be lent to other pools."""

    ELASTIC = "ELASTIC"
    STATIC = "STATIC"


class SchedulingPolicy(StrEnum):
    """Queue discipline of a leaf pool (Peloton has one)."""

    PRIORITY_FIFO = "PriorityFIFO"


@dataclass(frozen=True, slots=True)
class ResourceConfig:
    """Reservation, limit and share of one resource kind."""

    kind: ResourceKind
    reservation: float = 0.0
    limit: float = 0.0
    share: float = 1.0
    type: ReservationType = ReservationType.ELASTIC


@dataclass(frozen=True, slots=True)
class ResourcePoolConfig:
    """A pool as the user configures it; `parent_id` is "root" for top-level pools."""

    name: str
    parent_id: str
    resources: tuple[ResourceConfig, ...] = ()
    owning_team: str = ""
    ldap_groups: tuple[str, ...] = ()
    description: str = ""
    policy: SchedulingPolicy = SchedulingPolicy.PRIORITY_FIFO
    #: Percent of the reservation controller tasks may use; None = unchecked.
    controller_limit_percent: float | None = None
    #: Percent of the reservation revocable work may use; None = default (20%).
    slack_limit_percent: float | None = None

    def resource(self, kind: ResourceKind) -> ResourceConfig:
        """The config of one kind; an unset kind is reservation 0, limit 0, share 1."""
        for rc in self.resources:
            if rc.kind is kind:
                return rc
        return ResourceConfig(kind=kind)


@dataclass(frozen=True, slots=True)
class ResourcePool:
    """A stored pool: its id plus its config."""

    pool_id: str
    config: ResourcePoolConfig
