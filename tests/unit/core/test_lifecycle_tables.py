"""State tables: every (goal, state) pair has an explicit entry, and the key rules hold."""

from __future__ import annotations

import pytest

from peloton.core.lifecycle.job_goalstate import (
    INVALID_GOALS as JOB_INVALID_GOALS,
)
from peloton.core.lifecycle.job_goalstate import (
    JOB_RULES,
    JobAction,
    job_actions,
    main_job_action,
)
from peloton.core.lifecycle.task_goalstate import (
    INVALID_GOALS,
    STALE_RULES,
    TASK_RULES,
    TaskAction,
    action_for,
    task_action,
)
from peloton.core.lifecycle.task_transitions import (
    ALLOCATED_STATES,
    RM_TIMEOUTS,
    RM_TRANSITIONS,
    check_runtime_write,
    rm_allows,
)
from peloton.core.lifecycle.workflow_goalstate import (
    WORKFLOW_RULES,
    WorkflowAction,
    workflow_actions,
)
from peloton.core.model.task import TaskRuntime
from peloton.core.states import JobState, TaskState, WorkflowState

S = TaskState


def test_task_table_is_total() -> None:
    assert set(TASK_RULES) | INVALID_GOALS == set(TaskState)
    for goal in TaskState:
        for state in TaskState:
            action = task_action(goal, state)
            assert isinstance(action, TaskAction)
            if goal in TASK_RULES:
                assert set(TASK_RULES[goal]) == set(TaskState), goal
            else:
                assert action is TaskAction.STATE_INVALID


@pytest.mark.parametrize(("goal", "state", "action"), [
    (S.RUNNING, S.INITIALIZED, TaskAction.START),
    (S.RUNNING, S.LAUNCHED, TaskAction.LAUNCH_RETRY),
    (S.RUNNING, S.FAILED, TaskAction.TERMINATED_RETRY),
    (S.RUNNING, S.KILLING, TaskAction.EXECUTOR_SHUTDOWN),
    (S.SUCCEEDED, S.FAILED, TaskAction.FAIL_RETRY),
    (S.SUCCEEDED, S.SUCCEEDED, TaskAction.NOOP),
    (S.KILLED, S.RUNNING, TaskAction.STOP),
    (S.KILLED, S.LOST, TaskAction.NOOP),
    (S.DELETED, S.KILLED, TaskAction.DELETE),
    (S.PREEMPTING, S.PREEMPTING, TaskAction.STATE_INVALID),
    (S.FAILED, S.RUNNING, TaskAction.STATE_INVALID),
    (S.PENDING, S.RUNNING, TaskAction.STATE_INVALID),
])
def test_task_rules(goal: TaskState, state: TaskState, action: TaskAction) -> None:
    assert task_action(goal, state) is action


def test_version_mismatch_comes_first() -> None:
    assert task_action(S.RUNNING, S.RUNNING, config_version=1,
                       desired_config_version=2) is TaskAction.STOP
    assert task_action(S.RUNNING, S.KILLED, config_version=1,
                       desired_config_version=2) is TaskAction.INITIALIZE
    assert task_action(S.RUNNING, S.RUNNING, run_id=1, desired_run_id=2) is TaskAction.STOP
    # A kill goal never restarts, and a terminal goal ignores config changes.
    assert task_action(S.KILLED, S.KILLED, run_id=1, desired_run_id=2) is TaskAction.NOOP
    assert task_action(S.SUCCEEDED, S.SUCCEEDED, config_version=1,
                       desired_config_version=2) is TaskAction.NOOP
    rt = TaskRuntime(state=S.FAILED, goal_state=S.RUNNING, run_id=3, desired_run_id=4)
    assert action_for(rt) is TaskAction.INITIALIZE


@pytest.mark.parametrize("state", list(TaskState))
def test_a_stale_run_is_stopped_reinitialized_or_left_to_its_kill(state: TaskState) -> None:
    expected = (TaskAction.INITIALIZE if state.terminal else
                TaskAction.EXECUTOR_SHUTDOWN if state is S.KILLING else TaskAction.STOP)
    assert STALE_RULES[state] is expected
    # An update: a terminal goal (a batch task's SUCCEEDED) takes no new config.
    assert task_action(S.RUNNING, state, config_version=1, desired_config_version=2) \
        is expected
    for goal in (S.RUNNING, S.SUCCEEDED):  # a restart
        assert task_action(goal, state, run_id=1, desired_run_id=2) is expected


def test_job_table_is_total() -> None:
    assert set(JOB_RULES) | JOB_INVALID_GOALS == set(JobState)
    for goal in JobState:
        for state in JobState:
            main = main_job_action(goal, state)
            if goal in JOB_RULES:
                assert set(JOB_RULES[goal]) == set(JobState)
            elif goal is JobState.UNKNOWN:
                assert main is JobAction.RELOAD
            else:
                assert main is JobAction.STATE_INVALID


