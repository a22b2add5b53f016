"""Every workflow state change goes through `CachedJob.move_workflow`, which checks the table.

The table is core/lifecycle/workflow_transitions.py (its totality test is in tests/unit/core).
Here: the aggregate refuses what the table refuses, with nothing written; a state changed
by hand behind its back is refused too; and a move it allows records where the workflow
came from, when it ended, and the state-change event.
"""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import Conflict
from peloton.core.lifecycle.workflow_transitions import IllegalWorkflowTransition
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.states import WorkflowState, WorkflowType
from tests.unit.jobmgr.harness import Harness, job_spec
from tests.unit.jobmgr.test_workflow_goalstate import scene

W = WorkflowState


def _job_and_update(h: Harness, state: WorkflowState) -> tuple[str, UpdateInfo]:
    jid, update = scene(h, state)
    assert h.store.get_update(update.update_id) == update
    return jid, update


@pytest.mark.parametrize("final", [W.SUCCEEDED, W.ABORTED, W.FAILED, W.ROLLED_BACK])
def test_a_finished_workflow_is_never_moved_again(h: Harness, final: WorkflowState) -> None:
    jid, update = _job_and_update(h, final)
    job = h.job(jid)
    with pytest.raises(IllegalWorkflowTransition, match="terminal") as err:
        job.move_workflow(update, W.ROLLING_FORWARD)
    assert (err.value.current, err.value.new) == (final, W.ROLLING_FORWARD)
    with pytest.raises(IllegalWorkflowTransition):
        job.save_workflow(update, opaque_data="late progress")
    assert h.store.get_update(update.update_id) == update  # nothing written
    assert job.update == update


def test_a_move_the_table_refuses_writes_nothing(h: Harness) -> None:
    jid, update = _job_and_update(h, W.PAUSED)
    with pytest.raises(IllegalWorkflowTransition, match="PAUSED -> SUCCEEDED"):
        h.job(jid).move_workflow(update, W.SUCCEEDED)  # a paused workflow must resume first
    assert h.store.get_update(update.update_id) == update


def test_a_state_changed_by_hand_is_refused(h: Harness) -> None:
    jid, update = _job_and_update(h, W.ROLLING_FORWARD)
    job = h.job(jid)
    for by_hand in (dataclasses.replace(update, state=W.SUCCEEDED),
                    dataclasses.replace(update, prev_state=W.PAUSED)):
        with pytest.raises(IllegalWorkflowTransition, match="move_workflow"):
            job.save_workflow(by_hand)
        with pytest.raises(IllegalWorkflowTransition, match="move_workflow"):
            job.move_workflow(by_hand, W.ABORTED)
    assert h.store.get_update(update.update_id) == update


def test_a_move_records_where_it_came_from_and_when_it_ended(h: Harness) -> None:
    jid, update = _job_and_update(h, W.ROLLING_FORWARD)
    h.advance(1.0)  # events are ordered by time
    h.jm.workflows.pause(jid)
    paused = h.store.get_update(update.update_id)
    assert (paused.state, paused.prev_state) == (W.PAUSED, W.ROLLING_FORWARD)
    # Progress in the same state keeps where it came from, so resume can go back there.
    h.job(jid).save_workflow(paused, opaque_data="note")
    assert h.store.get_update(update.update_id).prev_state is W.ROLLING_FORWARD
    h.advance(1.0)
    h.jm.workflows.resume(jid)
    resumed = h.store.get_update(update.update_id)
    assert (resumed.state, resumed.prev_state) == (W.ROLLING_FORWARD, W.PAUSED)
    assert resumed.completion_time == 0.0
    h.advance(1.0)
    h.jm.workflows.abort(jid)
    aborted = h.store.get_update(update.update_id)
    assert (aborted.state, aborted.prev_state) == (W.ABORTED, W.ROLLING_FORWARD)
    assert aborted.completion_time == h.clock.wall() and aborted.message == "aborted on request"
    events = [e.state for e in h.store.get_workflow_events(update.update_id, None, limit=3)]
    assert events == [W.ABORTED, W.ROLLING_FORWARD, W.PAUSED]  # newest first


def test_a_stale_copy_loses_as_its_compare_and_set_would(h: Harness) -> None:
    jid, update = _job_and_update(h, W.ROLLING_FORWARD)
    h.jm.workflows.pause(jid)
    with pytest.raises(Conflict):
        h.job(jid).move_workflow(update, W.ABORTED)
    assert h.store.get_update(update.update_id).state is W.PAUSED


def test_a_new_workflow_starts_initialized_or_paused(h: Harness) -> None:
    jid = h.create(job_spec(2))
    h.settle(1.0)
    job = h.job(jid)
    with pytest.raises(IllegalWorkflowTransition, match="starts INITIALIZED or PAUSED"):
        job.create_workflow(UpdateInfo(update_id="u-bad", job_id=jid, type=WorkflowType.UPDATE,
                                       state=W.ROLLING_FORWARD, spec=UpdateSpec()))
    assert h.store.get_updates_for_job(jid) == []
    paused = h.jm.workflows.create(jid, WorkflowType.RESTART, UpdateSpec(start_paused=True))
    assert (paused.state, paused.prev_state) == (W.PAUSED, W.INITIALIZED)
    h.jm.workflows.resume(jid)
    assert h.store.get_update(paused.update_id).state is W.ROLLING_FORWARD  # started at once
