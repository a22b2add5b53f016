"""Writers of one task take turns (peloton/jobmgr/task_locks.py): no change is given up.

Greenlets write the same task at once, each store write yielding to the others (as a
real store's I/O does): every change must be applied exactly once.  Before the task
write locks, a writer that kept losing its compare-and-set to the others gave up after
five rounds and its change was lost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import gevent
import pytest

from peloton.core.model.task import TaskRuntime
from peloton.jobmgr.task_locks import TaskWriteLocks
from peloton.storage import RuntimeWrite, WriteResult
from tests.unit.jobmgr.harness import Harness, job_spec

WRITERS = 8
CHANGES = 10


def _bump(rt: TaskRuntime) -> TaskRuntime:
    return dataclasses.replace(rt, failure_count=rt.failure_count + 1)


def test_concurrent_writers_of_one_task_lose_no_change(h: Harness,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    jid = h.create(job_spec(2))
    h.settle(5.0)
    job = h.job(jid)
    before = [h.task(jid, i).failure_count for i in (0, 1)]
    real = h.store.write_task_runtimes

    def slow(writes: Sequence[RuntimeWrite]) -> WriteResult:
        gevent.sleep(0.001)  # the store's I/O: other writers run meanwhile
        return real(writes)

    monkeypatch.setattr(h.store, "write_task_runtimes", slow)

    def writer(instance: int) -> None:
        for _ in range(CHANGES):
            assert job.write_task(instance, _bump).get(instance) is not None

    greenlets = [gevent.spawn(writer, i % 2) for i in range(WRITERS)]
    gevent.joinall(greenlets, timeout=60, raise_error=True)
    assert all(g.successful() for g in greenlets)
    per_task = WRITERS // 2 * CHANGES
    assert [h.task(jid, i).failure_count for i in (0, 1)] == [b + per_task for b in before]


def test_stripes_are_taken_in_order_and_released() -> None:
    locks = TaskWriteLocks(stripes=8)
    held = locks.hold("job", [7, 1, 9, 1])  # 9 and 1 share a stripe
    assert len(held) == len({(hash("job") + i) % 8 for i in (7, 1, 9)})
    done: list[bool] = []

    def take_instance_1() -> None:
        locks.release(locks.hold("job", [1]))
        done.append(True)

    other = gevent.spawn(take_instance_1)
    gevent.sleep(0)  # it runs until it blocks on the lock
    assert not done  # waits for the stripe of instance 1
    locks.release(held)
    other.join(5)
    assert done == [True]
    with pytest.raises(ValueError):
        TaskWriteLocks(stripes=0)
