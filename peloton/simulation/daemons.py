"""The real scheduler on one simulated clock: host manager, resource manager, placement
engine and job manager over simulated hosts, stepped by the simulation driver.

Everything is built as `peloton up` builds it (peloton/cluster/allinone.py), over an
in-memory SQLite store, with one `SimulationClock` injected everywhere: the daemons
read it as their `Clock` (monotonic = simulated seconds since t = 0, wall = the
scenario's epoch + that), the simulated hosts (`SimBackend`) schedule their runs'
state changes on it.  Nothing is started: no greenlet, no thread, no sleep.  Instead
`SimulatedCluster` steps each daemon through its public `run_due()` / `next_due()` (as
the job manager's deterministic test harness does) and its loops' one-pass functions:

* *periodic* work at the daemon's own period, phased as its loop is (first pass one
  period after start; admission at once): host manager prune, entitlement refresh,
  preemption cycle, admission, evictor, deadlines, daemon jobs;
* *reactive* work, in `settle()`, round after round in a fixed order until a round
  finds nothing to do: the simulated hosts' due timers, then each daemon's `run_due()`
  (the host manager's deferred work and maintenance engine, the resource manager's
  status stream and, when work was signalled, admission, a placement round, the job
  manager's goal-state engines, its placement processor and its status stream).  A
  daemon blocked in a long poll reacts at once to the signal it waits for; this is that,
  without the waiting.

`next_due()` says when anything is next due (a timer of a simulated host, each daemon's
`next_due()`: a goal-state deadline, a placement retry, a maintenance step; a periodic
pass), so the driver jumps
from one due time to the next: a simulated day costs what its events cost.

The admission loop passes every `scheduling_period` (0.1 s) whether or not it was
woken; a pass that provably changes nothing (no work signalled, nothing timed due:
`Loops.next_admission`) is skipped, and no instant is made for it, so a quiet second
costs nothing while every pass that matters runs when the daemon would run it.

Configuration: the daemons' defaults, except that the host manager never reconciles
every run periodically (simulated hosts never lose an update).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from peloton.common.retry import NO_RETRY, Retrier
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.job import JobSpec
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.respool import ResourcePoolConfig
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import TaskRuntime
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.backends.base import BackendHost
from peloton.hostmgr.backends.sim import SimBackend, SimOutcome
from peloton.hostmgr.backends.sim_clock import ManualClock
from peloton.hostmgr.config import HostManagerConfig
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.placement.app import PlacementEngine
from peloton.placement.config import PlacementEngineConfig
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.config import ResourceManagerConfig
from peloton.resmgr.pools import PoolView
from peloton.simulation.cluster import SimHost
from peloton.storage import StoreOptions, open_store

#: Reactive rounds one instant may take before the driver decides the daemons are looping.
MAX_ROUNDS = 10_000
#: Dynamic ports every simulated host offers (trace tasks ask for none).
PORTS = (PortRange(31000, 31999),)

#: How long a launched run lasts (seconds; inf: until the run ends), given its job id and
#: instance.
Durations = Callable[[str, int], float]
#: Told (job id, instance, runtime) whenever the job manager takes on a task runtime.
TaskWatcher = Callable[[str, int, TaskRuntime], None]


class SimulationClock(ManualClock):
    """One simulated time: a `Clock` for the daemons and a `SimClock` for the simulated hosts.

    `now()` and `monotonic()` are simulated seconds since t = 0 (the same float, so a
    deadline the driver advances to is exactly due), starting at `origin`; `wall()` is
    `epoch` plus that.
    """

    def __init__(self, epoch: float, origin: float = 0.0) -> None:
        super().__init__(origin)
        self.epoch = epoch

    def monotonic(self) -> float:
        """Simulated seconds since t = 0."""
        return self.now()

    def wall(self) -> float:
        """The scenario's epoch plus the simulated seconds."""
        return self.epoch + self.now()


@dataclass(slots=True)
class _Periodic:
    """One daemon loop's periodic pass: what it runs, how often, when next."""

    name: str
    period: float
    step: Callable[[], object]
    due: float


def _backend_host(host: SimHost) -> BackendHost:
    return BackendHost(host.hostname, f"{host.hostname}-agent", host.resources, PORTS,
                       host.labels)


