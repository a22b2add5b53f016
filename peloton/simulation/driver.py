"""The simulation engine: a scenario replayed through the real scheduler on a simulated clock.

`PelotonSimulator` implements `engine.Simulator` (its module docstring is the
contract).  Each run builds a fresh `daemons.SimulatedCluster` — the real host
manager, resource manager, placement engine and job manager over simulated hosts,
an in-memory SQLite store and one simulated clock — and drives it as a
discrete-event loop.  At each *instant* t, in this order:

1. the clock moves to t: the simulated hosts' timers due by then fire (runs start and
   end), their status updates reach the host manager;
2. the timeline actions due at t are applied (a pool edit through the pool API, a drain
   through StartMaintenance, hosts added to or removed from the simulated backend,
   preemption switched), then the trace jobs due at t are created through the job
   manager's API operations, in trace order (`SUBMITTED` for every instance);
3. the daemons' periodic passes due at t run, then their reactive work until quiet
   (`SimulatedCluster.run_instant`); the job manager's task listener turns what
   happens to tasks into events (`observer.TaskObserver`);
4. if a sample is due (t = k x `sample_interval`), every pool and the cluster is
   sampled.

The next instant is the earliest of: the next job's submit time, the next action, the
next sample, and whatever the daemons say is due next (a simulated host's timer, a
goal-state deadline, a placement retry, a periodic pass).  The run stops at the
horizon, or at the first instant after which every job is submitted, the timeline is
done, every batch task has finished and the trace has no service.  Then the end is
sampled, every task still queued gets `PENDING_AT_END` with the resource manager's
reason, and `finish(end)` closes the run.

Deterministic: nothing reads the wall clock (except the one measurement of how long the
run took, which only `RunStats` carries), there are no threads or greenlets, job ids
are numbered in trace order, and the simulated hosts draw from an RNG seeded with the
scenario's seed.  The same scenario gives the same recorder calls in the same order.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable

from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.states import JobType
from peloton.jobmgr.config import JobManagerConfig
from peloton.placement.config import PlacementEngineConfig
from peloton.resmgr.config import ResourceManagerConfig
from peloton.simulation.daemons import SimulatedCluster
from peloton.simulation.engine import RunStats
from peloton.simulation.jobs import job_spec_for
from peloton.simulation.observer import TaskObserver
from peloton.simulation.recorder import SimulationRecorder
from peloton.simulation.result import TaskEventKind
from peloton.simulation.scenario import (
    Action,
    AddHosts,
    DrainHosts,
    RemoveHosts,
    Scenario,
    SetPoolConfig,
    SetPreemption,
)
from peloton.simulation.trace import TraceJob

#: Instants in a row at one simulated time before the loop decides it is not progressing.
MAX_SAME_INSTANT = 1000

#: What a task still queued at the end is said to wait for when the resource manager does
#: not track it (the job manager had not handed it over yet).
NOT_QUEUED_YET = "not queued in the resource manager yet (the job manager was still creating it)"


#: How long a launched run of `instance` of trace job `job` lasts when it starts at simulated
#: time `now` (None: until the run ends).  The default is the trace's own duration; the
#: forecast (forecast_run.py) ends runs that were already running at a fixed simulated time.
DurationPolicy = Callable[[TraceJob, int, float], "float | None"]


def trace_duration(job: TraceJob, instance: int, now: float) -> float | None:
    """The default `DurationPolicy`: the trace's duration, whenever the run starts."""
    return job.duration_of(instance)


def job_id_for(index: int) -> str:
    """The Peloton job id of the trace's `index`-th job: a UUID numbered in trace order,
    so ids sort as the trace does and runs of one scenario name jobs alike."""
    return str(uuid.UUID(int=index + 1))


