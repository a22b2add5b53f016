"""The recorder: the one interface a simulator reports through, and the result it builds.

A `Simulator` (engine.py) calls a `SimulationRecorder` while it replays a
scenario; `ResultRecorder` is the implementation that checks every call against
the scenario and the rules below and builds the `SimulationResult` the report
reads.  Keeping the checks here means a simulator that breaks the contract fails
loudly in its tests instead of producing a plausible but wrong report.

The contract (a simulator must):
1. make calls in non-decreasing simulated time `t` (seconds since t = 0, at most
   the scenario's horizon);
2. report `SUBMITTED` for every instance of a job when it submits the job (at or
   after the job's submit time), then the task's life with the kinds of
   `TaskEventKind`, in an order `TRANSITIONS` allows (a preempted or lost task is
   queued again and may start again);
3. sample every pool of the scenario (`pool_sample`) and the cluster
   (`cluster_sample`) at t = 0, every `sample_interval` after, and at the end;
4. at the end, report `PENDING_AT_END` with the scheduler's reason for every
   task still queued, then call `finish(end)` once.  Every job whose submit time
   is at or before `end` must have been submitted by then.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from peloton.core.errors import PelotonError
from peloton.core.model.resources import Resources
from peloton.simulation.result import (
    ClusterSample,
    Interruption,
    PoolSample,
    SimulationResult,
    TaskEventKind,
    TaskOutcome,
)
from peloton.simulation.scenario import Scenario

#: Slack for "at or after the submit time" comparisons of floats.
TIME_EPSILON = 1e-6


class RecordingError(PelotonError):
    """A simulator broke the recorder's contract (a bug in the simulator, not in the input)."""

    kind = "recording_error"


class SimulationRecorder(Protocol):
    """What a simulator reports while it runs (see the module docstring for the contract)."""

    def pool_sample(self, t: float, pool: str, *, demand: Resources, entitlement: Resources,
                    allocation: Resources, pending: int) -> None:
        """The state of pool `pool` (a path of the scenario's pools) at time `t`."""
        ...

    def cluster_sample(self, t: float, *, capacity: Resources, used: Resources, hosts: int) -> None:
        """Capacity of the hosts up, resources used by placed tasks, and how many hosts are up."""
        ...

    def task_event(self, t: float, kind: TaskEventKind, job: str, instance: int, *,
                   reason: str = "") -> None:
        """Something happened to task `instance` of trace job `job`; `reason` for PENDING_AT_END
        (required), PREEMPTED and LOST (optional)."""
        ...

    def finish(self, end: float) -> None:
        """The run stopped at `end`; no call may follow."""
        ...


class TaskPhase(StrEnum):
    """Where a task is in its life, as far as the recorder knows."""

    NEW = "NEW"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    PENDING_AT_END = "PENDING_AT_END"


P, K = TaskPhase, TaskEventKind
#: (phase, event) -> next phase.  Anything else is a RecordingError.
TRANSITIONS: dict[tuple[TaskPhase, TaskEventKind], TaskPhase] = {
    (P.NEW, K.SUBMITTED): P.QUEUED,
    (P.QUEUED, K.STARTED): P.RUNNING,
    (P.RUNNING, K.FINISHED): P.FINISHED,
    (P.RUNNING, K.PREEMPTED): P.QUEUED,
    (P.RUNNING, K.LOST): P.QUEUED,
    (P.QUEUED, K.PENDING_AT_END): P.PENDING_AT_END,
}


@dataclass(slots=True)
class _Task:
    phase: TaskPhase = TaskPhase.NEW
    first_start: float | None = None
    finished: float | None = None
    preemptions: int = 0
    lost: int = 0
    pending_reason: str = ""


