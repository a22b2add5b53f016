"""A store whose chosen compare-and-sets fail: the harness's way to reject a write.

Nomad's scheduler harness can reject a plan; this does the same for task
writes.  `ConflictingStore` wraps the harness's store (everything else passes
through): `fail(job, instance, times)` makes the next `times` compare-and-sets
of that task's runtime lose, as if another writer had just changed the row.
Nothing of a failed write is stored (nor its pod events), exactly as a real
conflict.  `rejected` counts the writes it turned away, so a test can check
that the conflicts it armed were met.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from peloton.core.errors import Conflict
from peloton.core.model.ids import TaskId
from peloton.core.model.task import TaskRuntime
from peloton.storage import RuntimeWrite, Store, WriteResult


class ConflictingStore:
    """`store`, except that armed task compare-and-sets fail (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        #: Task -> compare-and-sets still to fail.
        self._armed: Counter[TaskId] = Counter()
        #: Task -> compare-and-sets failed so far.
        self.rejected: Counter[TaskId] = Counter()

    def fail(self, job_id: str, instance: int, times: int) -> None:
        """Make the next `times` compare-and-sets of the task's runtime lose."""
        self._armed[TaskId(job_id, instance)] += times

    def armed(self, job_id: str, instance: int) -> int:
        """Compare-and-sets of the task still to fail."""
        return self._armed[TaskId(job_id, instance)]

    def _lose(self, task: TaskId) -> bool:
        if self._armed[task] <= 0:
            return False
        self._armed[task] -= 1
        self.rejected[task] += 1
        return True

    # -- the compare-and-sets ------------------------------------------------------------
    def write_task_runtimes(self, writes: Sequence[RuntimeWrite]) -> WriteResult:
        lost = frozenset(w.task for w in writes if self._lose(w.task))
        rest = [w for w in writes if w.task not in lost]
        result = self._store.write_task_runtimes(rest) if rest else WriteResult({})
        return WriteResult(result.written, result.conflicts | lost, result.missing)

    def update_task_runtime(self, job_id: str, instance: int, runtime: TaskRuntime) -> TaskRuntime:
        task = TaskId(job_id, instance)
        if self._lose(task):
            raise Conflict(f"task {task}: runtime changed since revision {runtime.revision}")
        return self._store.update_task_runtime(job_id, instance, runtime)

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)
