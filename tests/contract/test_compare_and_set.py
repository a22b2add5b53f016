"""Contract: runtime writes are compare-and-set under real concurrency, in every backend.

Writers in threads race on the same rows from the same stale revision:
exactly one may win each revision, the others get Conflict (or, in a batch,
land in `conflicts`) and nothing is lost.  On Cassandra these are
lightweight transactions (`UPDATE ... IF revision = ?`, a Paxos round on
the server), so this suite run against the real node is what shows that a
lost update cannot happen there either.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from peloton.core.errors import Conflict
from peloton.core.model.ids import TaskId
from peloton.storage import RuntimeWrite, Store
from tests.contract import factories as f


def _race(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run fn(0..n-1) in n threads released together; each result or raised exception."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait(10)
        try:
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return results


def test_one_of_many_writers_from_the_same_revision_wins(store: Store) -> None:
    jid = f.job_id()
    base = store.create_job(jid, f.job_spec(), f.job_runtime())
    results = _race(6, lambda i: store.update_job_runtime(
        jid, dataclasses.replace(base, message=f"writer {i}")))
    won = [r for r in results if not isinstance(r, Exception)]
    assert len(won) == 1, results
    assert all(isinstance(r, Conflict) for r in results if r not in won), results
    stored = store.get_job_runtime(jid)
    assert stored == won[0] and stored.revision == base.revision + 1


def test_concurrent_read_modify_write_loses_no_update(store: Store) -> None:
    jid = f.job_id()
    store.create_job(jid, f.job_spec(), f.job_runtime())
    writers, each = 4, 8
    conflicts = [0] * writers

    def bump(i: int) -> int:
        done = 0
        while done < each:
            rt = store.get_job_runtime(jid)
            try:
                store.update_job_runtime(jid, dataclasses.replace(
                    rt, state_version=rt.state_version + 1))
                done += 1
            except Conflict:
                conflicts[i] += 1  # someone else won this revision: read again
        return done

    assert _race(writers, bump) == [each] * writers
    final = store.get_job_runtime(jid)
    assert final.state_version == 1 + writers * each
    assert final.revision == 1 + writers * each


def test_batched_task_writes_race_per_task(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(4)})
    stale = store.get_task_runtimes(jid)

    # Every writer sends one batch over all four tasks from the same revisions.
    results = _race(4, lambda w: store.write_task_runtimes([
        RuntimeWrite(jid, i, dataclasses.replace(rt, message=f"w{w}"))
        for i, rt in stale.items()]))
    tasks = {TaskId(jid, i) for i in stale}
    for task in tasks:
        winners = [r for r in results if task in r.written]  # type: ignore[attr-defined]
        losers = [r for r in results if task in r.conflicts]  # type: ignore[attr-defined]
        assert len(winners) == 1 and len(losers) == 3, (task, results)
        stored = store.get_task_runtime(jid, task.instance)
        assert stored == winners[0].written[task]  # type: ignore[attr-defined]
        assert stored.revision == 2
