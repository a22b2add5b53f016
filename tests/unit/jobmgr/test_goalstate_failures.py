"""Failures and retries: a port that is down, a batch task's restart budget, action coverage.

* A port raising Unavailable fails the evaluation: the engine backs off (10 s, +-10 %)
  and evaluates again after the clock moves past the backoff, which then succeeds.
* A failed batch task runs again while its restart policy allows, then the job fails.
* Every action a goal-state table can name has an implementation, checked at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import pytest

from peloton.core.errors import Unavailable
from peloton.core.lifecycle import job_goalstate, task_goalstate, workflow_goalstate
from peloton.core.model.ids import TaskId
from peloton.core.model.sched import EnqueueFailure
from peloton.core.respool.records import RmTask
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr.goalstate import job, task, update
from peloton.jobmgr.goalstate.tables import MissingGoalStateAction, require_every_action
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState


class Outage:
    """Makes a port method raise Unavailable `times` times, then behave again."""

    def __init__(self, real: object, times: int = 1) -> None:
        self.real = real
        self.left = times
        self.calls = 0

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise Unavailable("resource manager is restarting")
        return self.real(*args, **kwargs)  # type: ignore[operator]


def test_a_resource_manager_outage_backs_the_job_off_then_it_is_retried(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    outage = Outage(h.rm.enqueue_gangs, times=2)
    monkeypatch.setattr(h.rm, "enqueue_gangs", outage)
    jid = h.create(job_spec(2))
    h.run_due()
    schedule = h.jm.queue.jobs
    assert schedule.failures(jid) == 1 and outage.calls == 1
    assert h.states(jid) == [S.PENDING, S.PENDING] and not h.rm.queued  # stored, not queued
    # Its own task writes asked for a look within the runtime interval: that comes first.
    h.settle(h.config.runtime_update_interval)
    assert schedule.failures(jid) == 2 and outage.calls == 2
    wait = h.next_deadline()
    assert wait is not None and 18.0 <= wait <= 22.0  # 10 s doubled, +-10 % jitter
    h.advance(wait - 0.5)
    h.run_due()
    assert outage.calls == 2  # still backing off
    h.advance(0.5)
    h.run_due()
    assert outage.calls == 3 and schedule.failures(jid) == 0
    assert h.states(jid) == [S.RUNNING, S.RUNNING]
    h.settle(1.0)
    assert h.job(jid).runtime.state is JobState.RUNNING


def test_a_host_manager_outage_backs_a_kill_off_then_it_is_retried(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    jid = h.create(job_spec(1))
    h.settle(1.0)
    (run,) = h.run_ids(jid)
    outage = Outage(h.hosts.kill)
    monkeypatch.setattr(h.hosts, "kill", outage)
    h.jm.control.set_goal(h.job(jid), [0], S.KILLED)  # the task engine stops the run
    h.run_due()
    assert outage.calls == 1 and h.jm.queue.tasks.failures((jid, 0)) == 1
    assert h.task(jid).state is S.KILLING and run in h.hosts.runs()  # asked, not done
    # KILLING is recorded before the host is asked (a crash leaves a trace), so the next
    # look waits for the kill timeout and then kills again without a grace period.
    h.settle(h.config.kill_timeout + 20.0)
    assert outage.calls == 2 and run not in h.hosts.runs()
    assert h.task(jid).state is S.KILLED


def test_a_refused_enqueue_leaves_the_reason_on_the_task(h: Harness,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pool_id: str, gangs: Sequence[Sequence[RmTask]]) -> list[EnqueueFailure]:
        return [EnqueueFailure(t.task_id, "pool is not a leaf") for g in gangs for t in g]

    monkeypatch.setattr(h.rm, "enqueue_gangs", refuse)
    jid = h.create(job_spec(1))
    h.run_due()
    assert h.task(jid).message == "pool is not a leaf" and TaskId(jid, 0) not in h.rm.queued


def test_a_batch_task_is_retried_up_to_its_restart_budget_then_the_job_fails(
        h: Harness) -> None:
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=2))
    h.settle(1.0)
    for attempt in (1, 2):
        (run,) = h.run_ids(jid)
        h.hosts.finish(run, S.FAILED)
        h.settle(1.0)
        rt = h.task(jid)
        assert rt.failure_count == attempt
        if attempt == 1:
            assert rt.run_id == 2 and rt.state is S.RUNNING  # FAIL_RETRY: a new run
    assert h.task(jid).state is S.FAILED and h.task(jid).run_id == 2  # budget spent
    assert h.store.get_job_runtime(jid).state is JobState.FAILED


def test_a_system_failure_gets_at_least_four_tries(h: Harness) -> None:
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=1))
    h.settle(1.0)
    for _ in range(3):
        (run,) = h.run_ids(jid)
        rt = h.task(jid)
        h.force_task(jid, 0, state=S.FAILED, reason="REASON_LAUNCH_FAILED",
                     failure_count=rt.failure_count + 1, completion_time=h.clock.wall())
        h.hosts.kill([run])  # the host side of that failure
        h.jm.queue.enqueue_task(jid, 0)
        h.settle(1.0)
    assert h.task(jid).run_id == 4  # 3 system failures, each retried despite max_failures=1


# -- coverage --------------------------------------------------------------------------------
def _named(rules: object) -> set[Enum]:
    out: set[Enum] = set()
    for row in rules.values() if isinstance(rules, dict) else ():
        out |= set(row.values()) if isinstance(row, dict) else {row}
    return out


TABLES = [
    ("job", job_goalstate.JobAction, _named(job_goalstate.JOB_RULES) | {
        job_goalstate.JobAction.START_TASKS, job_goalstate.JobAction.DELETE_FROM_ACTIVE_JOBS,
        job_goalstate.JobAction.ENQUEUE_JOB_UPDATE, job_goalstate.JobAction.RUNTIME_UPDATE,
        job_goalstate.JobAction.EVALUATE_SLA}, job.ACTIONS),
    ("task", task_goalstate.TaskAction, _named(task_goalstate.TASK_RULES) | {
        task_goalstate.TaskAction.INITIALIZE, task_goalstate.TaskAction.STOP}, task.ACTIONS),
    ("workflow", workflow_goalstate.WorkflowAction, set(
        workflow_goalstate.WORKFLOW_RULES.values()) | {
        workflow_goalstate.WorkflowAction.CHECK_FOR_ABORT,
        workflow_goalstate.WorkflowAction.COMPLETE}, update.ACTIONS),
]


@pytest.mark.parametrize("name, enum, named, implemented", TABLES, ids=[t[0] for t in TABLES])
def test_every_action_a_table_names_has_an_implementation(
        name: str, enum: type[Enum], named: set[Enum], implemented: dict[Enum, object]) -> None:
    assert {a for a in named if a.value != "noop"} <= set(implemented)
    assert set(implemented) == {a for a in enum if a.value != "noop"}  # and nothing else


def test_a_missing_implementation_fails_at_import_not_at_run_time() -> None:
    partial = {a: None for a in task_goalstate.TaskAction
               if a is not task_goalstate.TaskAction.FAIL_RETRY}
    with pytest.raises(MissingGoalStateAction, match="task goal-state actions without an "
                       "implementation: FAIL_RETRY"):
        require_every_action("task", task_goalstate.TaskAction, partial)
