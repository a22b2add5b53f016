"""The forecast's values: a snapshot of live state in, a forecast out.

A `Snapshot` is what the scheduler knows at one wall-clock moment `now`, as plain
values: the pools (config, entitlement, allocation), the hosts (capacity, labels,
up or draining), the tasks running (where, and when each is expected to end) and the
tasks queued (in queue order, with what each asks for), and the scheduler state that
decides what happens next and that no job carries (how long each queued gang has been
refused, failed placements, preemption counts, the daemons' timing, the host order
placement breaks ties by), so that with the true durations and no new jobs the forecast
does what the scheduler does.  The daemon that serves the
forecast builds it from its own state and its ports; the simulation copies it into
a scenario and runs the real daemons forward (peloton/simulation/forecast_plan.py).

Times in a `Forecast` are seconds after `now`; None means "not within the horizon".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from peloton.core.model.constraints import Constraint, Label
from peloton.core.model.resources import Resources
from peloton.core.model.respool import ResourcePoolConfig
from peloton.core.placement.hosts import IndexLayout
from peloton.core.respool.queues import QueueKind

#: Simulated seconds a forecast looks ahead at most, by default (a day).
DEFAULT_HORIZON = 86_400.0
#: Wall-clock seconds a forecast may spend, by default.
DEFAULT_WALL = 10.0
#: Seeded variations of the unknown durations, by default.
DEFAULT_VARIATIONS = 5


class DurationSource(StrEnum):
    """Where a task's expected duration comes from (how much to trust it)."""

    #: Given by the user or the job's config: taken as exact.
    GIVEN = "given"
    #: The median of the job's finished runs: varied between runs.
    HISTORY = "history"
    #: Nothing known: a default, varied widely.
    DEFAULT = "default"
    #: A service: runs until stopped.
    UNBOUNDED = "unbounded"


@dataclass(frozen=True, slots=True)
class PoolState:
    """One pool as the resource manager sees it now (`path` like /batch/adhoc)."""

    path: str
    config: ResourcePoolConfig
    entitlement: Resources = Resources()
    allocation: Resources = Resources()
    #: The two parts of `entitlement` admission compares against (None: not known; the
    #: forecast computes its own from the demand).
    non_slack_entitlement: Resources | None = None
    slack_entitlement: Resources | None = None