class PelotonSimulator:
    """`engine.Simulator` running the real daemons (see the module docstring).

    The configs default to the daemons' own defaults (with the simulation's two
    departures, `daemons.SimulatedCluster`); tests may pass others.
    """

    def __init__(self, *, resmgr_config: ResourceManagerConfig | None = None,
                 jobmgr_config: JobManagerConfig | None = None,
                 placement_config: PlacementEngineConfig | None = None,
                 duration: DurationPolicy = trace_duration,
                 stop_when: Callable[[], bool] | None = None,
                 after_round: Callable[[SimulatedCluster], int] | None = None) -> None:
        self.resmgr_config = resmgr_config
        self.jobmgr_config = jobmgr_config
        self.placement_config = placement_config
        self.duration = duration
        #: Asked after every instant: True ends the run there (the forecast stops once its
        #: targets started, or its wall time is spent), as if the horizon were reached.
        self.stop_when = stop_when
        #: Called after each reactive round of the daemons (`SimulatedCluster`).
        self.after_round = after_round
        #: What the last run did (`SimulatedCluster.counts`), for benchmarks.
        self.counts: dict[str, int] = {}

    def run(self, scenario: Scenario, recorder: SimulationRecorder) -> RunStats:
        """Replay `scenario`, reporting to `recorder`; how long it took."""
        started = time.perf_counter()  # only for RunStats: the report never sees it
        replay = _Replay(self, scenario, recorder)
        try:
            end = replay.run()
        finally:
            self.counts = dict(replay.cluster.counts)
            replay.cluster.close()
        return RunStats(simulated_secs=end, wall_secs=time.perf_counter() - started)


