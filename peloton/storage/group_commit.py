"""Group commit: many callers' task-runtime writes, one transaction.

A commit costs a disk flush (PostgreSQL with fsync: ~1,300 commits/s
here) while a transaction of thousands of rows costs little more than
one, so the job manager's hot path (every task state change is a CAS of
its runtime) goes through a `GroupCommitter`: callers block in `write`,
a flusher collects whatever arrived within `flush_interval` (or until
`max_batch` writes are waiting) and applies them with one
`write_task_runtimes` call.  Each caller gets its own outcome: the stored
runtime, or Conflict / NotFound for its write alone, or the batch's error
(e.g. Unavailable) if the whole transaction failed.

The window is counted from the end of the previous commit: a commit never
starts sooner than `flush_interval` after the last one ended, so under a
steady stream of writes every batch waits a whole window as before, while a
write to an idle committer (nothing committed for a window) is committed at
once.  On an idle cluster the window was a wait of every task's LAUNCHED and
RUNNING writes, both on the path from submit to RUNNING.  The price: a burst
after an idle spell is committed as its first write alone, then the rest a
window later (two commits where one used to wait for them all).

Two writes of the same task never share a batch (the second waits for
the next one), so per-task order is the order of submission.  With a
`batch_key` (all-active job managers: the job's partition), a batch holds
writes of one key only, since each partition's writes are checked against its
own fence and one transaction checks one; the other writes wait, in order,
for the next batches.

Only `threading` primitives are used: under gevent they are monkey-patched
into greenlet-friendly ones, so the same code serves threads and greenlets.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence

from peloton.core.errors import Conflict, NotFound
from peloton.core.model.ids import TaskId
from peloton.core.model.task import TaskRuntime
from peloton.storage.task_store import RuntimeWrite, TaskRuntimeStore, WriteResult


class PendingWrite:
    """The future outcome of one submitted write."""

    __slots__ = ("_done", "_error", "_result", "write")

    def __init__(self, write: RuntimeWrite) -> None:
        self.write = write
        self._done = threading.Event()
        self._result: TaskRuntime | None = None
        self._error: BaseException | None = None

    def _finish(self, result: TaskRuntime | None, error: BaseException | None) -> None:
        self._result, self._error = result, error
        self._done.set()

    def done(self) -> bool:
        """Whether the outcome is known."""
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> TaskRuntime:
        """Wait for the outcome: the stored runtime, or raise the write's error."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"write of task {self.write.task} not committed in {timeout}s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class GroupCommitter:
    """Batches task-runtime CAS writes from concurrent callers into single transactions.

    `start()` runs the flusher thread; `stop()` commits what is queued and
    ends it.  Without `start()`, `flush()` commits one batch on the calling
    thread (deterministic, for tests and for single-threaded tools).
    """

    def __init__(self, store: TaskRuntimeStore, *, flush_interval: float = 0.001,
                 max_batch: int = 1000,
                 batch_key: Callable[[RuntimeWrite], Hashable] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if max_batch < 1 or flush_interval < 0:
            raise ValueError("max_batch must be >= 1 and flush_interval >= 0")
        self._store = store
        self._monotonic = monotonic
        #: When the flusher's last commit ended: its next batch closes `flush_interval` later.
        self._committed_at = -math.inf
        self._batch_key = batch_key
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self._queue: deque[PendingWrite] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        #: Batches committed so far (for metrics and tests).
        self.batches = 0

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        """Start the flusher.  Idempotent."""
        with self._cond:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Commit everything already queued, then stop the flusher.  Idempotent."""
        with self._cond:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout)
        while self._queue:  # submitted after the flusher left, or never started
            self.flush()

    # -- submitting --------------------------------------------------------
    def submit(self, write: RuntimeWrite) -> PendingWrite:
        """Queue a write and return its future without waiting."""
        pending = PendingWrite(write)
        with self._cond:
            self._queue.append(pending)
            if len(self._queue) == 1 or len(self._queue) >= self.max_batch:
                self._cond.notify_all()
        return pending

    def write(self, job_id: str, instance: int, runtime: TaskRuntime) -> TaskRuntime:
        """CAS one runtime through the next batch; same contract as
        `TaskRuntimeStore.update_task_runtime` (Conflict, NotFound, Unavailable)."""
        pending = self.submit(RuntimeWrite(job_id, instance, runtime))
        while self._thread is None and not pending.done():
            self.flush()
        return pending.result()

    def write_many(self, writes: Sequence[RuntimeWrite]) -> WriteResult:
        """Submit many writes, wait for all, and report them like `write_task_runtimes`.
        An error of a whole batch (e.g. Unavailable) is raised."""
        pendings = [self.submit(w) for w in writes]
        if self._thread is None:
            while not all(p.done() for p in pendings):
                self.flush()
        written: dict[TaskId, TaskRuntime] = {}
        conflicts: set[TaskId] = set()
        missing: set[TaskId] = set()
        for p in pendings:
            try:
                written[p.write.task] = p.result()
            except Conflict:
                conflicts.add(p.write.task)
            except NotFound:
                missing.add(p.write.task)
        return WriteResult(written, frozenset(conflicts), frozenset(missing))

    # -- flushing ----------------------------------------------------------
    def flush(self) -> int:
        """Commit one batch of what is queued now, on this thread; returns its size."""
        with self._cond:
            batch = self._take()
        self._commit(batch)
        return len(batch)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                if not self._stopping and len(self._queue) < self.max_batch:
                    # Let concurrent callers join this batch until a window after the last
                    # commit (module docstring); cut short when it fills up.
                    wait = self._committed_at + self.flush_interval - self._monotonic()
                    if wait > 0:
                        self._cond.wait(min(wait, self.flush_interval))
                batch = self._take()
            self._commit(batch)
            self._committed_at = self._monotonic()

    def _take(self) -> list[PendingWrite]:
        """Up to max_batch queued writes, oldest first, at most one per task (and all of
        the oldest write's `batch_key`)."""
        batch: list[PendingWrite] = []
        deferred: list[PendingWrite] = []
        seen: set[tuple[str, int]] = set()
        by = self._batch_key
        first = by(self._queue[0].write) if by is not None and self._queue else None
        while self._queue and len(batch) < self.max_batch:
            pending = self._queue.popleft()
            key = (pending.write.job_id, pending.write.instance)
            if key in seen or (by is not None and by(pending.write) != first):
                deferred.append(pending)
            else:
                seen.add(key)
                batch.append(pending)
        self._queue.extendleft(reversed(deferred))
        return batch

    def _commit(self, batch: list[PendingWrite]) -> None:
        if not batch:
            return
        try:
            result = self._store.write_task_runtimes([p.write for p in batch])
        except Exception as exc:  # the batch's error is each caller's error; keep flushing
            for p in batch:
                p._finish(None, exc)
            return
        self.batches += 1
        for p in batch:
            task = p.write.task
            stored = result.written.get(task)
            if stored is not None:
                p._finish(stored, None)
            elif task in result.missing:
                p._finish(None, NotFound(f"task {task} has no runtime"))
            else:
                p._finish(None, Conflict(
                    f"task {task}: runtime changed since revision {p.write.runtime.revision}"))