@dataclass(frozen=True, slots=True)
class LiveHost:
    """One host: what it has, its labels, and whether it may take new work."""

    hostname: str
    capacity: Resources
    labels: tuple[Label, ...] = ()
    #: In maintenance (draining or down): takes no new work, its tasks move off.
    maintenance: bool = False


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A task holding resources on a host now.

    `remaining` is the expected seconds until it ends (None: a service, unbounded);
    `source` says how it was estimated.
    """

    job_id: str
    instance: int
    pool: str
    resources: Resources
    hostname: str
    remaining: float | None
    source: DurationSource = DurationSource.GIVEN
    priority: int = 0
    preemptible: bool = True
    #: Seconds it has run (preemption takes the most recently started first).
    elapsed: float = 0.0
    #: A whole run's expected seconds, for a run again after preemption (None: `remaining`).
    duration: float | None = None


@dataclass(frozen=True, slots=True)
class QueuedTask:
    """A task waiting: for admission in its pool, or (`admitted`) for a host.

    `duration` is how long it will run once started (None: a service); `gang` the
    number of tasks of its job placed all or nothing with it (1: alone).
    """

    job_id: str
    instance: int
    pool: str
    resources: Resources
    duration: float | None
    source: DurationSource = DurationSource.GIVEN
    priority: int = 0
    preemptible: bool = True
    constraint: Constraint | None = None
    gang: int = 1
    admitted: bool = False
    #: The resource manager's own words for why it waits ("" if it gave none).
    reason: str = ""
    #: Seconds since admission first refused its gang (None: not refused yet).  A gang
    #: refused long enough holds room in its pool (core/respool/admission.py), so how long
    #: it has waited decides what is admitted beside it.
    refused_for: float | None = None
    #: Its gang holds its queue's reservation now: work behind it starts only beside it.
    holds_room: bool = False
    #: Times placement failed to find it a host; the wait before the next try, and when it
    #: gives its admission back, grow with them (resmgr/taskbook.py).
    placement_attempts: int = 0
    #: The pool queue it waits in (admission moves a refused gang to its class's queue).
    queue: QueueKind = QueueKind.PENDING
    #: Seconds until its placement retry is due (None: not waiting for one).  An admitted
    #: task placement failed for waits that long before placement looks at it again.
    retry_in: float | None = None


@dataclass(frozen=True, slots=True)
class HostRotation:
    """Which host placement picks among equals, as the live daemons hold it now.

    Placement takes the fullest host that fits and breaks ties by the host's position in
    its index; hosts leave the index while full and come back at the position freed last,
    in the order the host manager offers them again.  So the same tasks on the same hosts
    are placed on other hosts than live unless both orders are copied.  `offer_order`:
    the host manager's offerable hosts in lease order; `layout`: the placement engine's
    index (None: it has not placed yet).
    """

    offer_order: tuple[str, ...]
    layout: IndexLayout | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Live state at wall-clock `now` (epoch seconds); `queued` is in queue order."""

    now: float
    #: In the live tree's order, parents first (admission visits the leaves in that order).
    pools: tuple[PoolState, ...]
    hosts: tuple[LiveHost, ...]
    running: tuple[RunningTask, ...] = ()
    queued: tuple[QueuedTask, ...] = ()
    preemption: bool = True
    #: The host order placement uses (None: not known; the forecast starts one afresh).
    rotation: HostRotation | None = None
    #: Seconds since the resource manager last computed entitlements (None: not known).
    #: It recomputes on new demand only a minimum interval after the last time.
    entitled_for: float | None = None
    #: Demand changed since (the entitlements do not count all of it yet).
    entitlement_stale: bool = False
    #: Seconds since the resource manager's admission loop last passed (None: not known);
    #: it passes every scheduling period after that.
    admitted_for: float | None = None
    #: (pool path, preemption cycles in a row it has been over its entitlement), for the
    #: pools counted now: preemption acts after a number of such cycles.
    over_cycles: tuple[tuple[str, int], ...] = ()
    #: The resource manager's monotonic clock at now (None: not known).  The forecast's
    #: daemons count time on the same clock, so what they compute from times (a retry due
    #: time, the next admission pass) rounds as the live daemons' arithmetic does.
    monotonic: float | None = None

    def pool(self, path: str) -> PoolState:
        """The pool at `path` (KeyError if none)."""
        for pool in self.pools:
            if pool.path == path:
                return pool
        raise KeyError(path)


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a forecast may spend: simulated horizon, wall time, number of variations."""

    horizon: float = DEFAULT_HORIZON
    wall: float = DEFAULT_WALL
    variations: int = DEFAULT_VARIATIONS


class BindingKind(StrEnum):
    """The constraint that keeps a queued task from starting now."""

    POOL_LIMIT = "pool-limit"
    RESERVATION = "reservation"
    ENTITLEMENT = "entitlement"
    GANG = "gang"
    PLACEMENT = "placement"
    PREEMPTION = "preemption"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Binding:
    """What binds now, in words, with the numbers behind it."""

    kind: BindingKind
    summary: str
    #: 1-based place in its pool's queue, and the queue's length (0: not queued for admission).
    queue_position: int = 0
    queue_length: int = 0
    #: Hosts that could take it now, of those up, and why the others cannot (reason, count).
    hosts_fit: int = 0
    hosts_total: int = 0
    rejections: tuple[tuple[str, int], ...] = ()
    #: The resource manager's own reason, when it gave one.
    scheduler_reason: str = ""


@dataclass(frozen=True, slots=True)
class Estimate:
    """When the target starts, over the variations: seconds after `now` (None: not within
    the horizon); `runs` variations finished, `started` of them within the horizon."""

    p50: float | None
    p90: float | None
    runs: int
    started: int


class CounterfactualKind(StrEnum):
    """A change that might start the target sooner."""

    RESERVATION = "reservation"
    STOP_JOB = "stop-job"
    ADD_HOSTS = "add-hosts"
    FEWER_INSTANCES = "fewer-instances"
    SMALLER_RESOURCES = "smaller-resources"


@dataclass(frozen=True, slots=True)
class Counterfactual:
    """One change and the estimate with it (`estimate` None: not run, out of wall time)."""

    kind: CounterfactualKind
    change: str
    estimate: Estimate | None


@dataclass(frozen=True, slots=True)
class Forecast:
    """The answer for one job's (or one task's) pending instances."""

    job_id: str
    instances: tuple[int, ...]
    now: float
    estimate: Estimate
    binding: Binding
    #: The changes that start it sooner than `estimate` over the same seeds (those that would
    #: not, and those not run within the wall time, are named in `notes`).
    counterfactuals: tuple[Counterfactual, ...]
    bounds: Bounds
    #: Wall-clock seconds spent, and whether the wall cap cut it short.
    wall_secs: float = 0.0
    truncated: bool = False
    #: What the forecast assumed (unknown durations, things it could not model).
    notes: tuple[str, ...] = ()
