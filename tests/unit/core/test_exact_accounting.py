"""Exact resource accounting: fixed-point units make every pool return to exactly zero.

The issue this guards against: after a pool's jobs ended, its allocation
read 2.7755575615628914e-17 (tenths of a cpu summed in floats).  With
integer units, any sequence of enqueue / admit / requeue / finish leaves
demand and allocation equal to an exact recount, interior pools equal the
exact sum of their children, and once every task is finished every vector
in the tree is exactly zero.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.resources import ZERO, Resources
from peloton.core.respool.entitlement import compute_entitlements
from peloton.core.respool.node import PoolNode
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState
from tests.unit.core.factories import pool_config, rm_task

#: Amounts whose float sums are noisy (0.1 + 0.2 != 0.3 in floats).
fractions = st.sampled_from([0.1, 0.2, 0.3, 0.7, 1.1, 0.001, 0.333, 2.5])
VECTORS = ("demand", "slack_demand", "alloc_total", "alloc_slack", "alloc_np",
           "alloc_controller")


def _tree() -> PoolTree:
    tree = PoolTree()
    tree.create("org", pool_config("org", cpu=(10, 100, 1), mem=(100, 1000, 1)))
    for name in ("a", "b"):
        tree.create(name, pool_config(name, "org", cpu=(5, 100, 1), mem=(50, 1000, 1)))
    tree.create("c", pool_config("c", cpu=(0, 100, 2), mem=(0, 1000, 1)))
    return tree


def _sums_exact(node: PoolNode) -> None:
    for child in node.children:
        _sums_exact(child)
    if node.children:
        for name in VECTORS:
            total = [sum(getattr(c, name)[k] for c in node.children) for k in range(4)]
            assert getattr(node, name) == total, (node.path, name)


ops = st.lists(st.tuples(st.sampled_from(["enq", "admit", "place", "requeue", "run", "finish"]),
                         st.integers(0, 1000), fractions, fractions, st.booleans(),
                         st.booleans()), max_size=80)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_any_allocate_release_sequence_returns_to_exactly_zero(
        script: list[tuple[str, int, float, float, bool, bool]]) -> None:
    tree = _tree()
    compute_entitlements(tree, Resources(cpu=7.3, mem_mb=77.7), 1.7).apply(tree)
    tracker = TaskTracker(tree, preemption_enabled=True)
    inst = 0
    leaves = ["a", "b", "c"]
    for op, k, cpu, mem, revocable, preemptible in script:
        records = sorted(tracker.records(), key=lambda r: r.task_id.instance)
        if op == "enq":
            size = 1 + k % 3
            tracker.enqueue(leaves[k % 3], [
                rm_task(cpu, mem=mem, inst=inst + j, revocable=revocable,
                        preemptible=preemptible or revocable) for j in range(size)])
            inst += size
        elif op == "admit":
            tracker.admit(limit_per_pool=1 + k % 5)
            compute_entitlements(tree, Resources(cpu=7.3, mem_mb=77.7), 1.7).apply(tree)
        elif records:
            rec = records[k % len(records)]
            if op == "place" and rec.state is TaskState.READY:
                tracker.transition(rec.task_id, TaskState.PLACING)
            elif op == "requeue" and rec.state in (TaskState.READY, TaskState.PLACING):
                tracker.transition(rec.task_id, TaskState.PENDING)
            elif op == "run" and rec.state is TaskState.PLACING:
                for state in (TaskState.PLACED, TaskState.LAUNCHING, TaskState.RUNNING):
                    tracker.transition(rec.task_id, state)
            elif op == "finish":
                tracker.finish(rec.task_id, TaskState.SUCCEEDED)
        # Every step: exact recount in each leaf, exact sums up the tree.
        for leaf in tree.leaves():
            mine = [r for r in tracker.records() if r.pool is leaf]
            queued = sum((r.resources for r in mine if r.state is TaskState.PENDING), ZERO)
            held = sum((r.resources for r in mine if r.state is not TaskState.PENDING), ZERO)
            assert leaf.demand_resources() + leaf.slack_demand_resources() == queued
            assert leaf.allocation_resources() == held
        _sums_exact(tree.root)
    for rec in list(tracker.records()):
        tracker.finish(rec.task_id, TaskState.KILLED)
    for node in tree.nodes():
        for name in VECTORS:
            assert getattr(node, name) == [0, 0, 0, 0], (node.path, name)
        assert node.allocation_resources() == ZERO and node.allocation_resources().cpu == 0.0
        assert not node.has_work()
