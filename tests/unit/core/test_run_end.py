"""The run-end table: every terminal state, started or not, has a rule; a run lost before
it started is the one end that never counts and always runs again."""

from __future__ import annotations

import itertools

import pytest

from peloton.core.lifecycle.run_end import (
    END_RULES,
    LOST_BEFORE_START,
    EndRule,
    counts_as_failure,
    end_reason,
    may_run_again,
    started,
)
from peloton.core.model.task import TaskRuntime
from peloton.core.states import TERMINAL_TASK_STATES, TaskState

S = TaskState
LIVE = [s for s in TaskState if not s.terminal]
GOALS = [S.RUNNING, S.SUCCEEDED, S.KILLED, S.DELETED, S.PREEMPTING]


def test_every_terminal_state_started_or_not_has_a_rule() -> None:
    assert set(END_RULES) == set(itertools.product(TERMINAL_TASK_STATES, (True, False)))


def test_started_means_the_host_reported_starting_or_running() -> None:
    assert not started(TaskRuntime(state=S.LAUNCHED))
    assert started(TaskRuntime(state=S.STARTING)) and started(TaskRuntime(state=S.RUNNING))
    assert started(TaskRuntime(state=S.KILLING, start_time=5.0))
    assert not started(TaskRuntime(state=S.KILLING))


@pytest.mark.parametrize("before, goal, ended",
                         list(itertools.product(LIVE, GOALS, sorted(TERMINAL_TASK_STATES))))
def test_each_end_counts_as_its_rule_says(before: TaskState, goal: TaskState,
                                          ended: TaskState) -> None:
    rt = TaskRuntime(state=before, goal_state=goal)
    rule = END_RULES[(ended, started(rt))]
    expected = {
        EndRule.FAILURE: True,
        EndRule.NOT_A_FAILURE: False,
        EndRule.FAILURE_IF_SERVICE: goal is S.RUNNING,
        EndRule.FAILURE_UNLESS_STOPPED: before is not S.KILLING
        and goal not in (S.KILLED, S.DELETED, S.PREEMPTING),
    }[rule]
    assert counts_as_failure(rt, ended) is expected
    if ended is S.LOST:
        assert expected is started(rt)  # lost before it started: never a failure
        assert (end_reason(rt, ended, "r") == LOST_BEFORE_START) is not started(rt)


def test_a_run_lost_before_it_started_runs_again_whatever_the_budget() -> None:
    lost = TaskRuntime(state=S.LOST, reason=LOST_BEFORE_START)
    assert may_run_again(lost, 0, system_failure=False)
    assert not may_run_again(TaskRuntime(state=S.LOST, failure_count=1), 0,
                             system_failure=False)
    assert not may_run_again(TaskRuntime(state=S.FAILED, reason=LOST_BEFORE_START,
                                         failure_count=1), 0, system_failure=False)
    assert may_run_again(TaskRuntime(state=S.FAILED, failure_count=1), 2, system_failure=False)
