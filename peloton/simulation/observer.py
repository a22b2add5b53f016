"""The job manager's task runtimes, turned into the recorder's task events.

The simulation driver submits trace jobs to the real job manager and watches every
task runtime the job manager takes on (the listener its watch API uses).  A task's
*run* is one attempt; what the recorder hears about:

* `STARTED` when a run of a queued task is first seen RUNNING;
* when that run ends: `FINISHED` if it SUCCEEDED; `PREEMPTED` if the resource
  manager preempted it (termination PREEMPTED_RESOURCES); `LOST` if its host went
  away (state LOST) or was drained under it (KILLED_HOST_MAINTENANCE), or it ended
  any other way (it is queued again either way; the reason says what happened);
* a run that ends before it ran (a launch that failed, a kill while placing) is not
  an event: the task was queued and still is.

A run seen to end without ever being seen RUNNING (both in one write) still counts as
started and ended at that moment, so every finished task has a start.

Pure: runtimes in, recorder calls out; the driver supplies the time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from peloton.core.model.resources import Resources
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.states import JobType, TaskState
from peloton.simulation.recorder import SimulationRecorder
from peloton.simulation.result import TaskEventKind
from peloton.simulation.trace import TraceJob

K = TaskEventKind
#: Why a run that ran was interrupted, by its termination reason (LOST has its own text).
INTERRUPTED = {
    TerminationReason.PREEMPTED_RESOURCES: (K.PREEMPTED, "preempted: its pool was over its "
                                                         "entitlement"),
    TerminationReason.KILLED_HOST_MAINTENANCE: (K.LOST, "its host was drained for maintenance"),
}
HOST_GONE = "its host went away"


class TaskObserver:
    """Tracks every submitted task's current run and reports to the recorder."""

    def __init__(self, recorder: SimulationRecorder, now: Callable[[], float]) -> None:
        self._recorder = recorder
        self._now = now
        #: Peloton job id -> the trace job it runs.
        self.jobs: dict[str, TraceJob] = {}
        #: (job id, instance) -> the run id reported STARTED and not yet ended.
        self._running: dict[tuple[str, int], int] = {}
        #: (job id, instance) of tasks that finished.
        self._finished: set[tuple[str, int]] = set()
        #: Batch tasks submitted, and finished.
        self.batch_tasks = 0
        self.batch_finished = 0
        #: Resources of the tasks running now (the cluster's "used").
        self.used = Resources()

    # -- what the driver tells --------------------------------------------------------------
    def submitted(self, job_id: str, job: TraceJob) -> None:
        """The driver created `job` as Peloton job `job_id`: every instance is SUBMITTED."""
        self.jobs[job_id] = job
        t = self._now()
        if job.type is JobType.BATCH:
            self.batch_tasks += job.instances
        for instance in range(job.instances):
            self._recorder.task_event(t, K.SUBMITTED, job.job, instance)

    def queued(self) -> Iterator[tuple[str, int, TraceJob]]:
        """(job id, instance, trace job) of every submitted task neither running nor
        finished, in submission and instance order."""
        for job_id, job in self.jobs.items():
            for instance in range(job.instances):
                key = (job_id, instance)
                if key not in self._running and key not in self._finished:
                    yield job_id, instance, job

    @property
    def all_batch_finished(self) -> bool:
        """Every batch task submitted so far has finished."""
        return self.batch_finished == self.batch_tasks

    # -- what the job manager tells (its task listener) -------------------------------------
    def task_changed(self, job_id: str, instance: int, rt: TaskRuntime) -> None:
        """The job manager took on runtime `rt` for one task."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        key = (job_id, instance)
        if key in self._finished:
            return
        t = self._now()
        current = self._running.get(key)
        if current is not None and (rt.run_id != current or rt.state.terminal):
            if rt.run_id == current:
                self._end(key, job, instance, t, rt)
                return
            self._end(key, job, instance, t, None)  # replaced unseen; `rt` is the new run
            current = None
        if current is None and rt.state is TaskState.SUCCEEDED:
            # Ran and ended between two looks: it started and finished now.
            self._start(key, job, instance, t, rt.run_id)
            self._end(key, job, instance, t, rt)
            return
        if current is None and rt.state is TaskState.RUNNING:
            self._start(key, job, instance, t, rt.run_id)

    def _start(self, key: tuple[str, int], job: TraceJob, instance: int, t: float,
               run_id: int) -> None:
        self._running[key] = run_id
        self.used = self.used + job.resources
        self._recorder.task_event(t, K.STARTED, job.job, instance)

    def _end(self, key: tuple[str, int], job: TraceJob, instance: int, t: float,
             rt: TaskRuntime | None) -> None:
        """The reported run of a task ended (`rt` its last runtime; None: replaced unseen)."""
        del self._running[key]
        self.used = self.used - job.resources
        if rt is not None and rt.state is TaskState.SUCCEEDED:
            self._finished.add(key)
            if job.type is JobType.BATCH:
                self.batch_finished += 1
            self._recorder.task_event(t, K.FINISHED, job.job, instance)
            return
        kind, reason = K.LOST, HOST_GONE
        if rt is None:
            reason = "its run was replaced"
        elif rt.termination in INTERRUPTED:
            kind, reason = INTERRUPTED[rt.termination]
        elif rt.state is not TaskState.LOST:
            reason = f"its run ended {rt.state.value}" + (f": {rt.message}" if rt.message else "")
        self._recorder.task_event(t, kind, job.job, instance, reason=reason)
