"""The workflow transition table: every (state, state) pair decided, and Peloton's rules hold."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import FailedPrecondition
from peloton.core.lifecycle.workflow_transitions import (
    INITIAL_STATES,
    WORKFLOW_TRANSITIONS,
    IllegalWorkflowTransition,
    check_workflow_move,
    check_workflow_start,
    initial_state,
    moved_workflow,
)
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.states import TERMINAL_WORKFLOW_STATES, WorkflowState, WorkflowType

W = WorkflowState


def _reachable(start: frozenset[WorkflowState]) -> set[WorkflowState]:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in WORKFLOW_TRANSITIONS[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_workflow_transition_table_is_total() -> None:
    assert set(WORKFLOW_TRANSITIONS) == set(WorkflowState)
    for src in WorkflowState:
        for dst in WorkflowState:
            reason = check_workflow_move(src, dst)
            # Decided both ways: allowed exactly when the row names it, else a reason.
            assert (reason is None) == (dst in WORKFLOW_TRANSITIONS[src]), (src, dst)
            assert reason is None or reason.strip()


def test_terminal_states_are_final_and_active_ones_can_end() -> None:
    for state in WorkflowState:
        if state.terminal:
            # Peloton drops every write to a finished update; a new workflow is made instead.
            assert WORKFLOW_TRANSITIONS[state] == frozenset(), state
        else:
            assert state in WORKFLOW_TRANSITIONS[state], f"{state}: progress writes"
            assert W.ABORTED in WORKFLOW_TRANSITIONS[state], f"{state}: abort"
            assert _reachable(frozenset({state})) & TERMINAL_WORKFLOW_STATES, state
    # Every state is reachable from a new workflow (no dead rows).
    assert _reachable(INITIAL_STATES) == set(WorkflowState)


@pytest.mark.parametrize(("src", "dst", "ok"), [
    (W.INITIALIZED, W.ROLLING_FORWARD, True),
    (W.INITIALIZED, W.SUCCEEDED, False),
    (W.ROLLING_FORWARD, W.SUCCEEDED, True),
    (W.ROLLING_FORWARD, W.ROLLING_BACKWARD, True),
    (W.ROLLING_FORWARD, W.ROLLED_BACK, False),
    (W.ROLLING_BACKWARD, W.ROLLED_BACK, True),
    (W.ROLLING_BACKWARD, W.FAILED, True),
    (W.ROLLING_BACKWARD, W.SUCCEEDED, False),
    (W.PAUSED, W.INITIALIZED, True),  # resuming a workflow created paused
    (W.PAUSED, W.ROLLING_FORWARD, True),
    (W.PAUSED, W.SUCCEEDED, False),
    (W.PAUSED, W.FAILED, False),
    (W.SUCCEEDED, W.ROLLING_FORWARD, False),
    (W.SUCCEEDED, W.SUCCEEDED, False),
    (W.FAILED, W.ROLLING_BACKWARD, False),
    (W.ABORTED, W.PAUSED, False),
    (W.ROLLED_BACK, W.ROLLING_FORWARD, False),
])
def test_workflow_rules(src: WorkflowState, dst: WorkflowState, ok: bool) -> None:
    assert (check_workflow_move(src, dst) is None) is ok


def test_new_workflows_start_initialized_or_paused() -> None:
    assert initial_state(False) is W.INITIALIZED and initial_state(True) is W.PAUSED
    assert {s for s in WorkflowState if check_workflow_start(s) is None} == INITIAL_STATES
    err = IllegalWorkflowTransition("u1", W.SUCCEEDED, W.ROLLING_FORWARD,
                                    check_workflow_move(W.SUCCEEDED, W.ROLLING_FORWARD) or "")
    # Reported by every front as the workflow being in the wrong state for the request.
    assert isinstance(err, FailedPrecondition) and "SUCCEEDED is terminal" in str(err)


@given(st.sampled_from(sorted(INITIAL_STATES)),
       st.lists(st.sampled_from(list(WorkflowState)), max_size=30))
def test_any_walk_of_allowed_moves_keeps_the_update_story_consistent(
        start: WorkflowState, wanted: list[WorkflowState]) -> None:
    state, seen = start, {start}
    for nxt in wanted:
        if check_workflow_move(state, nxt) is not None:
            continue  # refused: the workflow stays where it is
        assert not state.terminal, "a terminal workflow moved"
        state = nxt
        seen.add(state)
    # Only a rollback rolls back, and only a forward roll succeeds.
    if state is W.ROLLED_BACK:
        assert W.ROLLING_BACKWARD in seen
    if state is W.SUCCEEDED:
        assert W.ROLLING_FORWARD in seen


def _workflow(state: WorkflowState, prev: WorkflowState = WorkflowState.INITIALIZED) -> UpdateInfo:
    return UpdateInfo(update_id="u", job_id="j", type=WorkflowType.UPDATE, state=state,
                      spec=UpdateSpec(), prev_state=prev)


def test_a_move_sets_prev_state_and_an_end_its_completion_time() -> None:
    W = WorkflowState
    rolling = _workflow(W.ROLLING_FORWARD)
    paused = moved_workflow(rolling, rolling, W.PAUSED, now=5.0)
    assert (paused.state, paused.prev_state, paused.completion_time) == (W.PAUSED, W.ROLLING_FORWARD, 0.0)
    # A progress write keeps where the workflow came from (a resume needs it).
    progress = dataclasses.replace(paused, instances_done=(0,))
    assert moved_workflow(paused, progress, None, now=6.0) == progress
    done = moved_workflow(rolling, rolling, W.SUCCEEDED, now=7.0)
    assert (done.state, done.prev_state, done.completion_time) == (W.SUCCEEDED, W.ROLLING_FORWARD, 7.0)


def test_a_move_the_table_refuses_or_a_hand_made_state_is_refused() -> None:
    W = WorkflowState
    done = _workflow(W.SUCCEEDED, W.ROLLING_FORWARD)
    with pytest.raises(IllegalWorkflowTransition, match="terminal"):
        moved_workflow(done, done, W.ROLLING_FORWARD, now=1.0)
    rolling = _workflow(W.ROLLING_FORWARD)
    by_hand = dataclasses.replace(rolling, state=W.SUCCEEDED)
    with pytest.raises(IllegalWorkflowTransition, match=r"only by CachedJob\.move_workflow"):
        moved_workflow(rolling, by_hand, None, now=1.0)
