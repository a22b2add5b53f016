"""Every state of the workflow table, run through the workflow engine's resolver, effects checked.

A three-instance service job runs config 1; an UPDATE to config 2 (one instance at a
time) is created and brought into each workflow state.  The resolver must name the
table's actions (the abort check first, then the state's action); they are run and
their effect checked: workflow progress in storage, which instances were asked to move.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from peloton.core.lifecycle.workflow_goalstate import (
    WORKFLOW_RULES,
    WorkflowAction,
    workflow_actions,
)
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.states import TaskState, WorkflowState, WorkflowType
from peloton.jobmgr.goalstate.update import ACTIONS
from tests.unit.jobmgr.harness import Harness, job_spec

W = WorkflowState
A = WorkflowAction
S = TaskState


def scene(h: Harness, state: WorkflowState) -> tuple[str, UpdateInfo]:
    """A running job with an update to config 2 in `state` (instance 0 already moved for
    the rolling and paused states)."""
    jid = h.create(job_spec(3))
    h.settle(1.0)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                                   new_spec=job_spec(3, command="run --v2"))
    if state is not W.INITIALIZED:
        h.jm.engines.update.run_due()  # START: rolling forward, instance 0 picked
        h.settle(1.0) if state in (W.SUCCEEDED, W.ROLLED_BACK) else _move(h, jid, 0, update)
        if state is W.ROLLING_BACKWARD:
            h.jm.workflows.rollback(jid)
        elif state is W.PAUSED:
            h.jm.workflows.pause(jid)
        elif state in (W.ABORTED, W.FAILED):
            h.force_workflow(jid, state=state)
        elif state is W.ROLLED_BACK:
            h.jm.workflows.rollback(jid) if h.job(jid).update.state.active else None  # type: ignore[union-attr]
            h.force_workflow(jid, state=W.ROLLED_BACK)
    current = h.job(jid).update
    assert current is not None and current.state is state, current
    return jid, current


def _move(h: Harness, jid: str, inst: int, update: UpdateInfo) -> None:
    """Instance `inst` runs the update's target config (as if it was restarted on it)."""
    h.force_task(jid, inst, config_version=update.config_version,
                 desired_config_version=update.config_version, state=S.RUNNING)


def targeted(h: Harness, jid: str, version: int) -> list[int]:
    """Instances asked to run `version`."""
    return [i for i, rt in sorted(h.store.get_task_runtimes(jid).items())
            if rt.desired_config_version == version]


def run(h: Harness, jid: str) -> list[str]:
    update = h.job(jid).update
    assert update is not None
    actions = h.jm.update_actions.resolve(jid)
    assert [a.name for a in actions] == [n.value for n in workflow_actions(update.state)]
    for action in actions:
        action.run()
    return [a.name for a in actions]


def started(h: Harness, jid: str, before: UpdateInfo) -> None:
    after = h.store.get_update(before.update_id)
    assert after.state is W.ROLLING_FORWARD
    assert targeted(h, jid, before.config_version) == [0]  # the first batch only


def stepped(h: Harness, jid: str, before: UpdateInfo) -> None:
    after = h.store.get_update(before.update_id)
    if before.rollback:
        # Rolling back: instance 0 (the one moved) goes back to the original spec.
        assert after.state is W.ROLLING_BACKWARD
        assert targeted(h, jid, after.config_version) == [0]
    else:
        assert after.instances_done == (0,)  # instance 0 runs config 2: done
        assert targeted(h, jid, before.config_version) == [0, 1]  # the next batch picked


def progress_only(h: Harness, jid: str, before: UpdateInfo) -> None:
    after = h.store.get_update(before.update_id)
    assert after.state is W.PAUSED and after.instances_done == (0,)
    assert targeted(h, jid, before.config_version) == [0]  # nothing new picked


def cleared(h: Harness, jid: str, before: UpdateInfo) -> None:
    assert h.store.get_update(before.update_id) == before
    assert not h.jm.queue.updates.is_tracked(jid)


EFFECTS: dict[WorkflowAction, Callable[[Harness, str, UpdateInfo], None]] = {
    A.START: started,
    A.RUN: stepped,
    A.WRITE_PROGRESS: progress_only,
    A.CLEAR: cleared,
}


@pytest.mark.parametrize("state", list(WORKFLOW_RULES), ids=[s.value for s in WORKFLOW_RULES])
def test_every_workflow_state_does_what_its_action_promises(h: Harness,
                                                            state: WorkflowState) -> None:
    jid, before = scene(h, state)
    h.jm.queue.enqueue_update(jid)  # tracked, as a live workflow is
    run(h, jid)
    EFFECTS[WORKFLOW_RULES[state]](h, jid, before)


def test_a_superseded_workflow_aborts_itself(h: Harness) -> None:
    jid, before = scene(h, W.ROLLING_FORWARD)
    h.force_job(jid, update_id="another-workflow")
    job = h.job(jid)
    ACTIONS[A.CHECK_FOR_ABORT](h.jm.update_actions, job)
    assert h.store.get_update(before.update_id).state is W.ABORTED


def test_complete_finishes_a_workflow_whose_instances_all_arrived(h: Harness) -> None:
    jid, before = scene(h, W.ROLLING_FORWARD)
    for inst in (1, 2):
        _move(h, jid, inst, before)
    ACTIONS[A.COMPLETE](h.jm.update_actions, h.job(jid))
    after = h.store.get_update(before.update_id)
    assert after.state is W.SUCCEEDED and after.instances_done == (0, 1, 2)


def test_a_whole_rolling_update_runs_to_the_end_one_instance_at_a_time(h: Harness) -> None:
    jid = h.create(job_spec(3))
    h.settle(1.0)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                                   new_spec=job_spec(3, command="run --v2"))
    h.settle(30.0)
    after = h.store.get_update(update.update_id)
    assert after.state is W.SUCCEEDED and after.instances_done == (0, 1, 2)
    runtimes = h.store.get_task_runtimes(jid)
    assert {rt.config_version for rt in runtimes.values()} == {update.config_version}
    assert all(rt.state is S.RUNNING and rt.run_id == 2 for rt in runtimes.values())
    events = h.store.get_workflow_events(update.update_id, None)
    assert {e.state for e in events} == {W.INITIALIZED, W.ROLLING_FORWARD, W.SUCCEEDED}
    assert [e.instance for e in h.store.get_workflow_events(update.update_id, 2)] == [2, 2]
