"""DeadlineQueue: deadline order, earliest-deadline dedup, removal, all on plain numbers."""

from __future__ import annotations

import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from peloton.common.deadline_queue import DeadlineQueue


def test_keys_come_out_in_deadline_order_only_once_due() -> None:
    q: DeadlineQueue[str] = DeadlineQueue()
    q.enqueue("late", 30.0)
    q.enqueue("early", 10.0)
    q.enqueue("middle", 20.0)
    assert q.pop_due(5.0) is None
    assert q.next_deadline() == 10.0
    assert q.pop_due(25.0) == "early"
    assert q.pop_due(25.0) == "middle"
    assert q.pop_due(25.0) is None
    assert q.pop_all_due(100.0) == ["late"]
    assert len(q) == 0 and q.next_deadline() is None


def test_reenqueue_keeps_the_earlier_deadline() -> None:
    q: DeadlineQueue[str] = DeadlineQueue()
    assert q.enqueue("a", 10.0)
    assert not q.enqueue("a", 50.0)  # later: ignored
    assert q.deadline("a") == 10.0
    assert q.enqueue("a", 3.0)  # earlier: moves up
    assert q.deadline("a") == 3.0
    assert len(q) == 1
    assert q.pop_all_due(100.0) == ["a"]  # present once, not once per enqueue


def test_equal_deadlines_are_fifo() -> None:
    q: DeadlineQueue[int] = DeadlineQueue()
    for key in (3, 1, 2):
        q.enqueue(key, 7.0)
    assert q.pop_all_due(7.0) == [3, 1, 2]


def test_remove_and_requeue_after_pop() -> None:
    q: DeadlineQueue[str] = DeadlineQueue()
    q.enqueue("a", 1.0)
    q.enqueue("b", 2.0)
    assert q.remove("a")
    assert not q.remove("a")
    assert "a" not in q and "b" in q
    assert q.next_deadline() == 2.0
    assert q.pop_due(10.0) == "b"
    assert q.enqueue("b", 50.0)  # popped keys can be scheduled again, at any deadline
    assert q.deadline("b") == 50.0


def test_many_supersessions_stay_correct_after_compaction() -> None:
    q: DeadlineQueue[int] = DeadlineQueue()
    for step in range(1000):
        q.enqueue(step % 5, 10_000.0 - step)  # each re-enqueue is earlier, leaving stale heap entries
    assert len(q) == 5
    assert len(q._heap) < 200  # compacted
    assert q.pop_all_due(20_000.0) == [4, 3, 2, 1, 0]


@given(st.lists(st.tuples(st.integers(0, 20), st.floats(0, 1000, allow_nan=False)), max_size=200))
def test_pop_order_matches_earliest_deadline_per_key(ops: list[tuple[int, float]]) -> None:
    q: DeadlineQueue[int] = DeadlineQueue()
    expected: dict[int, float] = {}
    for key, deadline in ops:
        q.enqueue(key, deadline)
        expected[key] = min(deadline, expected.get(key, deadline))
    popped = q.pop_all_due(1000.0)
    assert sorted(popped) == sorted(expected)
    assert [expected[k] for k in popped] == sorted(expected.values())


def test_a_queued_key_costs_one_entry_not_two() -> None:
    # A job manager queues a launch-timeout look for every task it launches (a million at
    # scale): the heap entry and the key's slot are one tuple.  Two cost ~186 B a key.
    keys = [("job", i) for i in range(20_000)]
    deadlines = [1000.0 + i for i in range(len(keys))]
    q: DeadlineQueue[tuple[str, int]] = DeadlineQueue()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for key, deadline in zip(keys, deadlines, strict=True):
            q.enqueue(key, deadline)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (after - before) / len(keys) < 160
    assert q.pop_all_due(1000.0 + 9) == keys[:10] and q.deadline(keys[10]) == 1010.0
