"""The ready queue's retry timers as the forecast reads and resumes them."""

from __future__ import annotations

from peloton.core.respool.records import TaskRecord
from peloton.core.respool.tree import PoolTree
from peloton.resmgr.ready import ReadyEntry, ReadyQueue
from tests.unit.core.factories import rm_task


def _entry(*instances: int) -> ReadyEntry:
    node = PoolTree().root
    return ReadyEntry([TaskRecord(rm_task(1, inst=i), node) for i in instances])


def test_retries_lists_each_waiting_task_with_its_due_time_not_stale_entries() -> None:
    q = ReadyQueue()
    waiting, stale = _entry(0, 1), _entry(2)
    q.push_later(waiting, 5.0)
    q.push_later(stale, 7.0)
    q.push(_entry(2))  # the task was admitted again: the waiting entry is stale
    q.push(_entry(3))  # in the FIFO: not waiting for a retry
    assert {t.instance: due for t, due in q.retries().items()} == {0: 5.0, 1: 5.0}


def test_a_deferred_task_waits_for_its_retry_time_when_admitted() -> None:
    q = ReadyQueue()
    entry = _entry(0)
    q.defer(entry.records[0].task_id, 3.5)
    q.push(entry)
    assert not q.has_ready() and q.next_due() == 3.5
    assert q.promote(3.4) == 0 and q.promote(3.5) == 1 and q.pop() is entry
    q.push(again := _entry(0))  # deferred once only
    assert q.pop() is again
