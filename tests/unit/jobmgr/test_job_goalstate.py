"""Every (goal, state) of the job table, run through the job engine's resolver, effects checked.

For each pair a two-instance job is set up (instance 0 running on a host, instance 1
queued in the resource manager; or no tasks yet when the table says CREATE_TASKS or
RECOVER; or both ended when the job state is terminal) and forced into that goal and
state.  The resolver must name exactly the table's actions (main action plus
Peloton's follow-ups); the main action is run and its effect checked on storage, the
cache and the fakes.  The follow-ups are checked on their own below.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from peloton.core.errors import NotFound
from peloton.core.lifecycle.job_goalstate import JOB_RULES, JobAction, job_actions
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.job import JobRuntime, SlaSpec
from peloton.core.model.task import TaskRuntime
from peloton.core.model.update import UpdateSpec
from peloton.core.states import JobState, JobType, TaskState, WorkflowType
from tests.unit.jobmgr.harness import Harness, job_spec

J = JobState
S = TaskState
A = JobAction
PAIRS = [(goal, state) for goal, row in JOB_RULES.items() for state in row]
Before = tuple[JobRuntime, dict[int, TaskRuntime]]


def scene(h: Harness, goal: JobState, state: JobState, **fields: object) -> tuple[str, Before]:
    kind = JobType.BATCH if goal is J.SUCCEEDED else JobType.SERVICE
    jid = h.create(job_spec(2, kind))
    main = job_actions(goal, state, **{k: v for k, v in fields.items()  # type: ignore[arg-type]
                                       if k.endswith("state_version")})[0]
    if main not in (A.CREATE_TASKS, A.RECOVER):
        h.run_due()  # tasks created, placed and running
        (run1,) = [r for r in h.run_ids(jid) if RunId.parse(r).instance == 1]
        h.hosts.hosts[h.hosts.runs()[run1]].bookings.pop(run1)
        if state.terminal:
            h.force_task(jid, 0, state=S.KILLED, goal_state=S.KILLED, host="")
            (run0,) = h.run_ids(jid)
            h.hosts.hosts[h.hosts.runs()[run0]].bookings.pop(run0)
            h.force_task(jid, 1, state=S.KILLED, goal_state=S.KILLED, host="")
        else:
            h.force_task(jid, 1, state=S.PENDING, host="")
    runtime = h.force_job(jid, goal_state=goal, state=state, **fields)
    h.rm.queued.clear()
    h.rm.killed.clear()
    h.hosts.killed.clear()
    return jid, (runtime, dict(h.store.get_task_runtimes(jid)))


def run_main(h: Harness, jid: str) -> JobAction:
    """Check the resolver names the table's actions; run the main one; return it."""
    rt = h.job(jid).runtime
    names = job_actions(rt.goal_state, rt.state, state_version=rt.state_version,
                        desired_state_version=rt.desired_state_version)
    actions = h.jm.job_actions.resolve(jid)
    assert [a.name for a in actions] == [n.value for n in names]
    main = job_actions(rt.goal_state, rt.state, state_version=rt.state_version,
                       desired_state_version=rt.desired_state_version)[0]
    if main.value == actions[0].name and main not in FOLLOW_UPS:
        actions[0].run()
        return main
    return A.NOOP


FOLLOW_UPS = {A.DELETE_FROM_ACTIVE_JOBS, A.ENQUEUE_JOB_UPDATE, A.RUNTIME_UPDATE,
              A.EVALUATE_SLA}


def nothing(h: Harness, jid: str, before: Before) -> None:
    runtime, tasks = before
    assert h.store.get_job_runtime(jid) == runtime
    assert h.store.get_task_runtimes(jid) == tasks
    assert not h.rm.queued and not h.rm.killed and not h.hosts.killed


