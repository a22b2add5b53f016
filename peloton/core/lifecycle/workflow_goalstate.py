"""Workflow (update) goal-state decisions: workflow state -> actions to run in order.

Peloton's `jobmgr/goalstate/update.go`: a new workflow is started, a
rolling one runs another step (or completes once every instance is done),
a paused one only records progress, and a terminal one is cleared from the
engine.  Every action but clearing is preceded by a check that aborts the
workflow if a newer one superseded it.  Workflow entities are keyed by job
id, so one job never has two workflows evaluated at once.
"""

from __future__ import annotations

from enum import StrEnum

from peloton.core.states import WorkflowState


class WorkflowAction(StrEnum):
    """What the goal-state engine does for a workflow."""

    NOOP = "noop"
    START = "update_start"
    RUN = "update_run"
    COMPLETE = "update_complete"
    WRITE_PROGRESS = "update_write_progress"
    CLEAR = "update_clear"
    CHECK_FOR_ABORT = "update_check_for_abort"


W = WorkflowState
A = WorkflowAction

#: state -> main action; every workflow state has an entry.
WORKFLOW_RULES: dict[WorkflowState, WorkflowAction] = {
    W.INITIALIZED: A.START,
    W.ROLLING_FORWARD: A.RUN,
    W.ROLLING_BACKWARD: A.RUN,
    W.PAUSED: A.WRITE_PROGRESS,
    W.SUCCEEDED: A.CLEAR,
    W.ABORTED: A.CLEAR,
    W.FAILED: A.CLEAR,
    W.ROLLED_BACK: A.CLEAR,
}


def workflow_actions(state: WorkflowState, *, all_done: bool = False) -> tuple[WorkflowAction, ...]:
    """Actions for a workflow in `state`; `all_done` when every instance reached its target."""
    main = WORKFLOW_RULES[state]
    if main is A.RUN and all_done:
        main = A.COMPLETE
    if main is A.CLEAR:
        return (main,)
    return (A.CHECK_FOR_ABORT, main)
