"""Placements and preemption victims per job partition (all-active job managers).

Each member of an all-active job manager cluster asks the resource manager for the
placements and victims of its own partitions' jobs only (docs/design/all-active-jobmgr.md):
handed to another member, a placement would be killed there as stale and a victim dropped.
A placement on one host holding tasks of several partitions is split between their owners;
a caller that names no partitions (a lone job manager) gets everything, as before.
"""

from __future__ import annotations

from collections.abc import Iterator

import gevent
import pytest

from peloton.core.model.ids import TaskId
from peloton.core.model.sched import PlacedTask, Placement
from peloton.core.partitions import PartitionSet
from peloton.core.respool.records import RmTask
from peloton.core.states import TaskState
from peloton.resmgr.app import ResourceManager
from peloton.storage import Store
from tests.fakes.hostmgr import FakeHostManager
from tests.harness.partition_ids import job_in
from tests.unit.resmgr.helpers import (
    FakeClock,
    make_pool,
    make_rm,
    place_all,
    run_all,
    singles,
    state_of,
    tasks,
)

S = TaskState
COUNT = 4


def member(*partitions: int) -> PartitionSet:
    return PartitionSet(COUNT, frozenset(partitions))


def task_ids(placements: list[Placement]) -> set[TaskId]:
    return {t.task_id for p in placements for t in p.tasks}


def placed_together(rm: ResourceManager, pool: str, ts: list[RmTask], host: str) -> None:
    """Queue, admit and dequeue `ts`, then report them all placed in one placement on `host`."""
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    gangs = rm.dequeue_gangs(100, 0)
    assert len(gangs) == len(ts)
    rm.set_placements([Placement(host, f"agent-{host}", tuple(
        PlacedTask(g.gang.tasks[0].task_id, g.run_ids[0]) for g in gangs))], [])


def test_each_member_gets_only_its_partitions_placements(rm: ResourceManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 16))
    first, second = tasks(2, job=job_in(0, COUNT)), tasks(2, job=job_in(1, COUNT))
    placed_together(rm, pool, first + second, "host-1")

    assert rm.get_placements(10, 0, member(2, 3)) == []  # none of theirs
    assert rm.get_placements(10, 0, member()) == []  # a member holding nothing gets nothing
    (mine,) = rm.get_placements(10, 0, member(0, 2))
    assert mine.hostname == "host-1" and task_ids([mine]) == {t.task_id for t in first}
    assert {state_of(rm, t) for t in first} == {S.LAUNCHING}
    assert {state_of(rm, t) for t in second} == {S.PLACED}  # kept for its own owner
    assert rm.get_placements(10, 0, member(0)) == []

    # The limit holds per call; the rest of the member's placement stays at the head.
    (one,) = rm.get_placements(1, 0, member(1))
    (other,) = rm.get_placements(10, 0, member(1))
    assert task_ids([one]) | task_ids([other]) == {t.task_id for t in second}
    assert one.hostname == other.hostname == "host-1"


def test_a_caller_naming_no_partitions_gets_every_placement(rm: ResourceManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 16))
    first, second = tasks(1, job=job_in(0, COUNT)), tasks(1, job=job_in(3, COUNT))
    placed_together(rm, pool, first + second, "host-0")
    assert rm.get_placements(10, 0, member(1)) == []  # the queue is now kept per partition
    everything = rm.get_placements(10, 0)
    assert task_ids(everything) == {t.task_id for t in first + second}
    assert {state_of(rm, t) for t in first + second} == {S.LAUNCHING}


def test_each_member_takes_only_its_partitions_victims(
        store: Store, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    # test_preemption.py's scene: a reserved pool's 8 cpus are held by elastic tasks, the 8
    # preemptible ones (4 of each of two jobs in different partitions) become victims.
    rm = make_rm(store, hostmgr, clock, sustained_over_allocation_count=1, retry_delay=0.1)
    shared = make_pool(rm, "shared", cpu=(8, 16))
    reserved = make_pool(rm, "reserved", cpu=(8, 8))
    ours, theirs = tasks(4, job=job_in(0, COUNT)), tasks(4, job=job_in(2, COUNT))
    rm.enqueue_gangs(shared, singles(tasks(8, preemptible=False) + ours + theirs))
    clock.advance(1)
    run_all(rm, hostmgr)
    rm.enqueue_gangs(reserved, singles(tasks(8, preemptible=False)))
    clock.advance(1)
    rm.loops.admit_once()
    place_all(rm, hostmgr)  # the cluster is full: nothing of the reserved pool fits
    rm.loops.preempt_once()

    assert rm.take_victims(100, member(1, 3)) == []
    mine = rm.take_victims(100, member(0))
    assert {v.task_id for v in mine} == {t.task_id for t in ours}
    # The other member's victims were not handed out: still RUNNING, waiting for it.
    assert {state_of(rm, t) for t in theirs} == {S.RUNNING}
    assert rm.take_victims(100, member(0)) == []
    rest = rm.take_victims(100, member(2))
    assert {v.task_id for v in rest} == {t.task_id for t in theirs}
    assert {state_of(rm, t) for t in ours + theirs} == {S.PREEMPTING}
    assert rm.take_victims(100) == []  # each victim handed out once


@pytest.fixture
def direct(store: Store, hostmgr: FakeHostManager, clock: FakeClock) -> Iterator[ResourceManager]:
    """The resource manager itself: `still_current` is its serving side's (the gRPC path,
    the term fence's watermark, is tested in tests/unit/api/test_term_fence.py)."""
    manager = make_rm(store, hostmgr, clock)
    yield manager
    manager.stop()


def test_a_poll_whose_partitions_moved_takes_nothing(direct: ResourceManager) -> None:
    # The serving side's term fence says the caller's partitions moved (a newer owner has
    # called): the poll ends empty, and the placement waits for its new owner.
    rm = direct
    pool = make_pool(rm, "a", cpu=(0, 16))
    placed = tasks(1, job=job_in(0, COUNT))
    placed_together(rm, pool, placed, "host-1")
    assert rm.get_placements(10, 0, member(0), still_current=lambda: False) == []
    assert {state_of(rm, t) for t in placed} == {S.PLACED}
    (taken,) = rm.get_placements(10, 0, member(0), still_current=lambda: True)
    assert task_ids([taken]) == {t.task_id for t in placed}


def test_a_waiting_poll_ends_when_its_partitions_move_before_the_new_owner_is_placed(
        direct: ResourceManager) -> None:
    # The old owner's poll waits; the new owner's call moves the epoch, then its run is
    # queued and placed: the woken poll looks again and leaves the placement alone.
    rm = direct
    pool = make_pool(rm, "a", cpu=(0, 16))
    moved = [False]
    poll = gevent.spawn(rm.get_placements, 10, 30.0, member(0),
                        still_current=lambda: not moved[0])
    gevent.sleep(0)  # the poll is waiting
    assert not poll.dead
    moved[0] = True
    fresh = tasks(1, job=job_in(0, COUNT))
    placed_together(rm, pool, fresh, "host-1")
    assert poll.get(timeout=10) == []  # woken by the placement, long before its 30 s
    assert {state_of(rm, t) for t in fresh} == {S.PLACED}
