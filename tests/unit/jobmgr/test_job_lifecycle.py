"""A stopped or killed service job brought back by a workflow, as on Peloton.

Peloton's rules (pkg/jobmgr/cached/job.go updateJobRuntime, goalstate/job_kill.go,
cached/workflow_strategy.go): a RESTART workflow, a START workflow and an update
with start_pods set the job's goal back to RUNNING; restart and start run every
instance they name, an update that does not start pods leaves stopped instances
stopped (they only take the new config) and still succeeds; a kill brings the
job's state version up to its desired state version, so bringing the job back
starts only the workflow's instances; StartJob (desired state version bumped)
starts every task; an update that starts pods while the job is still being killed
is refused (ABORTED "job is being terminated, cannot update with start_pods set
now").  A stop leaves the job's active workflow to Peloton's rule: it goes on and
completes; what a step touches once the job's goal is KILLED stays stopped (Peloton's
addInstancesInUpdate rule, applied to every instance), so a restart or update step that
comes after the stop never runs an instance again.  Each test drives the whole job
manager in the deterministic harness.
"""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import Conflict
from peloton.core.model.update import UpdateSpec
from peloton.core.states import JobState, TaskState, WorkflowState, WorkflowType
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState
W = WorkflowState


def killed_job(h: Harness, instances: int = 2) -> str:
    """A service job that ran and was stopped (StopJob: goal KILLED), fully killed."""
    jid = h.create(job_spec(instances))
    h.settle(5.0)
    assert h.states(jid) == [S.RUNNING] * instances
    h.jm.jobs.change_goal(jid, JobState.KILLED)
    h.settle(30.0)
    assert h.states(jid) == [S.KILLED] * instances
    runtime = h.store.get_job_runtime(jid)
    assert runtime.state is JobState.KILLED and runtime.goal_state is JobState.KILLED
    # The kill caught the state version up with the desired one (Peloton's killJob).
    assert runtime.state_version == runtime.desired_state_version
    return jid


def finished(h: Harness, update_id: str, seconds: float = 60.0) -> WorkflowState:
    h.settle(seconds)
    return h.store.get_update(update_id).state


def test_restart_of_a_killed_job_runs_every_instance_again(h: Harness) -> None:
    jid = killed_job(h)
    update = h.jm.workflows.create(jid, WorkflowType.RESTART, UpdateSpec(batch_size=1))
    assert h.store.get_job_runtime(jid).goal_state is JobState.RUNNING
    assert finished(h, update.update_id) is W.SUCCEEDED
    assert h.states(jid) == [S.RUNNING, S.RUNNING]
    assert h.store.get_job_runtime(jid).state is JobState.RUNNING


def test_start_job_of_a_killed_job_starts_every_task(h: Harness) -> None:
    jid = killed_job(h, 3)
    h.jm.jobs.change_goal(jid, JobState.RUNNING)
    h.settle(30.0)
    assert h.states(jid) == [S.RUNNING] * 3
    assert h.store.get_job_runtime(jid).state is JobState.RUNNING


def test_update_starting_pods_brings_a_killed_job_back_on_the_new_config(h: Harness) -> None:
    jid = killed_job(h)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE,
                                   UpdateSpec(batch_size=1, start_tasks=True),
                                   new_spec=job_spec(3, command="run --v2"))
    runtime = h.store.get_job_runtime(jid)
    assert runtime.goal_state is JobState.RUNNING
    assert finished(h, update.update_id) is W.SUCCEEDED
    tasks = h.store.get_task_runtimes(jid)
    assert [rt.state for rt in tasks.values()] == [S.RUNNING] * 3
    assert {rt.config_version for rt in tasks.values()} == {update.config_version}
    assert h.store.get_job_runtime(jid).state is JobState.RUNNING


def test_update_without_start_pods_leaves_a_killed_job_stopped_and_succeeds(h: Harness) -> None:
    jid = killed_job(h)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                                   new_spec=job_spec(2, command="run --v2"))
    assert finished(h, update.update_id) is W.SUCCEEDED
    assert h.states(jid) == [S.KILLED, S.KILLED]
    runtime = h.store.get_job_runtime(jid)
    assert runtime.goal_state is JobState.KILLED and runtime.state is JobState.KILLED
    assert {rt.desired_config_version for rt in h.store.get_task_runtimes(jid).values()} == {
        update.config_version}


