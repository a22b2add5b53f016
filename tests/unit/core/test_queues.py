"""Priority-FIFO gang queues."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.respool.queues import ADMISSION_ORDER, GangQueue, LeafQueues, QueueKind
from peloton.core.respool.records import Gang, TaskRecord
from peloton.core.respool.tree import PoolTree
from tests.unit.core.factories import rm_task


def _gang(priority: int, inst: int) -> Gang:
    node = PoolTree().root
    return Gang([TaskRecord(rm_task(1, inst=inst, priority=priority), node)])


def test_priority_then_fifo() -> None:
    q = GangQueue()
    gangs = [_gang(p, i) for i, p in enumerate([1, 5, 1, 5, 3])]
    for g in gangs:
        q.push(g)
    assert [g.tasks[0].task_id.instance for g in q] == [1, 3, 4, 0, 2]
    assert q.peek() is gangs[1]
    out = [q.pop().tasks[0].task_id.instance for _ in range(len(q))]
    assert out == [1, 3, 4, 0, 2]
    assert q.peek() is None and len(q) == 0


def test_push_front_keeps_turn() -> None:
    q = GangQueue()
    a, b = _gang(1, 0), _gang(1, 1)
    q.push(a)
    q.push(b)
    q.push_front(q.pop())
    assert q.pop() is a


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-3, 3), max_size=40))
def test_matches_stable_sort(prios: list[int]) -> None:
    q = GangQueue()
    for i, p in enumerate(prios):
        q.push(_gang(p, i))
    expected = sorted(range(len(prios)), key=lambda i: (-prios[i], i))
    assert [q.pop().tasks[0].task_id.instance for _ in prios] == expected


def test_leaf_queues_order() -> None:
    lq = LeafQueues()
    assert ADMISSION_ORDER[-1] is QueueKind.PENDING
    lq[QueueKind.PENDING].push(_gang(0, 0))
    lq[QueueKind.CONTROLLER].push(_gang(0, 1))
    assert [k for k, _ in lq.gangs()] == [QueueKind.CONTROLLER, QueueKind.PENDING]
    assert len(lq) == 2
