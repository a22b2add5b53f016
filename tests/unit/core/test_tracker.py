"""The task tracker: rmtask transitions, allocation release, requeue, recovery, relaunch."""

from __future__ import annotations

import pytest

from peloton.core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from peloton.core.model.ids import TaskId
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState as S
from tests.unit.core.factories import pool_config, rm_task, units


@pytest.fixture
def tracker() -> TaskTracker:
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(0, 100, 1)))
    node.non_slack_entitlement = units(100)
    return TaskTracker(tree)


def _admit_one(tracker: TaskTracker, inst: int = 0, cpu: float = 1) -> TaskId:
    tracker.enqueue("p", [rm_task(cpu, inst=inst)])
    (gang,) = tracker.admit()
    return gang.tasks[0].task_id


def test_happy_path_frees_allocation_at_the_end(tracker: TaskTracker) -> None:
    tid = _admit_one(tracker, cpu=2)
    node = tracker.tree.get("p")
    for state in (S.PLACING, S.PLACED, S.LAUNCHING, S.LAUNCHED):
        tracker.transition(tid, state)
    rec = tracker.transition(tid, S.RUNNING, at=123.0)
    assert rec.start_time == 123.0 and rec.placement_attempts == 1
    assert node.alloc_total == units(2)
    tracker.transition(tid, S.SUCCEEDED)
    assert node.alloc_total[0] == 0 and tid not in tracker and not node.active


def test_invalid_transition_refused(tracker: TaskTracker) -> None:
    tid = _admit_one(tracker)
    with pytest.raises(FailedPrecondition, match="READY -> RUNNING"):
        tracker.transition(tid, S.RUNNING)
    with pytest.raises(NotFound):
        tracker.transition(TaskId("nope", 0), S.READY)


def test_back_to_pending_frees_and_requeues(tracker: TaskTracker) -> None:
    tid = _admit_one(tracker, cpu=3)
    node = tracker.tree.get("p")
    tracker.transition(tid, S.PLACING)
    tracker.transition(tid, S.PENDING)
    assert node.alloc_total[0] == 0 and node.demand == units(3)
    (gang,) = tracker.admit()
    assert gang.tasks[0].task_id == tid


def test_finish_is_idempotent_and_needs_terminal(tracker: TaskTracker) -> None:
    tid = _admit_one(tracker)
    assert tracker.finish(tid, S.FAILED) is not None
    assert tracker.finish(tid, S.FAILED) is None
    with pytest.raises(InvalidArgument):
        tracker.finish(tid, S.RUNNING)


def test_duplicate_and_relaunch(tracker: TaskTracker) -> None:
    tid = _admit_one(tracker, inst=7, cpu=1)
    with pytest.raises(AlreadyExists):
        tracker.enqueue("p", [rm_task(1, inst=7)])
    for state in (S.PLACING, S.PLACED, S.LAUNCHING, S.RUNNING):
        tracker.transition(tid, state)
    gang = tracker.enqueue("p", [rm_task(1, inst=7, run=2)])  # a new run replaces the old
    assert gang.tasks[0].task.run_id == 2
    assert tracker.tree.get("p").alloc_total[0] == 0


def test_gang_flags_must_agree_and_pool_must_be_leaf(tracker: TaskTracker) -> None:
    with pytest.raises(InvalidArgument, match="differ"):
        tracker.enqueue("p", [rm_task(1, priority=1), rm_task(1, priority=2)])
    with pytest.raises(InvalidArgument):
        tracker.enqueue("p", [])
    with pytest.raises(FailedPrecondition, match="not a leaf"):
        tracker.enqueue("root", [rm_task(1)])


def test_recover_running_task(tracker: TaskTracker) -> None:
    rec = tracker.recover("p", rm_task(4, inst=1, preemptible=False), S.RUNNING, 50.0)
    node = tracker.tree.get("p")
    assert rec.state is S.RUNNING and node.alloc_total == units(4) and node.alloc_np == units(4)
    assert tracker.active_tasks("p") == [rec]
    with pytest.raises(InvalidArgument):
        tracker.recover("p", rm_task(1, inst=2), S.PENDING)
    with pytest.raises(AlreadyExists):
        tracker.recover("p", rm_task(1, inst=1), S.RUNNING)


def test_pending_reason(tracker: TaskTracker) -> None:
    tracker.enqueue("p", [rm_task(500, inst=1)])
    tracker.enqueue("p", [rm_task(1, inst=2)])
    assert tracker.pending_reason(TaskId("job", 1)) == (
        "queued in /p: gang of 1 exceeds the pool's entitlement")
    assert "waiting for its turn" in (tracker.pending_reason(TaskId("job", 2)) or "")
    assert tracker.pending_reason(TaskId("job", 3)) is None


def test_gang_instances() -> None:
    from peloton.core.respool.records import gang_instances
    from peloton.core.states import JobType

    assert gang_instances(range(5), job_type=JobType.BATCH, revocable=False,
                          minimum_running_instances=3) == [[0, 1, 2], [3], [4]]
    assert gang_instances(range(3), job_type=JobType.SERVICE, revocable=False,
                          minimum_running_instances=3) == [[0], [1], [2]]
    assert gang_instances([4, 5], job_type=JobType.BATCH, revocable=False,
                          minimum_running_instances=3) == [[4], [5]]
    assert gang_instances(range(2), job_type=JobType.BATCH, revocable=True,
                          minimum_running_instances=2) == [[0], [1]]