class _Replay:
    """One run of one scenario."""

    def __init__(self, sim: PelotonSimulator, scenario: Scenario,
                 recorder: SimulationRecorder) -> None:
        self.scenario = scenario
        self.recorder = recorder
        self._policy = sim.duration
        self._stop_when = sim.stop_when
        self.observer = TaskObserver(recorder, lambda: self.cluster.now)
        self.cluster = SimulatedCluster(
            epoch=scenario.epoch, durations=self._duration, seed=scenario.seed,
            preemption=scenario.preemption, watcher=self.observer.task_changed,
            resmgr_config=sim.resmgr_config, jobmgr_config=sim.jobmgr_config,
            placement_config=sim.placement_config, after_round=sim.after_round,
            origin=scenario.origin)
        self._jobs = scenario.trace.jobs
        self._next_job = 0
        self._actions = scenario.timeline
        self._next_action = 0
        self._samples = 0  # samples taken: the next is due at _samples * sample_interval
        self._last_sample = -math.inf
        #: Hosts up (in the cluster, not drained or removed), for the cluster samples.
        self._up: dict[str, Resources] = {h.hostname: h.resources for h in scenario.hosts}
        self._services = any(j.type is not JobType.BATCH for j in self._jobs)
        leaves = scenario.pools.leaves()
        #: Each pool's leaves (itself, for a leaf): an inner pool's pending count is theirs.
        self._leaves_under = {p: tuple(x for x in leaves if x == p or x.startswith(p + "/"))
                              for p in scenario.pools.paths()}

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> float:
        """The discrete-event loop (module docstring); returns the end time."""
        sc, cluster = self.scenario, self.cluster
        cluster.start(sc.hosts, ((p.path, p.config) for p in sc.pools))
        t, stuck = sc.origin, 0
        while True:
            cluster.advance_to(t)
            if self._apply_actions(t):
                cluster.deliver()
            self._submit(t)
            cluster.run_instant()
            if t >= self._sample_due():
                self._sample(t)
            if self._done() or (self._stop_when is not None and self._stop_when()):
                end = t
                break
            nxt = self._next_instant()
            if nxt > sc.horizon:
                end = sc.horizon
                break
            stuck = stuck + 1 if nxt == t else 0
            if stuck > MAX_SAME_INSTANT:
                raise RuntimeError(f"the simulation keeps finding work due at t={t:g}s "
                                   "without doing it (a bug in the engine)")
            t = nxt
        if self._last_sample < end:
            self._sample(end)
        self._pending_at_end(end)
        self.recorder.finish(end)
        return end

    def _next_instant(self) -> float:
        times = [self._sample_due()]
        if self._next_job < len(self._jobs):
            times.append(self._jobs[self._next_job].submit)
        if self._next_action < len(self._actions):
            times.append(self._actions[self._next_action].at)
        due = self.cluster.next_due()
        if due is not None:
            times.append(due)
        return max(self.cluster.now, min(times))

    def _done(self) -> bool:
        return (self._next_job == len(self._jobs) and self._next_action == len(self._actions)
                and not self._services and self.observer.all_batch_finished)

    # -- inputs -------------------------------------------------------------------------------
    def _apply_actions(self, t: float) -> bool:
        """Apply the actions due at `t`; whether there were any."""
        first = self._next_action
        while self._next_action < len(self._actions) and self._actions[self._next_action].at <= t:
            self._apply(self._actions[self._next_action])
            self._next_action += 1
        return self._next_action > first

    def _apply(self, action: Action) -> None:
        cluster = self.cluster
        if isinstance(action, SetPoolConfig):
            cluster.set_pool(action.path, action.config)
        elif isinstance(action, DrainHosts):
            cluster.drain_hosts(action.hostnames)
            for name in action.hostnames:
                self._up.pop(name, None)
        elif isinstance(action, RemoveHosts):
            cluster.remove_hosts(action.hostnames)
            for name in action.hostnames:
                self._up.pop(name, None)
        elif isinstance(action, AddHosts):
            cluster.add_hosts(action.hosts)
            self._up.update((h.hostname, h.resources) for h in action.hosts)
        elif isinstance(action, SetPreemption):
            cluster.set_preemption(action.enabled)
        else:  # pragma: no cover - the Action union is closed
            raise TypeError(f"unknown timeline action {action!r}")

    def _submit(self, t: float) -> None:
        while self._next_job < len(self._jobs) and self._jobs[self._next_job].submit <= t:
            index = self._next_job
            job = self._jobs[index]
            job_id = job_id_for(index)
            self.cluster.submit(job_spec_for(job, job.pool), job_id)
            self.observer.submitted(job_id, job)
            self._next_job += 1

    def _duration(self, job_id: str, instance: int) -> float:
        """How long a launched run of a task lasts on its simulated host."""
        job: TraceJob = self.observer.jobs[job_id]
        secs = self._policy(job, instance, self.cluster.now)
        return math.inf if secs is None else secs

    # -- outputs ------------------------------------------------------------------------------
    def _sample_due(self) -> float:
        return self._samples * self.scenario.sample_interval

    def _sample(self, t: float) -> None:
        """Every pool (inner pools count their leaves' pending tasks) and the cluster."""
        cluster, rec = self.cluster, self.recorder
        views = {p.path: cluster.pool(p.path) for p in self.scenario.pools}
        for path, view in views.items():
            pending = sum(views[leaf].queued_tasks for leaf in self._leaves_under[path])
            rec.pool_sample(t, path, demand=view.demand, entitlement=view.entitlement,
                            allocation=view.allocation + view.slack_allocation, pending=pending)
        rec.cluster_sample(t, capacity=cluster.capacity(), used=self.observer.used,
                           hosts=len(self._up))
        self._last_sample = t
        while self._sample_due() <= t:
            self._samples += 1

    def _pending_at_end(self, end: float) -> None:
        queued = list(self.observer.queued())
        reasons = self.cluster.pending_reasons([TaskId(j, i) for j, i, _ in queued])
        for job_id, instance, job in queued:
            reason = reasons.get(TaskId(job_id, instance))
            if reason is None:
                rt = self.cluster.task(job_id, instance)
                reason = NOT_QUEUED_YET if rt is None else \
                    f"not queued in the resource manager (the job manager has it {rt.state.value})"
            self.recorder.task_event(end, TaskEventKind.PENDING_AT_END, job.job, instance,
                                     reason=reason)

