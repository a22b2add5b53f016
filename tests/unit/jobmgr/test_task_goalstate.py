"""Every (goal, state) of the task table, run through the task engine, with its effect checked.

For each pair a one-instance job is set up with its task forced into that state and goal
(service job, or batch for goal SUCCEEDED), the task is evaluated once by the real task
engine, and what happened is checked against what the action named by
peloton.core.lifecycle.task_goalstate promises: runtimes in storage and cache, and the
calls the fake resource and host managers saw.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from peloton.core.errors import NotFound
from peloton.core.lifecycle.run_end import LOST_BEFORE_START
from peloton.core.lifecycle.task_goalstate import STALE_RULES, TASK_RULES, TaskAction, task_action
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.task import TaskRuntime
from peloton.core.states import JobType, TaskState
from peloton.jobmgr.goalstate.task import ACTIONS, THROTTLED
from peloton.jobmgr.runcontrol import NOT_ON_HOST
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState
A = TaskAction
PAIRS = [(goal, state) for goal, row in TASK_RULES.items() for state in row]


def scene(h: Harness, goal: TaskState, state: TaskState, **fields: object) -> tuple[str, TaskRuntime]:
    """A one-instance job whose task is in `state` with `goal`; the fakes' logs are cleared."""
    kind = JobType.BATCH if goal is S.SUCCEEDED else JobType.SERVICE
    jid = h.create(job_spec(1, kind, max_failures=3))
    h.jm.engines.job.run_due()  # creates the task (PENDING, queued)
    now = h.clock.wall()
    terminal = state.terminal
    on_host = state in (S.LAUNCHED, S.STARTING, S.RUNNING, S.KILLING, S.PREEMPTING)
    rt = h.force_task(jid, 0, state=state, goal_state=goal, host="host-0" if on_host else "",
                      update_time=now, completion_time=now if terminal else 0.0, **fields)
    h.rm.queued.clear()
    h.rm.killed.clear()
    h.hosts.killed.clear()
    return jid, rt


def evaluate(h: Harness, jid: str) -> None:
    h.jm.queue.enqueue_task(jid, 0)
    assert h.jm.engines.task.run_due() == 1


def unchanged(h: Harness, jid: str, before: TaskRuntime) -> None:
    assert h.task(jid) == before
    assert not h.rm.queued and not h.rm.killed and not h.hosts.killed


def queued_again(h: Harness, jid: str, before: TaskRuntime) -> None:
    """A new run was started and handed to the resource manager."""
    after = h.task(jid)
    assert after.run_id == before.run_id + 1 and after.prev_run_id == before.run_id
    assert after.state is S.PENDING
    assert h.rm.queued[TaskId(jid, 0)].run_id == after.run_id


def started(h: Harness, jid: str, before: TaskRuntime) -> None:
    after = h.task(jid)
    assert after.state is S.PENDING and after.run_id == before.run_id
    assert TaskId(jid, 0) in h.rm.queued


def stopped(h: Harness, jid: str, before: TaskRuntime) -> None:
    after = h.task(jid)
    if before.state in NOT_ON_HOST:
        assert after.state is S.KILLED and h.rm.killed == [TaskId(jid, 0)]
        assert not h.hosts.killed
    else:
        assert after.state is S.KILLING
        assert h.hosts.killed == [str(RunId(jid, 0, before.run_id))]


def waits_then(timeout: Callable[[Harness], float], then: Callable[[Harness, str, TaskRuntime],
                                                                   None]
               ) -> Callable[[Harness, str, TaskRuntime], None]:
    """Nothing happens now; the task is looked at again after the timeout, then `then`."""
    def check(h: Harness, jid: str, before: TaskRuntime) -> None:
        unchanged(h, jid, before)
        due = h.jm.queue.tasks.deadline((jid, 0))
        assert due == pytest.approx(h.clock.monotonic() + timeout(h))
        h.advance(timeout(h))
        assert h.jm.engines.task.run_due() == 1
        then(h, jid, before)

    return check


def lost(h: Harness, jid: str, before: TaskRuntime) -> None:
    """The run is LOST; it counts as a failure only if it had started (core run_end.py)."""
    after = h.task(jid)
    counted = 1 if before.state is S.STARTING else 0
    assert after.state is S.LOST and after.failure_count == before.failure_count + counted
    assert (after.reason == LOST_BEFORE_START) is (counted == 0)
    assert h.hosts.killed == [str(RunId(jid, 0, before.run_id))]
    assert h.rm.killed == [TaskId(jid, 0)]  # whatever the resource manager held is given back