def test_job_actions_and_followups() -> None:
    assert job_actions(JobState.RUNNING, JobState.INITIALIZED) == (
        JobAction.CREATE_TASKS, JobAction.DELETE_FROM_ACTIVE_JOBS, JobAction.ENQUEUE_JOB_UPDATE,
        JobAction.RUNTIME_UPDATE, JobAction.EVALUATE_SLA)
    assert job_actions(JobState.SUCCEEDED, JobState.SUCCEEDED) == (
        JobAction.UNTRACK, JobAction.DELETE_FROM_ACTIVE_JOBS, JobAction.ENQUEUE_JOB_UPDATE)
    assert job_actions(JobState.DELETED, JobState.KILLED) == (
        JobAction.KILL_AND_DELETE, JobAction.DELETE_FROM_ACTIVE_JOBS)
    assert job_actions(JobState.RUNNING, JobState.UNKNOWN) == (JobAction.RELOAD,)
    assert main_job_action(JobState.RUNNING, JobState.RUNNING, state_version=1,
                           desired_state_version=2) is JobAction.START_TASKS


def test_workflow_table_is_total() -> None:
    assert set(WORKFLOW_RULES) == set(WorkflowState)
    assert workflow_actions(WorkflowState.ROLLING_FORWARD) == (
        WorkflowAction.CHECK_FOR_ABORT, WorkflowAction.RUN)
    assert workflow_actions(WorkflowState.ROLLING_BACKWARD, all_done=True)[-1] is (
        WorkflowAction.COMPLETE)
    assert workflow_actions(WorkflowState.FAILED) == (WorkflowAction.CLEAR,)
    assert workflow_actions(WorkflowState.PAUSED, all_done=True)[-1] is (
        WorkflowAction.WRITE_PROGRESS)


def test_rm_transitions_table() -> None:
    assert set(RM_TRANSITIONS) == set(TaskState)
    assert rm_allows(S.PENDING, S.READY) and not rm_allows(S.PENDING, S.RUNNING)
    assert rm_allows(S.KILLED, S.PENDING) and not rm_allows(S.SUCCEEDED, S.PENDING)
    assert rm_allows(S.PREEMPTING, S.RUNNING)  # only by its timeout
    assert not rm_allows(S.PREEMPTING, S.READY)
    assert set(RM_TIMEOUTS) == {S.PLACING, S.LAUNCHING, S.RESERVED, S.PREEMPTING}
    for src, targets in RM_TRANSITIONS.items():
        for dst in targets:
            # Nothing goes from holding allocation to INITIALIZED (that would leak it).
            assert not (src in ALLOCATED_STATES and dst is S.INITIALIZED)


def _rt(state: TaskState, run: int = 1, **kw: object) -> TaskRuntime:
    return TaskRuntime(state=state, run_id=run, desired_run_id=run, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("old", "new", "ok"), [
    (_rt(S.PENDING), _rt(S.RUNNING), True),
    (_rt(S.INITIALIZED), _rt(S.LAUNCHED), True),
    (_rt(S.RUNNING), _rt(S.KILLING), True),
    (_rt(S.KILLING), _rt(S.KILLED), True),
    (_rt(S.KILLING), _rt(S.RUNNING), False),
    (_rt(S.SUCCEEDED), _rt(S.RUNNING), False),
    (_rt(S.FAILED), _rt(S.INITIALIZED, run=2), True),
    (_rt(S.FAILED), _rt(S.RUNNING, run=2), False),
    (_rt(S.RUNNING, run=3), _rt(S.INITIALIZED, run=2), False),
    (_rt(S.RUNNING), TaskRuntime(state=S.RUNNING, run_id=1, desired_run_id=0), False),
    (_rt(S.RUNNING), _rt(S.PENDING), False),
    (_rt(S.RUNNING), _rt(S.RUNNING), True),
    (_rt(S.KILLED, goal_state=S.DELETED), _rt(S.KILLED, goal_state=S.RUNNING), False),
    (_rt(S.KILLED, goal_state=S.DELETED),
     _rt(S.KILLED, goal_state=S.RUNNING, desired_config_version=5), True),
])
def test_runtime_write_rules(old: TaskRuntime, new: TaskRuntime, ok: bool) -> None:
    assert (check_runtime_write(old, new) is None) is ok


def test_rm_diagram_has_every_edge() -> None:
    from peloton.core.lifecycle.task_transitions import rm_transitions_dot

    dot = rm_transitions_dot()
    for src, targets in RM_TRANSITIONS.items():
        for dst in targets:
            assert f"{src.value} -> {dst.value};" in dot
    assert 'PLACING -> READY [style=dashed, label="placing_timeout"]' in dot
