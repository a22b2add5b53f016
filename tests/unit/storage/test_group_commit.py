"""Group commit against a fake runtime store: failures reach every caller, the flusher
survives them, stop() commits what is queued, and the batching window is waited only
right after a commit."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import pytest

from peloton.core.errors import Unavailable
from peloton.core.model.ids import TaskId
from peloton.core.model.task import TaskRuntime
from peloton.storage import GroupCommitter, RuntimeWrite, WriteResult


class FakeRuntimes:
    """Applies every write (no CAS), or fails the next `fail` batches."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.fail = 0

    def write_task_runtimes(self, writes: Sequence[RuntimeWrite]) -> WriteResult:
        if self.fail:
            self.fail -= 1
            raise Unavailable("database down")
        self.batches.append(len(writes))
        return WriteResult({w.task: dataclasses.replace(w.runtime, revision=w.runtime.revision
                                                        + 1) for w in writes})


def test_a_failed_batch_fails_each_caller_and_the_next_batch_works() -> None:
    store = FakeRuntimes()
    committer = GroupCommitter(store)  # type: ignore[arg-type]
    store.fail = 1
    a = committer.submit(RuntimeWrite("j", 0, TaskRuntime()))
    b = committer.submit(RuntimeWrite("j", 1, TaskRuntime()))
    committer.flush()
    for p in (a, b):
        with pytest.raises(Unavailable):
            p.result()
    assert committer.write("j", 0, TaskRuntime(revision=4)).revision == 5
    assert committer.batches == 1


def test_max_batch_bounds_each_transaction() -> None:
    store = FakeRuntimes()
    committer = GroupCommitter(store, max_batch=3)  # type: ignore[arg-type]
    result = committer.write_many([RuntimeWrite("j", i, TaskRuntime()) for i in range(8)])
    assert store.batches == [3, 3, 2]
    assert set(result.written) == {TaskId("j", i) for i in range(8)}


def test_flusher_thread_commits_and_stop_drains() -> None:
    store = FakeRuntimes()
    committer = GroupCommitter(store, flush_interval=0.0)  # type: ignore[arg-type]
    committer.start()
    committer.start()  # idempotent
    assert committer.write("j", 0, TaskRuntime()).revision == 1
    committer.stop()
    pending = committer.submit(RuntimeWrite("j", 1, TaskRuntime()))
    committer.stop()  # not running: commits what was queued on this thread
    assert pending.done() and pending.result().revision == 1


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        GroupCommitter(FakeRuntimes(), max_batch=0)  # type: ignore[arg-type]


def test_a_batch_key_keeps_each_batch_to_one_key_in_submission_order() -> None:
    class Recording(FakeRuntimes):
        def __init__(self) -> None:
            super().__init__()
            self.jobs: list[list[str]] = []

        def write_task_runtimes(self, writes: Sequence[RuntimeWrite]) -> WriteResult:
            self.jobs.append([w.job_id for w in writes])
            return super().write_task_runtimes(writes)

    store = Recording()
    partition = {"a1": 0, "a2": 0, "b1": 1}
    committer = GroupCommitter(store, batch_key=lambda w: partition[w.job_id])  # type: ignore[arg-type]
    pendings = [committer.submit(RuntimeWrite(job, i, TaskRuntime()))
                for i, job in enumerate(["a1", "b1", "a2", "b1", "a1"])]
    while committer.flush():
        pass
    assert store.jobs == [["a1", "a2", "a1"], ["b1", "b1"]]
    assert all(p.done() and p.result().revision == 1 for p in pendings)


class SteppedClock:
    """A monotonic clock that stays put; `reads` counts how often the flusher looked at it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.reads = 0
        self.read = threading.Condition()

    def __call__(self) -> float:
        with self.read:
            self.reads += 1
            self.read.notify_all()
        return self.now

    def wait_reads(self, count: int) -> None:
        with self.read:
            assert self.read.wait_for(lambda: self.reads >= count, timeout=10), self.reads


def test_a_write_to_an_idle_committer_does_not_wait_out_the_window() -> None:
    store = FakeRuntimes()
    committer = GroupCommitter(store, flush_interval=60.0)  # type: ignore[arg-type]
    committer.start()
    try:
        # Nothing committed for a window: committed at once, not a minute later.
        first = committer.submit(RuntimeWrite("j", 0, TaskRuntime()))
        assert first.result(timeout=10).revision == 1
    finally:
        committer.stop()
    assert store.batches == [1]


def test_writes_right_after_a_commit_wait_for_the_window_and_share_a_batch() -> None:
    store = FakeRuntimes()
    clock = SteppedClock()
    committer = GroupCommitter(store, flush_interval=60.0,  # type: ignore[arg-type]
                               monotonic=clock)
    committer.start()
    try:
        committer.submit(RuntimeWrite("j", 0, TaskRuntime())).result(timeout=10)
        clock.wait_reads(2)  # its window weighed (idle: none), then the commit's end noted
        second = committer.submit(RuntimeWrite("j", 1, TaskRuntime()))
        clock.wait_reads(3)  # the flusher weighs the window again: none of it has passed
        third = committer.submit(RuntimeWrite("j", 2, TaskRuntime()))
        assert not second.done()
    finally:
        committer.stop()  # ends the window: what it collected is committed together
    assert second.result().revision == third.result().revision == 1
    assert store.batches == [1, 2]
