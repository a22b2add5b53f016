"""Backfill and its starvation protection (core/respool/admission.py).

Two properties carry the design:

* no admissible gang waits behind an inadmissible one: after a pass, every
  gang still queued is refused by some admitter (or would not fit beside
  the gang holding the reservation);
* a big gang that fits the pool eventually runs while small work keeps
  arriving, once running work ends: the aging reservation stops the
  stream of small gangs from overtaking it for ever.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.resources import to_units
from peloton.core.respool.admission import (
    STRICT_FIFO,
    BackfillPolicy,
    fits_empty,
    refusal,
)
from peloton.core.respool.node import PoolNode
from peloton.core.respool.queues import QueueKind
from peloton.core.respool.records import Gang
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState
from tests.unit.core.factories import pool_config, rm_task

NEVER = float("inf")


def _pool(entitled: float, policy: BackfillPolicy, *, reservation: float = 0.0,
          preemption: bool = False) -> tuple[TaskTracker, PoolNode]:
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(reservation, 1000, 1)))
    # Pool vectors are fixed-point units (thousandths of a cpu).
    node.entitlement = [to_units(entitled), 0, 0, 0]
    node.non_slack_entitlement = [to_units(entitled), 0, 0, 0]
    node.slack_entitlement = [to_units(entitled), 0, 0, 0]
    return TaskTracker(tree, preemption_enabled=preemption, backfill=policy), node


def _queued(node: PoolNode) -> list[tuple[QueueKind, Gang]]:
    assert node.queues is not None
    return list(node.queues.gangs())


def _instances(gangs: list[Gang]) -> list[int]:
    return [t.task_id.instance for g in gangs for t in g.tasks]


# -- examples ----------------------------------------------------------------------------------

def test_a_gang_too_big_for_the_pool_does_not_block_the_ones_behind_it() -> None:
    tracker, node = _pool(2, BackfillPolicy())
    tracker.enqueue("p", [rm_task(500, inst=0)])
    tracker.enqueue("p", [rm_task(3, inst=1)])
    tracker.enqueue("p", [rm_task(0.5, inst=2)])
    tracker.enqueue("p", [rm_task(0.5, inst=3)])
    assert _instances(tracker.admit(now=0)) == [2, 3]
    # The refused gangs keep their places, in order, and never reserve (too big for the pool).
    assert _instances([g for _, g in _queued(node)]) == [0, 1]
    assert tracker.admit(now=10_000) == []
    assert node.queues is not None and not node.queues.reserved


def test_strict_fifo_is_peloton_head_of_line_blocking() -> None:
    tracker, _ = _pool(3, STRICT_FIFO)
    tracker.enqueue("p", [rm_task(4, inst=0)])
    tracker.enqueue("p", [rm_task(1, inst=1)])
    assert tracker.admit() == []


def test_backfill_crosses_priorities_but_keeps_their_order() -> None:
    tracker, node = _pool(3, BackfillPolicy())
    tracker.enqueue("p", [rm_task(1, inst=0, priority=0)])
    tracker.enqueue("p", [rm_task(5, inst=1, priority=9)])
    tracker.enqueue("p", [rm_task(1, inst=2, priority=9)])
    tracker.enqueue("p", [rm_task(4, inst=3, priority=0)])
    assert _instances(tracker.admit()) == [2, 0]
    assert _instances([g for _, g in _queued(node)]) == [1, 3]


def test_the_reservation_keeps_room_until_the_big_gang_fits() -> None:
    tracker, node = _pool(4, BackfillPolicy(reserve_after=30))
    first = tracker.enqueue("p", [rm_task(3, inst=0)])
    tracker.admit(now=0)
    tracker.enqueue("p", [rm_task(2, inst=1)])
    tracker.admit(now=0)                               # refused at t=0
    tracker.enqueue("p", [rm_task(1, inst=2)])
    assert tracker.admit(now=31) == []                 # 1 cpu free, but it is kept for the big one
    assert node.queues is not None
    held = node.queues.reserved[QueueKind.PENDING]
    assert _instances([held]) == [1]
    tracker.finish(first.tasks[0].task_id, TaskState.SUCCEEDED)
    assert _instances(tracker.admit(now=32)) == [1, 2]
    assert not node.queues.reserved


def test_a_gang_that_shrinks_out_of_the_pool_loses_its_reservation() -> None:
    tracker, node = _pool(4, BackfillPolicy(reserve_after=0))
    tracker.enqueue("p", [rm_task(3, inst=0)])
    tracker.admit(now=0)
    tracker.enqueue("p", [rm_task(2, inst=1)])
    tracker.admit(now=0)
    assert node.queues is not None and QueueKind.PENDING in node.queues.reserved
    node.non_slack_entitlement[0] = to_units(1.5)  # entitlement shrank below the gang
    tracker.enqueue("p", [rm_task(0.5, inst=2)])
    tracker.admit(now=1)
    # The 2-cpu gang can no longer run here at all; the next one that could takes its place.
    assert _instances([node.queues.reserved[QueueKind.PENDING]]) == [2]


def test_side_queues_backfill_too() -> None:
    tracker, node = _pool(10, BackfillPolicy(), reservation=2, preemption=True)
    tracker.enqueue("p", [rm_task(3, inst=0, preemptible=False)])
    tracker.enqueue("p", [rm_task(1, inst=1, preemptible=False)])
    assert _instances(tracker.admit()) == [1]
    assert node.queues is not None and len(node.queues[QueueKind.NON_PREEMPTIBLE]) == 1


# -- properties --------------------------------------------------------------------------------

gang_sizes = st.lists(st.tuples(st.floats(0.1, 8).map(lambda x: round(x, 2)),
                                st.integers(1, 3), st.integers(0, 2)), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(entitled=st.floats(1, 12).map(lambda x: round(x, 1)),
       running=st.lists(st.floats(0.1, 3).map(lambda x: round(x, 1)), max_size=6),
       queued=gang_sizes, reserve_after=st.sampled_from([0.0, 5.0, NEVER]),
       rounds=st.integers(1, 3))
def test_no_admissible_gang_waits_behind_an_inadmissible_one(
        entitled: float, running: list[float], queued: list[tuple[float, int, int]],
        reserve_after: float, rounds: int) -> None:
    tracker, node = _pool(entitled, BackfillPolicy(reserve_after=reserve_after))
    for i, cpu in enumerate(running):
        tracker.enqueue("p", [rm_task(cpu, inst=1000 + i)])
    tracker.admit(now=0)
    inst = 0
    for cpu, size, prio in queued:
        tracker.enqueue("p", [rm_task(cpu / size, inst=inst + j, priority=prio)
                              for j in range(size)])
        inst += size
    for r in range(rounds):
        tracker.admit(limit_per_pool=10**6, now=10.0 * r)
    assert node.alloc_total[0] <= to_units(entitled)
    assert node.queues is not None
    held = node.queues.reserved.get(QueueKind.PENDING)
    for _, gang in _queued(node):
        if held is None or gang is held:
            assert refusal(node, gang, False) is not None, gang
        else:
            # Fits on its own only by eating into the room kept for the older, aged gang.
            assert refusal(node, gang, False, held) is not None, gang
    if held is not None:
        assert reserve_after < NEVER and fits_empty(node, held, False)


@settings(max_examples=100, deadline=None)
@given(big=st.floats(2, 10).map(lambda x: round(x, 1)),
       stream=st.lists(st.tuples(st.floats(0.1, 2).map(lambda x: round(x, 1)),
                                 st.integers(1, 5)), min_size=40, max_size=80),
       reserve_after=st.sampled_from([0.0, 3.0, 10.0]))
def test_a_big_gang_eventually_runs_when_capacity_frees(
        big: float, stream: list[tuple[float, int]], reserve_after: float) -> None:
    """Small gangs arrive every step and each runs a few steps; the big one still gets in."""
    entitled = 10.0
    tracker, node = _pool(entitled, BackfillPolicy(reserve_after=reserve_after))
    ends: dict[int, list[Gang]] = {}
    for i, (cpu, steps) in enumerate(stream[:5]):      # a busy pool to start with
        gang = tracker.enqueue("p", [rm_task(cpu, inst=100 + i)])
        tracker.admit(now=0)
        ends.setdefault(steps, []).append(gang)
    target = tracker.enqueue("p", [rm_task(big, inst=0)])
    started_at = None
    longest = max(steps for _, steps in stream)
    for t, (cpu, steps) in enumerate(stream, start=1):
        for gang in ends.pop(t, []):
            for rec in gang.tasks:
                tracker.finish(rec.task_id, TaskState.SUCCEEDED)
        tracker.enqueue("p", [rm_task(cpu, inst=200 + t)])
        for gang in tracker.admit(now=float(t)):
            if gang is target:
                started_at = t
                break
            ends.setdefault(t + steps, []).append(gang)
        if started_at is not None:
            break
    assert started_at is not None, "the big gang starved"
    # Reserved at the latest reserve_after after its first refusal; then the work in
    # front of it ends within the longest run.
    assert started_at <= reserve_after + longest + 2
    assert node.alloc_total[0] <= to_units(entitled)


def test_without_aging_a_stream_of_small_gangs_can_starve_a_big_one() -> None:
    """Why the reservation exists: pure backfill (Kubernetes' queue) lets small work overtake."""
    tracker, _ = _pool(4, BackfillPolicy(reserve_after=NEVER))
    live: list[Gang] = []
    for i in range(4):
        live.append(tracker.enqueue("p", [rm_task(1, inst=100 + i)]))
    tracker.admit(now=0)
    target = tracker.enqueue("p", [rm_task(2, inst=0)])
    for t in range(1, 50):
        # One small task ends and a new one arrives each step: one cpu is ever free.
        done = live.pop(0)
        tracker.finish(done.tasks[0].task_id, TaskState.SUCCEEDED)
        tracker.enqueue("p", [rm_task(1, inst=200 + t)])
        admitted = tracker.admit(now=float(t))
        assert target not in admitted
        live.extend(admitted)
