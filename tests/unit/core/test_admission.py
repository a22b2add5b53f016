"""Admission: the three admitters, queue order, side queues, gangs, incremental accounting."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.resources import Resources, from_units
from peloton.core.respool.admission import Admitter, refusal
from peloton.core.respool.entitlement import compute_entitlements
from peloton.core.respool.node import PoolNode
from peloton.core.respool.queues import QueueKind
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState
from tests.unit.core.factories import pool_config, rm_task, units


def _setup(entitled: float, *, reservation: float = 0, preemption: bool = False,
           controller_pct: float | None = None) -> tuple[TaskTracker, PoolNode]:
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(reservation, 1000, 1),
                                        controller_pct=controller_pct))
    node.entitlement = units(entitled)
    node.non_slack_entitlement = units(entitled)
    node.slack_entitlement = units(2)
    return TaskTracker(tree, preemption_enabled=preemption), node


def cpu(v: list[int]) -> float:
    """The cpu of a node vector, in cores."""
    return from_units(v[0])


def _ids(gangs: list) -> list[int]:  # type: ignore[type-arg]
    return [t.task_id.instance for g in gangs for t in g.tasks]


def test_admits_up_to_entitlement_in_priority_order() -> None:
    tracker, node = _setup(3)
    for i, prio in enumerate([0, 9, 0, 9]):
        tracker.enqueue("p", [rm_task(1, inst=i, priority=prio)])
    admitted = tracker.admit()
    assert _ids(admitted) == [1, 3, 0]
    assert cpu(node.alloc_total) == 3 and cpu(node.demand) == 1
    assert all(t.state is TaskState.READY for g in admitted for t in g.tasks)
    assert tracker.get(admitted[0].tasks[0].task_id) in node.active


def test_backfill_past_a_gang_that_does_not_fit() -> None:
    tracker, _ = _setup(3)
    tracker.enqueue("p", [rm_task(4, inst=0)])
    tracker.enqueue("p", [rm_task(1, inst=1)])
    assert _ids(tracker.admit()) == [1]  # the big head gang no longer blocks (test_backfill.py)


def test_gang_all_or_nothing() -> None:
    tracker, node = _setup(3)
    tracker.enqueue("p", [rm_task(1, inst=i) for i in range(4)])
    assert tracker.admit() == []
    assert cpu(node.demand) == 4
    node.non_slack_entitlement = units(4)
    assert _ids(tracker.admit()) == [0, 1, 2, 3]


def test_limit_per_call() -> None:
    tracker, _ = _setup(100)
    for i in range(5):
        tracker.enqueue("p", [rm_task(1, inst=i)])
    assert len(tracker.admit(limit_per_pool=2)) == 2
    assert len(tracker.admit(limit_per_pool=10, pool_id="p")) == 3


def test_non_preemptible_needs_reservation_and_moves_aside() -> None:
    tracker, node = _setup(10, reservation=2, preemption=True)
    tracker.enqueue("p", [rm_task(3, inst=0, preemptible=False)])
    tracker.enqueue("p", [rm_task(3, inst=1)])
    admitted = tracker.admit()
    # The non-preemptible gang exceeds the reservation: it waits in its own queue,
    # and the preemptible one behind it is admitted on elastic capacity.
    assert _ids(admitted) == [1]
    assert node.queues is not None
    assert len(node.queues[QueueKind.NON_PREEMPTIBLE]) == 1
    assert cpu(node.demand) == 3
    gang = node.queues[QueueKind.NON_PREEMPTIBLE].peek()
    assert gang is not None and refusal(node, gang, True) is Admitter.RESERVATION
    assert refusal(node, gang, False) is None  # without preemption only entitlement counts


def test_controller_limit() -> None:
    tracker, node = _setup(10, reservation=10, controller_pct=20)
    tracker.enqueue("p", [rm_task(3, inst=0, controller=True)])
    tracker.enqueue("p", [rm_task(1, inst=1)])
    assert _ids(tracker.admit()) == [1]
    assert node.queues is not None and len(node.queues[QueueKind.CONTROLLER]) == 1
    tracker.enqueue("p", [rm_task(2, inst=2, controller=True)])
    assert _ids(tracker.admit()) == [2]  # the controller queue is served before pending


def test_revocable_uses_slack_entitlement() -> None:
    tracker, node = _setup(0)
    tracker.enqueue("p", [rm_task(1, inst=0, revocable=True)])
    tracker.enqueue("p", [rm_task(2, inst=1, revocable=True)])
    assert _ids(tracker.admit()) == [0]
    assert cpu(node.alloc_slack) == 1
    assert node.queues is not None and len(node.queues[QueueKind.REVOCABLE]) == 1
    assert cpu(node.slack_demand) == 2 and cpu(node.demand) == 0


def test_killed_tasks_leave_demand_and_gang() -> None:
    tracker, node = _setup(2)
    tracker.enqueue("p", [rm_task(1, inst=i) for i in range(3)])
    tracker.finish(next(t.task_id for t in tracker.records() if t.task_id.instance == 1))
    assert cpu(node.demand) == 2
    assert _ids(tracker.admit()) == [0, 2]
    assert cpu(node.demand) == 0 and cpu(node.alloc_total) == 2


def test_demand_aggregates_up_the_tree() -> None:
    tree = PoolTree()
    tree.create("a", pool_config("a", cpu=(0, 100, 1), mem=(0, 100, 1)))
    leaf = tree.create("b", pool_config("b", "a", cpu=(0, 100, 1), mem=(0, 100, 1)))
    tracker = TaskTracker(tree)
    tracker.enqueue("b", [rm_task(2, mem=10)])
    assert tree.get("a").demand == units(2, 10) == tree.root.demand
    compute_entitlements(tree, Resources(cpu=10, mem_mb=100)).apply(tree)
    tracker.admit()
    assert tree.root.demand == [0, 0, 0, 0] and tree.root.alloc_total == units(2, 10)
    # An unset kind has limit 0 (Peloton's default), so memory-hungry work is refused.
    tracker.enqueue("b", [rm_task(1, mem=200)])
    assert tracker.admit() == []
    assert leaf.alloc_total == units(2, 10)


ops = st.lists(st.tuples(st.sampled_from(["enq", "kill", "admit", "done", "requeue"]),
                         st.integers(0, 30), st.floats(0.5, 3), st.booleans()), max_size=60)


@settings(max_examples=80, deadline=None)
@given(ops)
def test_accounting_matches_records(script: list[tuple[str, int, float, bool]]) -> None:
    """After any sequence of transitions, demand and allocation equal a recount of the records."""
    tracker, node = _setup(10, reservation=5, preemption=True)
    inst = 0
    for op, k, cpu, flag in script:
        records = sorted(tracker.records(), key=lambda r: r.task_id.instance)
        if op == "enq":
            tracker.enqueue("p", [rm_task(cpu, inst=inst + j, preemptible=flag, revocable=False)
                                  for j in range(1 + k % 3)])
            inst += 3
        elif op == "admit":
            tracker.admit(limit_per_pool=1 + k % 4)
        elif records:
            rec = records[k % len(records)]
            if op == "kill":
                tracker.finish(rec.task_id)
            elif op == "done" and rec.state is TaskState.READY:
                tracker.transition(rec.task_id, TaskState.PLACING)
            elif op == "requeue" and rec.state in (TaskState.READY, TaskState.PLACING):
                tracker.transition(rec.task_id, TaskState.PENDING)
    queued = sum(r.resources.units[0] for r in tracker.records()
                 if r.state is TaskState.PENDING)
    held = sum(r.resources.units[0] for r in tracker.records()
               if r.state is not TaskState.PENDING)
    # Fixed-point units: the recount is exact, and so are the bounds.
    assert node.demand[0] == queued
    assert node.alloc_total[0] == held
    assert node.alloc_total[0] <= units(10)[0]                     # never beyond entitlement
    assert node.alloc_np[0] <= units(5)[0]                         # np within reservation
    assert len(node.active) == sum(1 for r in tracker.records()
                                   if r.state is not TaskState.PENDING)