def created(h: Harness, jid: str, before: Before) -> None:
    assert h.states(jid) == [S.PENDING, S.PENDING]
    assert set(h.rm.queued) == {TaskId(jid, 0), TaskId(jid, 1)}
    runtime = h.store.get_job_runtime(jid)
    assert runtime.state is J.PENDING and runtime.state_version == runtime.desired_state_version


def killed(h: Harness, jid: str, before: Before) -> None:
    _, tasks = before
    after = h.store.get_task_runtimes(jid)
    assert all(rt.goal_state is S.KILLED for rt in after.values())
    if all(rt.state.terminal for rt in tasks.values()):
        assert not h.rm.killed and not h.hosts.killed
        return
    assert after[0].state is S.KILLING
    assert h.hosts.killed == [str(RunId(jid, 0, tasks[0].run_id))]
    assert after[1].state is S.KILLED and h.rm.killed == [TaskId(jid, 1)]
    assert h.store.get_job_runtime(jid).state is J.KILLING
    # In bulk: nothing was left for the task engine to decide, task by task (a launched
    # run's launch timer, set when it was launched, is a later look, not a decision now).
    tasks_schedule = h.jm.queue.tasks

    def due_before_kill_timeout(i: int) -> bool:
        due = tasks_schedule.deadline((jid, i))
        assert due is not None  # scheduled
        return due < h.clock.monotonic() + h.config.kill_timeout

    assert not any(tasks_schedule.is_scheduled((jid, i)) and due_before_kill_timeout(i) for i in (0, 1))


def untracked(h: Harness, jid: str, before: Before) -> None:
    assert h.jm.cache.get(jid) is None and jid not in h.store.get_active_jobs()
    assert h.store.get_job_runtime(jid).goal_state is before[0].goal_state  # still stored
    assert not h.jm.queue.jobs.is_tracked(jid)


def killed_then(end: Callable[[Harness, str, Before], None]
                ) -> Callable[[Harness, str, Before], None]:
    """Kill what runs; `end` (untrack, delete) only once nothing does."""
    def check(h: Harness, jid: str, before: Before) -> None:
        killed(h, jid, before)
        if all(rt.state.terminal for rt in before[1].values()):
            end(h, jid, before)
        else:
            assert h.jm.cache.get(jid) is not None

    return check


def deleted(h: Harness, jid: str, before: Before) -> None:
    assert h.jm.cache.get(jid) is None
    with pytest.raises(NotFound):
        h.store.get_job_runtime(jid)
    assert h.store.get_task_runtimes(jid) == {}


def started(h: Harness, jid: str, before: Before) -> None:
    _, tasks = before
    after = h.store.get_task_runtimes(jid)
    for inst, rt in after.items():
        assert rt.goal_state is S.RUNNING
        if tasks[inst].goal_state is not S.RUNNING:
            assert rt.desired_run_id == tasks[inst].run_id + 1  # a fresh run is asked for
    runtime = h.store.get_job_runtime(jid)
    assert runtime.state_version == runtime.desired_state_version


EFFECTS: dict[JobAction, Callable[[Harness, str, Before], None]] = {
    A.NOOP: nothing,
    A.STATE_INVALID: nothing,
    A.CREATE_TASKS: created,
    A.RECOVER: created,
    A.KILL: killed,
    A.UNTRACK: untracked,
    A.KILL_AND_UNTRACK: killed_then(untracked),
    A.DELETE: deleted,
    A.KILL_AND_DELETE: killed_then(deleted),
    A.START_TASKS: started,
}


@pytest.mark.parametrize("goal, state", [p for p in PAIRS if p[1] is not J.UNKNOWN],
                         ids=[f"{g.value}-{s.value}" for g, s in PAIRS if s is not J.UNKNOWN])
def test_every_goal_and_state_does_what_its_action_promises(h: Harness, goal: JobState,
                                                            state: JobState) -> None:
    jid, before = scene(h, goal, state)
    main = run_main(h, jid)
    assert main is JOB_RULES[goal][state] or (main is A.NOOP and JOB_RULES[goal][state] is A.NOOP)
    EFFECTS[main](h, jid, before)


