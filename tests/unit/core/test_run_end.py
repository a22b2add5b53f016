"""The run-end table: every terminal state, started or not, has a rule; a run lost before
it started is the one end that never counts and always runs again.  The after-end table:
every action the task table names for an ended run says whether the task runs again."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from peloton.core.lifecycle.retry import MIN_SYSTEM_FAILURE_RETRIES
from peloton.core.lifecycle.run_end import (
    AFTER_END,
    END_RULES,
    LOST_BEFORE_START,
    Again,
    EndRule,
    counts_as_failure,
    end_reason,
    may_run_again,
    runs_again,
    started,
)
from peloton.core.lifecycle.task_goalstate import action_for
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
    assert may_run_again(lost, 0)
    assert not may_run_again(TaskRuntime(state=S.LOST, failure_count=1), 0)
    assert not may_run_again(TaskRuntime(state=S.FAILED, reason=LOST_BEFORE_START,
                                         failure_count=1), 0)
    assert may_run_again(TaskRuntime(state=S.FAILED, failure_count=1), 2)


def test_a_system_failure_gets_at_least_four_tries() -> None:
    def failed(n: int) -> TaskRuntime:
        return TaskRuntime(state=S.FAILED, reason="REASON_LAUNCH_FAILED", failure_count=n)

    assert may_run_again(failed(MIN_SYSTEM_FAILURE_RETRIES - 1), 1)
    assert not may_run_again(failed(MIN_SYSTEM_FAILURE_RETRIES), 1)
    assert not may_run_again(TaskRuntime(state=S.FAILED, failure_count=1), 1)


#: goal -> ended state -> does the task run again (versions current).  Written out, not
#: computed from the tables it checks.
AGAIN: dict[TaskState, dict[TaskState, Again]] = {
    S.SUCCEEDED: {S.SUCCEEDED: Again.NO, S.FAILED: Again.WHILE_ALLOWED,
                  S.LOST: Again.WHILE_ALLOWED, S.KILLED: Again.WHILE_ALLOWED,
                  S.DELETED: Again.NO},
    S.RUNNING: {S.SUCCEEDED: Again.YES, S.FAILED: Again.YES, S.LOST: Again.YES,
                S.KILLED: Again.YES, S.DELETED: Again.NO},
    **{goal: dict.fromkeys(TERMINAL_TASK_STATES, Again.NO)
       for goal in (S.KILLED, S.DELETED, S.PREEMPTING, S.FAILED)},
}
ENDED = sorted(TERMINAL_TASK_STATES)


@pytest.mark.parametrize("goal, state", list(itertools.product(TaskState, ENDED)))
@pytest.mark.parametrize("behind", ["current", "run", "config"])
def test_every_ended_run_under_every_goal_says_whether_it_runs_again(
        goal: TaskState, state: TaskState, behind: str) -> None:
    rt = TaskRuntime(state=state, goal_state=goal, run_id=1,
                     desired_run_id=2 if behind == "run" else 1,
                     config_version=1, desired_config_version=2 if behind == "config" else 1)
    assert action_for(rt) in AFTER_END  # a new action for an ended run needs a row
    if behind == "current" and goal in AGAIN:
        assert AFTER_END[action_for(rt)] is AGAIN[goal][state]
    with_budget = runs_again(rt, max_failures=1)
    without = runs_again(dataclasses.replace(rt, failure_count=1), max_failures=1)
    again = AFTER_END[action_for(rt)]
    assert (with_budget, without) == {Again.NO: (False, False), Again.YES: (True, True),
                                      Again.WHILE_ALLOWED: (True, False)}[again]


@pytest.mark.parametrize("state", LIVE)
def test_a_run_that_has_not_ended_is_not_about_to_run_again(state: TaskState) -> None:
    for goal in GOALS:
        assert not runs_again(TaskRuntime(state=state, goal_state=goal), max_failures=3)


def test_a_batch_task_lost_before_it_started_runs_again_whatever_its_budget() -> None:
    rt = TaskRuntime(state=S.LOST, goal_state=S.SUCCEEDED, reason=LOST_BEFORE_START,
                     failure_count=5)
    assert runs_again(rt, max_failures=0)
    assert not runs_again(dataclasses.replace(rt, reason="", failure_count=0), max_failures=0)
