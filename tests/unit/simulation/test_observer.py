"""The observer: job manager task runtimes in, the recorder's task events out (pure)."""

from __future__ import annotations

from dataclasses import replace

from peloton.core.model.resources import Resources
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.states import JobType, TaskState
from peloton.simulation.observer import TaskObserver
from peloton.simulation.result import TaskEventKind as K
from peloton.simulation.trace import TraceJob

S = TaskState
JOB = TraceJob("j", 0.0, "/a", 2, Resources(cpu=2, mem_mb=100), 60.0)


class Log:
    """A recorder that only keeps the task events."""

    def __init__(self) -> None:
        self.events: list[tuple[float, K, str, int, str]] = []

    def task_event(self, t: float, kind: K, job: str, instance: int, *, reason: str = "") -> None:
        self.events.append((t, kind, job, instance, reason))

    def pool_sample(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("not expected")

    def cluster_sample(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("not expected")

    def finish(self, end: float) -> None:
        raise AssertionError("not expected")


def observer(job: TraceJob = JOB) -> tuple[TaskObserver, Log, list[float]]:
    log, now = Log(), [0.0]
    obs = TaskObserver(log, lambda: now[0])
    obs.submitted("id", job)
    return obs, log, now


def rt(state: TaskState, run: int = 1, **fields: object) -> TaskRuntime:
    return replace(TaskRuntime(state=state, run_id=run), **fields)  # type: ignore[arg-type]


def test_a_run_is_started_when_seen_running_and_finished_when_it_succeeded() -> None:
    obs, log, now = observer()
    for state in (S.PENDING, S.LAUNCHED, S.STARTING):
        obs.task_changed("id", 0, rt(state))
    now[0] = 5.0
    obs.task_changed("id", 0, rt(S.RUNNING))
    obs.task_changed("id", 0, rt(S.RUNNING))  # written again (a health change): no event
    assert obs.used == Resources(cpu=2, mem_mb=100)
    now[0] = 65.0
    obs.task_changed("id", 0, rt(S.SUCCEEDED))
    assert [(t, k) for t, k, *_ in log.events] == [
        (0.0, K.SUBMITTED), (0.0, K.SUBMITTED), (5.0, K.STARTED), (65.0, K.FINISHED)]
    assert obs.used == Resources() and obs.batch_finished == 1 and not obs.all_batch_finished
    assert [i for _, i, _ in obs.queued()] == [1]


def test_interruptions_say_why_and_the_task_is_queued_again() -> None:
    obs, log, now = observer()
    obs.task_changed("id", 0, rt(S.RUNNING))
    obs.task_changed("id", 1, rt(S.RUNNING))
    now[0] = 9.0
    obs.task_changed("id", 0, rt(S.KILLED, termination=TerminationReason.PREEMPTED_RESOURCES))
    obs.task_changed("id", 1, rt(S.LOST, message="host removed"))
    obs.task_changed("id", 0, rt(S.INITIALIZED, run=2))
    assert log.events[-2:] == [
        (9.0, K.PREEMPTED, "j", 0, "preempted: its pool was over its entitlement"),
        (9.0, K.LOST, "j", 1, "its host went away")]
    assert [i for _, i, _ in obs.queued()] == [0, 1]
    obs.task_changed("id", 0, rt(S.RUNNING, run=2))
    assert log.events[-1] == (9.0, K.STARTED, "j", 0, "")


def test_a_drained_host_and_a_run_replaced_unseen_are_losses() -> None:
    obs, log, _ = observer()
    obs.task_changed("id", 0, rt(S.RUNNING))
    obs.task_changed("id", 0, rt(S.KILLED, termination=TerminationReason.KILLED_HOST_MAINTENANCE))
    obs.task_changed("id", 1, rt(S.RUNNING))
    obs.task_changed("id", 1, rt(S.RUNNING, run=2))  # a new run, its predecessor's end unseen
    assert [(k, i, r) for _, k, _, i, r in log.events[2:]] == [
        (K.STARTED, 0, ""), (K.LOST, 0, "its host was drained for maintenance"),
        (K.STARTED, 1, ""), (K.LOST, 1, "its run was replaced"), (K.STARTED, 1, "")]


def test_a_run_that_ended_between_two_looks_started_and_finished_then() -> None:
    obs, log, now = observer()
    now[0] = 3.0
    obs.task_changed("id", 0, rt(S.SUCCEEDED))
    obs.task_changed("id", 0, rt(S.SUCCEEDED))  # written again: already finished
    assert [(t, k) for t, k, *_ in log.events[2:]] == [(3.0, K.STARTED), (3.0, K.FINISHED)]


def test_services_never_count_as_batch_and_other_jobs_are_ignored() -> None:
    obs, log, _ = observer(replace(JOB, type=JobType.SERVICE, duration=None))
    assert obs.batch_tasks == 0 and obs.all_batch_finished
    obs.task_changed("other", 0, rt(S.RUNNING))
    assert len(log.events) == 2