def killed_again(h: Harness, jid: str, before: TaskRuntime) -> None:
    assert h.hosts.killed == [str(RunId(jid, 0, before.run_id))]
    assert h.jm.queue.tasks.deadline((jid, 0)) == pytest.approx(
        h.clock.monotonic() + h.config.kill_timeout)


def deleted(h: Harness, jid: str, before: TaskRuntime) -> None:
    with pytest.raises(NotFound):
        h.store.get_task_runtime(jid, 0)
    assert h.job(jid).get_task(0) is None


EFFECTS: dict[TaskAction, Callable[[Harness, str, TaskRuntime], None]] = {
    A.NOOP: unchanged,
    A.STATE_INVALID: unchanged,
    A.START: started,
    A.STOP: stopped,
    A.INITIALIZE: queued_again,
    A.TERMINATED_RETRY: queued_again,  # no failures yet: no throttle
    A.FAIL_RETRY: queued_again,        # 0 failures of 3 allowed
    A.LAUNCH_RETRY: waits_then(lambda h: h.config.launch_timeout, lost),
    A.EXECUTOR_SHUTDOWN: waits_then(lambda h: h.config.kill_timeout, killed_again),
    A.DELETE: deleted,
}


@pytest.mark.parametrize("goal, state", PAIRS, ids=[f"{g.value}-{s.value}" for g, s in PAIRS])
def test_every_goal_and_state_does_what_its_action_promises(h: Harness, goal: TaskState,
                                                            state: TaskState) -> None:
    jid, before = scene(h, goal, state)
    evaluate(h, jid)
    EFFECTS[TASK_RULES[goal][state]](h, jid, before)


VERSIONED = [
    # (goal, state, fields) -> the action the versions force, before the table is read
    (S.SUCCEEDED, S.LAUNCHED, {"desired_run_id": 2}, A.STOP),
    (S.KILLED, S.KILLED, {"desired_run_id": 2}, A.NOOP),  # a kill goal never restarts
] + [
    # Every state of a run that is not the desired one (a restart) or behind its config (an
    # update): STALE_RULES, and the action must act on that state (a KILLING run's stop was
    # a no-op, so a kill lost with its owner left the run KILLING for ever).
    (S.RUNNING, state, fields, STALE_RULES[state])
    for state in TaskState if state is not S.DELETED
    for fields in ({"desired_run_id": 2}, {"desired_config_version": 2})
]


@pytest.mark.parametrize("goal, state, fields, action", VERSIONED,
                         ids=[f"{g.value}-{s.value}-{next(iter(f))}" for g, s, f, _ in VERSIONED])
def test_a_desired_run_or_config_wins_over_the_table(h: Harness, goal: TaskState,
                                                     state: TaskState, fields: dict[str, int],
                                                     action: TaskAction) -> None:
    jid, before = scene(h, goal, state, **fields)
    assert task_action(goal, state, run_id=before.run_id, desired_run_id=before.desired_run_id,
                       config_version=before.config_version,
                       desired_config_version=before.desired_config_version) is action
    evaluate(h, jid)
    EFFECTS[action](h, jid, before)


def test_reload_runtime_takes_what_storage_has_and_decides_again(h: Harness) -> None:
    jid, before = scene(h, S.RUNNING, S.RUNNING)
    behind = h.store.update_task_runtime(jid, 0, before)  # written by someone else
    job = h.job(jid)
    ACTIONS[A.RELOAD_RUNTIME](h.jm.task_actions, job, 0, before)
    assert job.task(0) == behind and behind.revision == before.revision + 1
    assert h.jm.queue.tasks.is_scheduled((jid, 0))


def test_a_failed_service_task_is_throttled_30_s_then_60_s(h: Harness) -> None:
    jid = h.create(job_spec(1))
    h.settle(1.0)
    (run,) = h.run_ids(jid)
    h.hosts.finish(run, S.FAILED)
    h.run_due()
    failed = h.task(jid)
    assert failed.state is S.FAILED and failed.failure_count == 1
    assert failed.message.startswith(THROTTLED)
    assert h.jm.queue.tasks.deadline((jid, 0)) == pytest.approx(h.clock.monotonic() + 30.0)
    h.advance(29.0)
    h.run_due()
    assert h.task(jid).run_id == 1  # not yet
    h.advance(1.0)
    h.run_due()
    assert h.task(jid).run_id == 2 and h.task(jid).state is S.RUNNING

    h.hosts.finish(h.run_ids(jid)[0], S.FAILED)
    h.run_due()
    assert h.task(jid).failure_count == 2
    assert h.jm.queue.tasks.deadline((jid, 0)) == pytest.approx(h.clock.monotonic() + 60.0)
    h.settle(60.0)
    assert h.task(jid).run_id == 3 and h.task(jid).state is S.RUNNING
