"""Workflow (update) state transitions: which workflow state may follow which.

The job manager changes a workflow's state in one place (`CachedJob.move_workflow`,
jobmgr/aggregate.py), which asks `check_workflow_move` first; a workflow is born in
one of `INITIAL_STATES` (`check_workflow_start`).  The rules are Peloton's
(`jobmgr/cached/update.go` and `job.go`, `goalstate/update_*.go`):

* a workflow starts INITIALIZED, or PAUSED when its spec says `start_paused`
  (then its previous state is INITIALIZED, so a resume starts it);
* starting it rolls it forward; a rolling forward one ends SUCCEEDED or FAILED,
  or turns round (ROLLING_BACKWARD) on failure or on request; a rolling backward
  one ends ROLLED_BACK or FAILED: never SUCCEEDED, and it never turns round again
  by itself (a failed rollback fails);
* any active workflow may be paused, aborted (by a user, a newer workflow or the
  job being stopped) or rolled back on request; a paused one resumes to the
  state it was paused in, and completes only after it is resumed;
* an active state follows itself: progress (instances done, failed, in flight,
  opaque data) is recorded without a state change;
* a terminal workflow never changes again (Peloton's writeProgress drops every
  write once terminal, and Rollback of a finished update does nothing): a new
  workflow is created instead.
"""

from __future__ import annotations

import dataclasses

from peloton.core.errors import FailedPrecondition
from peloton.core.model.update import UpdateInfo
from peloton.core.states import WorkflowState

W = WorkflowState

#: States a new workflow may be stored in.
INITIAL_STATES = frozenset({W.INITIALIZED, W.PAUSED})

#: Allowed workflow state changes, from -> to.  Every state has a row; an active state
#: lists itself (a progress write), a terminal state lists nothing.
WORKFLOW_TRANSITIONS: dict[WorkflowState, frozenset[WorkflowState]] = {
    # ROLLING_BACKWARD straight from INITIALIZED or PAUSED: a rollback asked for before
    # the first step, or while paused (Peloton's RollbackWorkflow takes any active state).
    W.INITIALIZED: frozenset({W.INITIALIZED, W.ROLLING_FORWARD, W.PAUSED, W.ABORTED,
                              W.ROLLING_BACKWARD}),
    W.ROLLING_FORWARD: frozenset({W.ROLLING_FORWARD, W.PAUSED, W.SUCCEEDED, W.FAILED,
                                  W.ABORTED, W.ROLLING_BACKWARD}),
    W.ROLLING_BACKWARD: frozenset({W.ROLLING_BACKWARD, W.PAUSED, W.ROLLED_BACK, W.FAILED,
                                   W.ABORTED}),
    # A paused workflow only records progress: it cannot finish until it is resumed
    # (to INITIALIZED when it was created paused).
    W.PAUSED: frozenset({W.PAUSED, W.INITIALIZED, W.ROLLING_FORWARD, W.ROLLING_BACKWARD,
                         W.ABORTED}),
    W.SUCCEEDED: frozenset(),
    W.ABORTED: frozenset(),
    W.FAILED: frozenset(),
    W.ROLLED_BACK: frozenset(),
}


class IllegalWorkflowTransition(FailedPrecondition):
    """A workflow state change the table does not allow (a FailedPrecondition, so every
    front reports it as the workflow being in the wrong state for the request)."""

    def __init__(self, update_id: str, current: WorkflowState | None, new: WorkflowState,
                 reason: str) -> None:
        super().__init__(f"workflow {update_id}: {reason}")
        self.update_id = update_id
        #: The stored state (None for a workflow not stored yet).
        self.current = current
        self.new = new


def initial_state(start_paused: bool) -> WorkflowState:
    """The state a new workflow is stored in (its previous state is INITIALIZED)."""
    return W.PAUSED if start_paused else W.INITIALIZED


def check_workflow_start(state: WorkflowState) -> str | None:
    """Why a new workflow may not be stored in `state`, or None if it may."""
    if state in INITIAL_STATES:
        return None
    return f"a new workflow starts INITIALIZED or PAUSED, not {state.value}"


def check_workflow_move(current: WorkflowState, new: WorkflowState) -> str | None:
    """Why a workflow in `current` may not go to `new`, or None if it may."""
    if new in WORKFLOW_TRANSITIONS[current]:
        return None
    if current.terminal:
        return f"{current.value} is terminal; a finished workflow never changes"
    return f"{current.value} -> {new.value} is not a valid workflow state change"


def moved_workflow(current: UpdateInfo, update: UpdateInfo, to: WorkflowState | None,
                   now: float) -> UpdateInfo:
    """`update` (the workflow as a caller read it, with the fields it changes) after a move
    to `to` (None: a progress write in its state), given what is stored (`current`).

    Raises IllegalWorkflowTransition when the caller changed `state` or `prev_state` by
    hand, or the table does not allow the move.  `prev_state` moves only with a real state
    change (Peloton's writeProgress: progress writes in one state keep where it came from,
    which a resume needs); `completion_time` is stamped when the workflow ends.
    """
    if (update.state, update.prev_state) != (current.state, current.prev_state):
        raise IllegalWorkflowTransition(
            update.update_id, current.state, update.state,
            "a workflow's state is changed only by CachedJob.move_workflow")
    new_state = current.state if to is None else to
    reason = check_workflow_move(current.state, new_state)
    if reason is not None:
        raise IllegalWorkflowTransition(update.update_id, current.state, new_state, reason)
    if new_state is current.state:
        return update
    return dataclasses.replace(update, state=new_state, prev_state=current.state,
                               completion_time=now if new_state.terminal else update.completion_time)