def test_start_pods_while_the_kill_is_in_progress_is_refused(h: Harness) -> None:
    jid = h.create(job_spec(2))
    h.settle(5.0)
    h.hosts.auto_run = False
    h.jm.jobs.change_goal(jid, JobState.KILLED)
    h.jm.engines.job.run_due()  # the kill is under way; the runs have not ended yet
    for run in h.run_ids(jid):
        h.hosts.hosts[h.hosts.runs()[run]].bookings.pop(run)  # kills never confirmed
    before = h.store.get_job_runtime(jid)
    assert any(not rt.state.terminal for rt in h.store.get_task_runtimes(jid).values())
    with pytest.raises(Conflict, match="job is being terminated"):
        h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(start_tasks=True),
                              new_spec=job_spec(2, command="run --v2"))
    assert h.store.get_job_runtime(jid) == before


def test_stop_then_start_workflows_of_v0(h: Harness) -> None:
    jid = h.create(job_spec(2))
    h.settle(5.0)
    stop = h.jm.workflows.create(jid, WorkflowType.STOP, UpdateSpec())
    assert finished(h, stop.update_id) is W.SUCCEEDED
    assert h.states(jid) == [S.KILLED, S.KILLED]
    start = h.jm.workflows.create(jid, WorkflowType.START, UpdateSpec(batch_size=1))
    assert finished(h, start.update_id) is W.SUCCEEDED
    assert h.states(jid) == [S.RUNNING, S.RUNNING]
    assert h.store.get_job_runtime(jid).goal_state is JobState.RUNNING


def test_replace_with_a_new_name_runs_the_update(h: Harness) -> None:
    jid = h.create(job_spec(2, name="old/name"))
    h.settle(5.0)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                                   new_spec=job_spec(2, name="new/name", command="run --v2"))
    assert finished(h, update.update_id) is W.SUCCEEDED
    assert h.job(jid).spec.name == "new/name"
    assert h.states(jid) == [S.RUNNING, S.RUNNING]


def _stop(h: Harness, jid: str, how: str) -> None:
    if how == "v1":
        h.jm.jobs.change_goal(jid, JobState.KILLED)  # v1alpha StopJob, Aurora killTasks
    else:
        h.jm.jobs.stop(jid)  # v0


@pytest.mark.parametrize("how", ["v1", "v0"])
def test_a_stop_right_after_a_restart_leaves_nothing_running(h: Harness, how: str) -> None:
    """Aurora's restartShards then killTasks (gorealis's redeploy scenario): the restart's
    first step, had it come after the stop, would have run every instance again."""
    jid = h.create(job_spec(2))
    h.settle(5.0)
    update = h.jm.workflows.create(jid, WorkflowType.RESTART, UpdateSpec(batch_size=0))
    _stop(h, jid, how)
    # The kill is evaluated before the workflow's first step (what happens under load).
    h.jm.engines.job.run_due()
    h.jm.engines.task.run_due()
    h.settle(60.0)
    assert h.states(jid) == [S.KILLED, S.KILLED]
    assert h.run_ids(jid) == []  # nothing left on any host
    # Peloton's rule: the stop does not end the workflow; it completes, nothing running.
    assert h.store.get_update(update.update_id).state is W.SUCCEEDED
    runtime = h.store.get_job_runtime(jid)
    assert (runtime.state, runtime.goal_state) == (JobState.KILLED, JobState.KILLED)


@pytest.mark.parametrize("how", ["v1", "v0"])
def test_a_stop_in_the_middle_of_a_rolling_update_keeps_later_batches_stopped(
        h: Harness, how: str) -> None:
    jid = h.create(job_spec(3))
    h.settle(5.0)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                                   new_spec=job_spec(3, command="run --v2"))
    h.hosts.auto_run = False  # the first batch's new run stays LAUNCHED: still under way
    h.run_due()
    assert h.store.get_update(update.update_id).state is W.ROLLING_FORWARD
    h.hosts.auto_run = True
    _stop(h, jid, how)
    h.jm.engines.job.run_due()
    h.jm.engines.task.run_due()
    h.settle(120.0)
    assert h.states(jid) == [S.KILLED] * 3
    assert h.run_ids(jid) == []
    assert h.store.get_update(update.update_id).state is W.SUCCEEDED


