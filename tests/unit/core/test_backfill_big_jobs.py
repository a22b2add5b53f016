"""A job passed over does not hold its pool's queue, however many tasks it has.

A queue-anyway job of 1,001 tasks that could never fit its pool used up admission's
backfill depth (1,000 refused gangs per pass) by itself, and every later job of the pool
waited behind it (issue 23 item 11).  The depth now counts refused *shapes*: the gangs of
one job, shaped alike, cost one check and are passed over together.
"""

from __future__ import annotations

from peloton.core.model.resources import Resources, to_units
from peloton.core.respool.admission import BackfillPolicy, reservation_due
from peloton.core.respool.node import PoolNode
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from tests.unit.core.factories import pool_config, rm_task


def _pool(entitled: float, policy: BackfillPolicy) -> tuple[TaskTracker, PoolNode]:
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(0, 1000, 1)))
    node.entitlement = [to_units(entitled), 0, 0, 0]
    node.non_slack_entitlement = [to_units(entitled), 0, 0, 0]
    node.slack_entitlement = [to_units(entitled), 0, 0, 0]
    return TaskTracker(tree, backfill=policy), node


def test_a_job_of_more_tasks_than_the_depth_that_never_fits_does_not_block_later_jobs() -> None:
    policy = BackfillPolicy(depth=1000)
    tracker, _ = _pool(8, policy)
    for inst in range(1001):  # one gang per task, each bigger than the pool
        tracker.enqueue("p", [rm_task(16, job="big", inst=inst)])
    tracker.enqueue("p", [rm_task(1, job="small", inst=0)])
    tracker.enqueue("p", [rm_task(1, job="later", inst=0)])
    admitted = [t.task_id.job_id for g in tracker.admit(now=0) for t in g.tasks]
    assert admitted == ["small", "later"]


def test_the_depth_still_bounds_the_distinct_refusals_checked() -> None:
    tracker, _ = _pool(8, BackfillPolicy(depth=2))
    for inst, cpu in enumerate((9, 10, 11)):  # three different shapes, all refused
        tracker.enqueue("p", [rm_task(cpu, job="big", inst=inst)])
    tracker.enqueue("p", [rm_task(1, job="small", inst=0)])
    assert tracker.admit(now=0) == []  # the third refused shape ends the pass
    tracker2, _ = _pool(8, BackfillPolicy(depth=3))
    for inst, cpu in enumerate((9, 10, 11)):
        tracker2.enqueue("p", [rm_task(cpu, job="big", inst=inst)])
    tracker2.enqueue("p", [rm_task(1, job="small", inst=0)])
    assert [t.task_id.job_id for g in tracker2.admit(now=0) for t in g.tasks] == ["small"]


def test_a_job_that_fits_the_empty_pool_still_ages_into_a_reservation_behind_a_big_one() -> None:
    policy = BackfillPolicy(depth=1000, reserve_after=30)
    tracker, node = _pool(8, policy)
    tracker.enqueue("p", [rm_task(8, job="filler", inst=0)])
    assert len(tracker.admit(now=0)) == 1  # the pool is full
    for inst in range(1001):
        tracker.enqueue("p", [rm_task(16, job="never", inst=inst)])
    tracker.enqueue("p", [rm_task(4, job="waits", inst=0)])
    assert tracker.admit(now=0) == []
    assert reservation_due(node, False, policy) == 30  # seen past the 1,001 gangs


def test_a_job_no_host_could_hold_is_never_admitted_and_blocks_nothing() -> None:
    """Its tasks fit the pool's entitlement (8 cpu) but no host (4 cpu each): admitted, they
    held the pool while placement failed, and a later job that did not fit beside one of
    them waited for ever."""
    tracker, node = _pool(8, BackfillPolicy(depth=1000, reserve_after=0))
    tracker.host_room = (Resources(cpu=4, mem_mb=4096),)
    for inst in range(1001):
        tracker.enqueue("p", [rm_task(7.5, job="too-big-for-a-host", inst=inst)])
    later = rm_task(1, job="later", inst=0)
    tracker.enqueue("p", [later])
    admitted = [t.task_id.job_id for g in tracker.admit(now=0) for t in g.tasks]
    assert admitted == ["later"]
    assert tracker.admit(now=100) == []  # still never admitted, and no reservation taken
    assert node.queues is not None and not node.queues.reserved
    # A host that could hold one joins; once "later" has ended there is room for one.
    tracker.host_room = (Resources(cpu=4, mem_mb=4096), Resources(cpu=16, mem_mb=4096))
    tracker.finish(later.task_id)
    assert [t.task_id.job_id for g in tracker.admit(now=200) for t in g.tasks] == [
        "too-big-for-a-host"]


def test_with_no_host_known_nothing_is_judged_unplaceable() -> None:
    tracker, _ = _pool(8, BackfillPolicy())
    tracker.enqueue("p", [rm_task(7.5, job="big", inst=0)])
    assert len(tracker.admit(now=0)) == 1
