"""Contract: the group committer over each backend, with real threads.

No test here asserts on timing or on how many batches were formed with
the flusher running (that depends on scheduling); batching itself is
checked deterministically with `flush()` and no flusher thread.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

from peloton.core.errors import Conflict, NotFound
from peloton.core.model.ids import TaskId
from peloton.core.states import TaskState
from peloton.storage import GroupCommitter, RuntimeWrite, Store
from tests.contract import factories as f


def test_concurrent_writers_all_commit(store: Store) -> None:
    jid = f.job_id()
    n_threads, per_thread = 8, 25
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(n_threads)})
    committer = GroupCommitter(store, flush_interval=0.002, max_batch=64)
    committer.start()
    errors: list[BaseException] = []

    def writer(instance: int) -> None:
        try:
            rt = store.get_task_runtime(jid, instance)
            for _ in range(per_thread):  # each thread walks its own task's revisions
                rt = committer.write(jid, instance, dataclasses.replace(
                    rt, failure_count=rt.failure_count + 1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    committer.stop()
    assert errors == []
    for i, rt in store.get_task_runtimes(jid).items():
        assert rt.revision == 1 + per_thread, i
        assert rt.failure_count == per_thread
    assert 1 <= committer.batches <= n_threads * per_thread


def test_each_caller_gets_its_own_outcome(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {0: f.task_runtime(), 1: f.task_runtime()})
    committer = GroupCommitter(store, max_batch=10)
    rt = store.get_task_runtime(jid, 0)
    good = committer.submit(RuntimeWrite(jid, 0, dataclasses.replace(rt, host="a")))
    stale = committer.submit(RuntimeWrite(jid, 1, dataclasses.replace(rt, revision=7)))
    missing = committer.submit(RuntimeWrite(jid, 5, rt))
    assert committer.flush() == 3  # one batch, one transaction
    assert committer.batches == 1
    assert good.result().host == "a" and good.result().revision == 2
    with pytest.raises(Conflict):
        stale.result()
    with pytest.raises(NotFound):
        missing.result()
    assert store.get_task_runtime(jid, 1).revision == 1


def test_two_writes_of_one_task_go_in_order_in_separate_batches(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {0: f.task_runtime()})
    committer = GroupCommitter(store)
    rt = store.get_task_runtime(jid, 0)
    first = committer.submit(RuntimeWrite(jid, 0, dataclasses.replace(rt, host="first")))
    second = committer.submit(RuntimeWrite(jid, 0, dataclasses.replace(
        rt, revision=2, host="second")))
    assert committer.flush() == 1
    assert committer.flush() == 1
    assert first.result().revision == 2
    assert second.result().revision == 3
    assert store.get_task_runtime(jid, 0).host == "second"


def test_write_many_spans_batches_and_reports(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(50)})
    committer = GroupCommitter(store, max_batch=16)
    current = store.get_task_runtimes(jid)
    writes = [RuntimeWrite(jid, i, dataclasses.replace(rt, state=TaskState.RUNNING))
              for i, rt in current.items()]
    writes.append(RuntimeWrite(jid, 99, current[0]))
    result = committer.write_many(writes)
    assert len(result.written) == 50 and result.missing == {TaskId(jid, 99)}
    assert committer.batches == 4  # 51 writes in batches of 16
    committer.stop()