class ResultRecorder:
    """A `SimulationRecorder` that validates every call and builds a `SimulationResult`."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._jobs = {job.job: job for job in scenario.trace.jobs}
        self._pools = scenario.pools.paths()
        self._pool_set = set(self._pools)
        self._samples: dict[str, list[PoolSample]] = {p: [] for p in self._pools}
        self._cluster: list[ClusterSample] = []
        self._tasks: dict[tuple[str, int], _Task] = {}
        self._interruptions: list[Interruption] = []
        self._now = 0.0
        self._result: SimulationResult | None = None

    # -- checks ----------------------------------------------------------------------------
    def _tick(self, t: float, what: str) -> float:
        """Check `t` against the contract; return it as a float."""
        t = float(t)
        if self._result is not None:
            raise RecordingError(f"{what} at t={t:g} after finish()")
        if not 0 <= t <= self.scenario.horizon + TIME_EPSILON:
            raise RecordingError(f"{what} at t={t:g} is outside [0, horizon {self.scenario.horizon:g}]")
        if t < self._now - TIME_EPSILON:
            raise RecordingError(f"{what} at t={t:g} goes back in time (last call at t={self._now:g})")
        self._now = max(self._now, t)
        return t

    # -- SimulationRecorder ------------------------------------------------------------------
    def pool_sample(self, t: float, pool: str, *, demand: Resources, entitlement: Resources,
                    allocation: Resources, pending: int) -> None:
        """Record one pool sample (see SimulationRecorder)."""
        t = self._tick(t, f"sample of pool {pool}")
        if pool not in self._pool_set:
            raise RecordingError(f"sample of unknown pool {pool!r} (pools: {', '.join(self._pools)})")
        if pending < 0:
            raise RecordingError(f"pool {pool}: pending count {pending} < 0")
        self._samples[pool].append(PoolSample(t, demand, entitlement, allocation, pending))

    def cluster_sample(self, t: float, *, capacity: Resources, used: Resources, hosts: int) -> None:
        """Record one cluster sample (see SimulationRecorder)."""
        t = self._tick(t, "cluster sample")
        if hosts < 0:
            raise RecordingError(f"host count {hosts} < 0")
        self._cluster.append(ClusterSample(t, capacity, used, hosts))

    def task_event(self, t: float, kind: TaskEventKind, job: str, instance: int, *,
                   reason: str = "") -> None:
        """Record one task event (see SimulationRecorder and TRANSITIONS)."""
        what = f"{kind.value} of {job}-{instance}"
        t = self._tick(t, what)
        spec = self._jobs.get(job)
        if spec is None:
            raise RecordingError(f"{what}: no job {job!r} in the scenario's trace")
        if not 0 <= instance < spec.instances:
            raise RecordingError(f"{what}: job {job} has instances 0..{spec.instances - 1}")
        task = self._tasks.setdefault((job, instance), _Task())
        nxt = TRANSITIONS.get((task.phase, kind))
        if nxt is None:
            raise RecordingError(f"{what} at t={t:g}: not allowed while the task is {task.phase.value}")
        if kind is TaskEventKind.SUBMITTED and t < spec.submit - TIME_EPSILON:
            raise RecordingError(f"{what} at t={t:g}: before the job's submit time {spec.submit:g}")
        if kind is TaskEventKind.PENDING_AT_END and not reason:
            raise RecordingError(f"{what}: a task pending at the end needs the scheduler's reason")
        task.phase = nxt
        if kind is TaskEventKind.STARTED and task.first_start is None:
            task.first_start = t
        elif kind is TaskEventKind.FINISHED:
            task.finished = t
        elif kind in (TaskEventKind.PREEMPTED, TaskEventKind.LOST):
            if kind is TaskEventKind.PREEMPTED:
                task.preemptions += 1
            else:
                task.lost += 1
            self._interruptions.append(Interruption(t, job, instance, spec.pool, kind, reason))
        elif kind is TaskEventKind.PENDING_AT_END:
            task.pending_reason = reason

    def finish(self, end: float) -> None:
        """Close the run at `end` and check that every task was accounted for."""
        end = self._tick(end, "finish")
        outcomes: list[TaskOutcome] = []
        for job in self.scenario.trace.jobs:
            for instance in range(job.instances):
                task = self._tasks.get((job.job, instance))
                if task is None:
                    if job.submit <= end + TIME_EPSILON:
                        raise RecordingError(f"job {job.job} (submit t={job.submit:g}) was never "
                                             f"submitted, though the run ended at t={end:g}")
                    continue
                if task.phase is TaskPhase.QUEUED:
                    raise RecordingError(f"task {job.job}-{instance} is queued at the end but got "
                                         "no PENDING_AT_END event with its reason")
                outcomes.append(TaskOutcome(job.job, instance, job.pool, job.submit, task.first_start,
                                            task.finished, task.preemptions, task.lost,
                                            task.pending_reason))
        sc = self.scenario
        self._result = SimulationResult(
            label=sc.label, end=end, horizon=sc.horizon, sample_interval=sc.sample_interval,
            seed=sc.seed, trace_name=sc.trace.header.name, jobs=len(sc.trace.jobs),
            pools=self._pools, leaves=sc.pools.leaves(),
            pool_samples={p: tuple(s) for p, s in self._samples.items()},
            cluster_samples=tuple(self._cluster), tasks=tuple(outcomes),
            interruptions=tuple(self._interruptions), changes=sc.changes,
            arrival_scale=sc.arrival_scale)

    # -- reading -----------------------------------------------------------------------------
    def result(self) -> SimulationResult:
        """The result (RecordingError before `finish`)."""
        if self._result is None:
            raise RecordingError("the simulator did not call finish(); the run has no result")
        return self._result