@pytest.mark.parametrize("state, action", [(J.INITIALIZED, A.CREATE_TASKS),
                                           (J.KILLED, A.START_TASKS), (J.RUNNING, A.START_TASKS)])
def test_a_behind_state_version_starts_or_creates_tasks(h: Harness, state: JobState,
                                                        action: JobAction) -> None:
    jid, before = scene(h, J.RUNNING, state, state_version=1, desired_state_version=2)
    if action is A.START_TASKS:  # a stopped job: its tasks were killed
        for inst in (0, 1):
            h.force_task(jid, inst, goal_state=S.KILLED)
        before = (before[0], dict(h.store.get_task_runtimes(jid)))
    assert run_main(h, jid) is action
    EFFECTS[action](h, jid, before)


def test_an_unknown_state_reloads_the_runtime_from_storage(h: Harness) -> None:
    jid, (runtime, _) = scene(h, J.RUNNING, J.UNKNOWN)
    newer = h.store.update_job_runtime(jid, runtime)  # written behind the cache's back
    assert [a.name for a in h.jm.job_actions.resolve(jid)] == [A.RELOAD.value]
    h.jm.job_actions.resolve(jid)[0].run()
    assert h.job(jid).runtime == newer


# -- follow-ups -----------------------------------------------------------------------------
def test_runtime_update_derives_the_job_state_from_its_tasks_once_per_interval(
        h: Harness) -> None:
    jid = h.create(job_spec(2, JobType.BATCH))
    h.run_due()
    runtime = h.job(jid).runtime
    assert runtime.state is J.RUNNING and runtime.task_stats == {S.RUNNING: 2}
    h.hosts.finish(h.run_ids(jid)[0])
    h.run_due()
    assert h.job(jid).runtime.task_stats == {S.RUNNING: 2}  # not yet: debounced
    assert h.next_deadline() == pytest.approx(h.config.runtime_update_interval)
    h.advance(h.config.runtime_update_interval)
    h.run_due()
    runtime = h.job(jid).runtime
    assert runtime.state is J.RUNNING and runtime.task_stats == {S.RUNNING: 1, S.SUCCEEDED: 1}


def test_a_finished_batch_job_leaves_the_active_set_and_the_cache(h: Harness) -> None:
    jid = h.create(job_spec(2, JobType.BATCH))
    h.settle(1.0)
    for run in h.run_ids(jid):
        h.hosts.finish(run)
    h.settle(1.0)
    assert h.store.get_job_runtime(jid).state is J.SUCCEEDED
    assert jid not in h.store.get_active_jobs() and h.jm.cache.get(jid) is None


def test_evaluate_sla_starts_waiting_instances_as_room_frees_up(h: Harness) -> None:
    jid = h.create(job_spec(3, JobType.BATCH, sla=SlaSpec(maximum_running_instances=1)))
    h.settle(1.0)
    assert h.states(jid) == [S.RUNNING, S.INITIALIZED, S.INITIALIZED]
    h.hosts.finish(h.run_ids(jid)[0])
    h.settle(1.0)
    assert h.states(jid) == [S.SUCCEEDED, S.RUNNING, S.INITIALIZED]


def test_enqueue_job_update_has_an_active_workflow_evaluated(h: Harness) -> None:
    jid = h.create(job_spec(2))
    h.settle(1.0)
    job = h.job(jid)
    h.jm.workflows.create(jid, WorkflowType.RESTART, UpdateSpec(batch_size=1))
    h.jm.queue.updates.delete(jid)  # as if its own enqueue were lost
    actions = {a.name: a for a in h.jm.job_actions.resolve(jid)}
    actions[A.ENQUEUE_JOB_UPDATE.value].run()
    assert h.jm.queue.updates.is_scheduled(jid) and job.update is not None