@pytest.mark.parametrize("how", ["v1", "v0"])
@pytest.mark.parametrize("step_first", [False, True])
@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 2), (2, 2)],
                         ids=["adds", "removes", "keeps"])
def test_a_stop_during_an_update_lets_it_complete_with_nothing_running(
        h: Harness, how: str, step_first: bool, before: int, after: int) -> None:
    """Peloton's StopJob does not touch the job's update: the update completes (SUCCEEDED,
    not ABORTED) whether it adds, removes or keeps instances, and whether its first step
    runs before or after the kill; every instance ends stopped on the new config, an
    instance it removes is gone, and nothing is left on a host."""
    jid = h.create(job_spec(before))
    h.settle(5.0)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                                   new_spec=job_spec(after, command="run --v2"))
    if step_first:
        h.jm.engines.update.run_due()
    _stop(h, jid, how)
    h.jm.engines.job.run_due()
    h.jm.engines.task.run_due()
    h.settle(120.0)
    done = h.store.get_update(update.update_id)
    assert done.state is W.SUCCEEDED, done
    assert h.states(jid) == [S.KILLED] * after
    assert h.run_ids(jid) == []
    assert {h.task(jid, i).desired_config_version for i in range(after)} == \
        {done.config_version}
    runtime = h.store.get_job_runtime(jid)
    assert (runtime.state, runtime.goal_state) == (JobState.KILLED, JobState.KILLED)


# -- one object per job, even across untracking ---------------------------------------------
def test_a_job_held_while_it_is_untracked_is_taken_back_by_its_next_write(h: Harness) -> None:
    """A call that read the job from the cache just before the engine untracked it writes
    through that object: the job is cached, active and evaluated again, and no second
    object of it (which would go stale: the engine then saw goal RUNNING while storage said
    KILLED) is ever loaded."""
    jid = killed_job(h)
    held = h.jm.cache.track(jid)  # a call reads it ... and the engine untracks it
    h.jm.queue.enqueue_job(jid)
    h.settle(5.0)
    assert h.jm.cache.get(jid) is None and jid not in h.store.get_active_jobs()
    assert h.jm.cache.track(jid) is held  # still held: taken back, not loaded again
    h.jm.cache.untrack(held)
    assert h.jm.cache.get(jid) is None
    update = h.jm.workflows.create(jid, WorkflowType.RESTART, UpdateSpec(batch_size=0))
    assert h.jm.cache.get(jid) is held and jid in h.store.get_active_jobs()
    assert finished(h, update.update_id) is W.SUCCEEDED
    assert h.states(jid) == [S.RUNNING, S.RUNNING]


def test_a_write_through_an_untracked_job_brings_it_back(h: Harness) -> None:
    jid = killed_job(h)
    held = h.jm.cache.track(jid)
    h.jm.queue.enqueue_job(jid)
    h.settle(5.0)
    assert h.jm.cache.get(jid) is None
    held.change_runtime(lambda rt: dataclasses.replace(
        rt, goal_state=JobState.RUNNING, desired_state_version=rt.desired_state_version + 1))
    assert h.jm.cache.get(jid) is held and jid in h.store.get_active_jobs()
    h.settle(30.0)  # evaluated again: StartJob's semantics, every task runs
    assert h.states(jid) == [S.RUNNING, S.RUNNING]


def test_an_action_chosen_before_a_start_job_is_not_run_after_it(h: Harness) -> None:
    """The engine resolved a stopped job to kill-and-untrack; StartJob came before the
    actions ran.  The kill would have set every task's goal KILLED and caught the state
    version up, so the start never happened; chosen again under the lock, it is skipped."""
    jid = killed_job(h, 3)
    h.jm.cache.track(jid)
    actions = h.jm.job_actions.resolve(jid)
    assert actions[0].name == "kill_untrack"
    h.jm.jobs.change_goal(jid, JobState.RUNNING)
    for action in actions:
        action.run()
    h.settle(30.0)
    assert h.states(jid) == [S.RUNNING] * 3
    assert h.store.get_job_runtime(jid).goal_state is JobState.RUNNING