class SimulatedCluster:
    """The daemons on simulated hosts and one simulated clock; see the module docstring."""

    def __init__(self, *, epoch: float, durations: Durations, seed: int = 0,
                 preemption: bool = True, watcher: TaskWatcher | None = None,
                 resmgr_config: ResourceManagerConfig | None = None,
                 jobmgr_config: JobManagerConfig | None = None,
                 placement_config: PlacementEngineConfig | None = None,
                 after_round: Callable[[SimulatedCluster], int] | None = None,
                 origin: float = 0.0) -> None:
        self.clock = clock = SimulationClock(epoch, origin)
        #: Where the clock starts; the periodic passes fall at whole periods after it.
        self.origin = origin
        #: Called after every reactive round; returns the work it did (the forecast resumes
        #: live scheduler state there: forecast_resume.py).
        self._after_round = after_round
        self._durations = durations
        self.store = open_store("sqlite://", StoreOptions(
            bootstrap=True, retrier=Retrier(NO_RETRY), clock=clock.wall, sqlite_threads=0))
        self.backend = SimBackend(hosts=0, clock=clock, seed=seed, start_secs=0.0,
                                  behaviour=self._outcome)
        self.hostmgr = HostManager(self.store, self.backend, HostManagerConfig(
            consumers=("jobmgr", "resmgr"), reconcile_interval=0.0), clock=clock)
        self.resmgr = ResourceManager(self.store, self.hostmgr,
                                      replace(resmgr_config or ResourceManagerConfig(),
                                              preemption_enabled=preemption),
                                      clock=clock)
        self.placement = PlacementEngine(self.resmgr, self.hostmgr, placement_config)
        self.jobmgr: JobManager | None = None
        self._jobmgr_config = jobmgr_config or JobManagerConfig()
        self._watcher = watcher
        self._periodic: list[_Periodic] = []
        #: What the run did so far (instants stepped, placement rounds with work).
        self.counts = {"instants": 0, "placement_rounds": 0}

    # -- building ------------------------------------------------------------------------
    def start(self, hosts: Iterable[SimHost], pools: Iterable[tuple[str, ResourcePoolConfig]]) -> None:
        """Bring the cluster up at t = 0: hosts, then pools, then the job manager (its
        recovery finds nothing), as `peloton up` starts its daemons in that order."""
        self.hostmgr.connect()
        for host in hosts:
            self.backend.add_host(_backend_host(host))
        self.clock.run_due()  # the hosts register with the host manager
        self.hostmgr.settle()
        self.resmgr.load()
        for path, config in pools:
            self.resmgr.pools.create(config, pool_id=path)
        jm = self.jobmgr = JobManager(self.store, self.resmgr, self.hostmgr, self._jobmgr_config,
                                      clock=self.clock)
        if self._watcher is not None:
            watcher = self._watcher
            jm.cache.listeners.task.append(
                lambda job, instance, rt: watcher(job.job_id, instance, rt))
        jm.recovery.recover()
        hm, rm, rmc = self.hostmgr, self.resmgr, self.resmgr.config
        # In the order the daemons start.  The daemons were started a whole number of
        # periods before the origin (any phase is as real as another; this one puts every
        # loop's passes at multiples of its period after the origin, the origin included, so
        # what the timeline does then is in place for the jobs submitted then).
        start = self.origin
        self._periodic = [
            _Periodic("hostmgr prune", hm.config.prune_interval, hm.prune, start),
            _Periodic("resmgr entitlement", rmc.entitlement_period, rm.refresh_capacity, start),
            _Periodic("resmgr preemption", rmc.preemption_period, rm.loops.preempt_once, start),
            _Periodic("jobmgr evictor", jm.config.evict_interval, jm.evictor.evict_once, start),
            _Periodic("jobmgr deadlines", jm.deadlines.interval, jm.deadlines.check_once, start),
            _Periodic("jobmgr daemon jobs", jm.daemons.interval, jm.daemons.reconcile_once,
                      start),
        ]

    def close(self) -> None:
        """Release the store."""
        self.store.close()

    @property
    def jm(self) -> JobManager:
        """The job manager (after `start`)."""
        if self.jobmgr is None:
            raise RuntimeError("the simulated cluster is not started")
        return self.jobmgr

    # -- what the driver does to the cluster (as an operator or a client would) ----------
    def submit(self, spec: JobSpec, job_id: str) -> str:
        """Create a job through the job manager's API operations."""
        return self.jm.jobs.create(spec, job_id)

    def add_hosts(self, hosts: Iterable[SimHost]) -> None:
        """New simulated hosts register."""
        for host in hosts:
            self.backend.add_host(_backend_host(host))

    def remove_hosts(self, hostnames: Iterable[str]) -> None:
        """Simulated hosts vanish; their runs end LOST."""
        for name in hostnames:
            self.backend.remove_host(name)

    def drain_hosts(self, hostnames: Iterable[str]) -> None:
        """Start maintenance on hosts (HostService.StartMaintenance)."""
        for name in hostnames:
            self.hostmgr.start_maintenance(name)

    def set_pool(self, path: str, config: ResourcePoolConfig) -> None:
        """Replace a pool's config (ResourceManager.UpdateResourcePool)."""
        self.resmgr.pools.update(self.resmgr.pool_id_for_path(path), config)

    def set_preemption(self, enabled: bool) -> None:
        """Turn the resource manager's preemption on or off."""
        self.resmgr.set_preemption(enabled)

    def deliver(self) -> None:
        """What the simulated hosts just reported (hosts registering or leaving, runs lost)
        reaches the host manager now, before anything else happens at this instant: an
        operator's change to the machines is the first thing the daemons see."""
        self.clock.run_due()
        self.hostmgr.settle()

    # -- stepping ------------------------------------------------------------------------
    @property
    def now(self) -> float:
        """Simulated seconds since t = 0."""
        return self.clock.now()

    def advance_to(self, t: float) -> None:
        """Move the clock to `t`; simulated hosts' timers due by then fire (their status
        updates reach the host manager), the daemons react in `run_instant`."""
        self.clock.advance_to(t)

    def run_instant(self) -> None:
        """Everything due now: the periodic passes due, then `settle()`."""
        now, origin = self.now, self.origin
        self.counts["instants"] += 1
        for p in self._periodic:
            if p.due <= now:
                p.step()
                # The loop sleeps one period after each pass (k x period after the origin:
                # no drift).
                p.due = origin + (round((now - origin) / p.period) + 1) * p.period
        due = self.resmgr.loops.next_admission()
        if due is not None and due <= now:
            self.resmgr.loops.admit_pass()
        self.settle()

    def settle(self) -> int:
        """Reactive rounds (module docstring) until one does nothing; returns the work done."""
        total = 0
        for _ in range(MAX_ROUNDS):
            done = self._round()
            if not done:
                return total
            total += done
        raise RuntimeError(f"the daemons still had work after {MAX_ROUNDS} rounds at "
                           f"t={self.now:g}s of the simulation")

    def _round(self) -> int:
        done = self.clock.run_due()
        done += self.hostmgr.run_due()
        done += self.resmgr.run_due()
        placed = self.placement.run_due().tasks
        if placed:
            self.counts["placement_rounds"] += 1
        done += placed
        done += self.jm.run_due()
        if self._after_round is not None:
            done += self._after_round(self)
        return done

    def next_due(self) -> float | None:
        """The earliest simulated time anything is due (None: nothing ever again)."""
        times = [self.clock.next_due(), self.jm.next_due(), self.hostmgr.next_due(),
                 self.resmgr.next_due(), self.placement.next_due()]
        times.extend(p.due for p in self._periodic)
        due = [t for t in times if t is not None]
        return min(due) if due else None

    # -- reading ------------------------------------------------------------------------------
    def pool(self, path: str) -> PoolView:
        """The resource manager's view of the pool at `path`."""
        return self.resmgr.pools.get(self.resmgr.pool_id_for_path(path))

    def capacity(self) -> Resources:
        """What the host manager counts as the cluster's capacity (connected UP hosts)."""
        return self.hostmgr.cluster_capacity()[0]

    def pending_reasons(self, task_ids: Sequence[TaskId]) -> dict[TaskId, str]:
        """The resource manager's reasons for queued tasks (peloton/resmgr/reasons.py)."""
        return self.resmgr.pending_reasons(task_ids)

    def task(self, job_id: str, instance: int) -> TaskRuntime | None:
        """The job manager's runtime of one task (None if it has none yet)."""
        job: CachedJob | None = self.jm.cache.get(job_id)
        return job.get_task(instance) if job is not None else None

    # -- simulated hosts --------------------------------------------------------------------
    def _outcome(self, launch: LaunchSpec, rng: random.Random) -> SimOutcome:
        rid = RunId.parse(launch.run_id)
        return SimOutcome(self._durations(rid.job_id, rid.instance))

