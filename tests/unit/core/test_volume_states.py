"""The persistent-volume tables: every (goal, state) and (event, state) pair is named, and the
rules around them (Peloton's) hold."""

from __future__ import annotations

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.lifecycle.volume_states import (
    EVENTS,
    INVALID_GOALS,
    VOLUME_RULES,
    VolumeAction,
    VolumeEvent,
    delete_refusal,
    on_event,
    sandbox_relative,
    volume_action,
    volume_id,
    volume_rules_dot,
)
from peloton.core.model.storage_records import VolumeState
from peloton.core.states import TaskState

V = VolumeState


@pytest.mark.parametrize("goal", list(VOLUME_RULES))
def test_every_goal_row_names_every_state(goal: VolumeState) -> None:
    assert set(VOLUME_RULES[goal]) == set(VolumeState)
    assert all(isinstance(a, VolumeAction) for a in VOLUME_RULES[goal].values())


@pytest.mark.parametrize("event", list(VolumeEvent))
def test_every_event_row_names_every_state(event: VolumeEvent) -> None:
    assert set(EVENTS[event]) == set(VolumeState)


def test_only_created_and_deleted_are_goals() -> None:
    assert {V.INITIALIZED} == INVALID_GOALS
    for state in VolumeState:
        assert volume_action(V.INITIALIZED, state) is VolumeAction.INVALID


@pytest.mark.parametrize("goal", [V.CREATED, V.DELETED])
@pytest.mark.parametrize("state", list(VolumeState))
def test_every_action_moves_toward_the_goal(goal: VolumeState, state: VolumeState) -> None:
    action = volume_action(goal, state)
    if action is VolumeAction.WAIT:
        assert on_event(VolumeEvent.RUN_STARTED, goal, state) is goal
    elif action is VolumeAction.DESTROY:
        assert on_event(VolumeEvent.DESTROYED, goal, state) is goal
    elif action in (VolumeAction.KEEP, VolumeAction.DONE):
        assert state is goal
    else:
        assert (goal, state) == (V.CREATED, V.DELETED)  # a deleted id never comes back


def test_a_run_starting_on_a_volume_being_deleted_does_not_revive_it() -> None:
    assert on_event(VolumeEvent.RUN_STARTED, V.DELETED, V.INITIALIZED) is None
    assert on_event(VolumeEvent.RUN_STARTED, V.CREATED, V.CREATED) is None


@pytest.mark.parametrize("state", list(TaskState))
@pytest.mark.parametrize("goal", list(TaskState))
def test_a_volume_is_in_use_unless_its_run_and_goal_are_terminal(state: TaskState,
                                                                 goal: TaskState) -> None:
    refused = delete_refusal(state, goal)
    assert (refused is None) == (state.terminal and goal.terminal)


def test_volume_ids_are_stable_per_run_and_differ_per_host() -> None:
    a = volume_id("job", 0, "host-a", 1)
    assert a == volume_id("job", 0, "host-a", 1)
    assert len({a, volume_id("job", 0, "host-b", 1), volume_id("job", 1, "host-a", 1)}) == 3


@pytest.mark.parametrize(("path", "rel"), [("/data", "data"), ("data", "data"),
                                           ("/a/b/", "a/b"), ("a/../b", "b")])
def test_container_paths_are_inside_the_sandbox(path: str, rel: str) -> None:
    assert sandbox_relative(path) == rel


@pytest.mark.parametrize("path", ["", "/", "..", "../x", "a/../../x", "  "])
def test_container_paths_that_leave_the_sandbox_are_refused(path: str) -> None:
    with pytest.raises(InvalidArgument):
        sandbox_relative(path)


def test_the_table_draws() -> None:
    dot = volume_rules_dot()
    assert dot.startswith("digraph") and '"INITIALIZED" -> "CREATED"' in dot
