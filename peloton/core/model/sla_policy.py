"""SLA policies that bound a host drain, and the drain request a host under maintenance carries.

A drain takes a host's runs down so the host can go DOWN.  How far it may go at once is
decided per job by one of these policies (the arithmetic is `peloton.core.sla`):

| policy | from | rule |
|---|---|---|
| `MaxUnavailable(n)` | Peloton SlaSpec.maximum_unavailable_instances | at most n unavailable |
| `PercentageSla(p, d)` | Aurora PercentageSlaPolicy | p % of active instances RUNNING d s |
| `CountSla(c, d)` | Aurora CountSlaPolicy | c active instances RUNNING d s |
| `CoordinatorSla(url)` | Aurora CoordinatorSlaPolicy | a service approves each task (not asked) |

A host's `DrainRequest` says which rule applies (`DrainMode`): Peloton's StartMaintenance
drains within each service job's maximum unavailable instances and waits as long as it
takes; Aurora's slaDrainHosts uses each task's own policy (else the request's default)
and forces the rest once `timeout_secs` have passed; Aurora's drainHosts forces at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class MaxUnavailable:
    """Peloton: at most `count` instances of the job may be unavailable (0: no limit)."""

    count: int


@dataclass(frozen=True, slots=True)
class PercentageSla:
    """Aurora: at least `percentage` % of the job's active instances stay RUNNING, each for at
    least `duration_secs`."""

    percentage: float
    duration_secs: int = 0


@dataclass(frozen=True, slots=True)
class CountSla:
    """Aurora: at least `count` of the job's active instances stay RUNNING, each for at least
    `duration_secs`."""

    count: int
    duration_secs: int = 0


@dataclass(frozen=True, slots=True)
class CoordinatorSla:
    """Aurora: a coordinator service at `url` approves each task (answer key `status_key`)."""

    url: str
    status_key: str = "drain"


#: Any one of the policies.
SlaPolicy = MaxUnavailable | PercentageSla | CountSla | CoordinatorSla


class DrainMode(StrEnum):
    """Which rule bounds a host's drain."""

    #: Peloton's StartMaintenance: each service job's maximum unavailable instances; no timeout.
    JOB_SLA = "JOB_SLA"
    #: Aurora's slaDrainHosts: the task's own policy, else the request's default; forced after
    #: the timeout.
    SLA_POLICY = "SLA_POLICY"
    #: Aurora's drainHosts: every run at once.
    FORCE = "FORCE"


@dataclass(frozen=True, slots=True)
class DrainRequest:
    """How a host under maintenance is drained (stored with the host's maintenance record).

    `started_at` is the wall time the request was made; with `timeout_secs` set, runs still
    held by their SLA after `started_at + timeout_secs` are taken down anyway (Aurora).
    `min_required_instances` and `check_non_production` are Aurora's scheduler settings
    (-min_required_instances_for_sla_check, -sla_aware_kill_non_prod): a job with fewer
    active instances, or a non-production task when unchecked, is drained without a check.
    """

    mode: DrainMode = DrainMode.JOB_SLA
    default_policy: SlaPolicy | None = None
    timeout_secs: float | None = None
    started_at: float = 0.0
    min_required_instances: int = 0
    check_non_production: bool = True

    def deadline(self) -> float | None:
        """Wall time after which the drain is forced (None: never)."""
        if self.mode is DrainMode.FORCE:
            return self.started_at
        if self.mode is DrainMode.SLA_POLICY and self.timeout_secs is not None:
            return self.started_at + self.timeout_secs
        return None


#: What a host drained by Peloton's StartMaintenance carries.
JOB_SLA_DRAIN = DrainRequest()
