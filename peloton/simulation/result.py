"""What one simulation run produced: samples over time and each task's outcome.

A `SimulationResult` is built by `recorder.ResultRecorder` from the calls a
`Simulator` makes, and is the only input of the report.  Everything in it is
in simulated seconds since t = 0.

Definitions the report relies on:
- pool and cluster samples are step functions: a sample's values hold from its
  time until the next sample of the same series (before the first: zero);
- a task's wait is its first start minus its job's submit time in the trace
  (the scenario's trace, so after any arrival scaling); tasks that never started
  have no wait and are counted as "never ran" with the simulator's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from peloton.core.model.resources import Resources


class TaskEventKind(StrEnum):
    """What happened to one task (see `recorder.TRANSITIONS` for the order they may come in)."""

    #: The task's job was submitted (every instance gets one, at or after the trace's submit time).
    SUBMITTED = "SUBMITTED"
    #: The task started running on a host.
    STARTED = "STARTED"
    #: The task ran to its end (its duration elapsed).
    FINISHED = "FINISHED"
    #: The resource manager preempted the running task; it is queued again.
    PREEMPTED = "PREEMPTED"
    #: The task's host went away (removed, or drained under it); it is queued again.
    LOST = "LOST"
    #: The run ended while the task was queued; `reason` says why it was not running.
    PENDING_AT_END = "PENDING_AT_END"


@dataclass(frozen=True, slots=True)
class PoolSample:
    """One pool at time `t`, as the resource manager saw it."""

    t: float
    #: Resources of the pool's tasks waiting for admission.
    demand: Resources
    #: What the pool may use now (computed by the resource manager).
    entitlement: Resources
    #: Resources of the pool's admitted tasks (placing, launching or running).
    allocation: Resources
    #: Number of the pool's tasks waiting (not yet admitted).
    pending: int


@dataclass(frozen=True, slots=True)
class ClusterSample:
    """The cluster at time `t`."""

    t: float
    #: Total resources of the hosts that are up (not drained, not removed).
    capacity: Resources
    #: Resources of the tasks placed on those hosts.
    used: Resources
    #: Number of hosts up.
    hosts: int


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """One task over the whole run."""

    job: str
    instance: int
    pool: str
    #: The job's submit time in the scenario's trace.
    submit: float
    #: When the task first started (None: it never ran).
    first_start: float | None
    #: When the task finished (None: it did not, by the end of the run).
    finished: float | None
    preemptions: int
    lost: int
    #: Why the task was queued when the run ended ("" if it was not).
    pending_reason: str = ""

    @property
    def wait(self) -> float | None:
        """First start minus submit (None if it never ran)."""
        return None if self.first_start is None else max(0.0, self.first_start - self.submit)


@dataclass(frozen=True, slots=True)
class Interruption:
    """A running task stopped before its end: preempted or lost."""

    t: float
    job: str
    instance: int
    pool: str
    kind: TaskEventKind
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """Everything one run recorded (see the module docstring)."""

    label: str
    #: When the run stopped (at the horizon, or earlier once all work was done).
    end: float
    horizon: float
    sample_interval: float
    seed: int
    trace_name: str
    jobs: int
    #: Every pool path, pre-order; `leaves` are the ones tasks run in.
    pools: tuple[str, ...]
    leaves: tuple[str, ...]
    pool_samples: Mapping[str, tuple[PoolSample, ...]]
    cluster_samples: tuple[ClusterSample, ...]
    #: Every task of every submitted job, in trace order then instance order.
    tasks: tuple[TaskOutcome, ...]
    interruptions: tuple[Interruption, ...]
    #: The what-if's changes in words (empty for the baseline).
    changes: tuple[str, ...] = ()
    arrival_scale: float = 1.0
