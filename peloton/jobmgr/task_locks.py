"""Serialising the writes of each task within one job manager: striped locks.

Task runtimes are written by compare-and-set.  Across processes that is the
guard; within the job manager, many greenlets (status events, the placement
processor, the task and job engines, API calls) change the same task, and
with group commit each write waits a flush before the next writer sees it.
A writer that lost its compare-and-set reloaded and tried again, but the
run's own progress (each step triggering the next) could stay a step ahead
for every round, and the change (a kill's goal) was given up.  Holding the
task's lock from computing the change until it is stored makes writers of
one task take turns; writers of different tasks still share a commit.

One fixed set of stripes serves every job: a lock per task would cost memory
per task (a million tasks are cached), a set per job memory per job.  A task
maps to stripe (hash(job) + instance) mod N, so one job's consecutive
instances fall on distinct stripes; a batch takes its stripes in ascending
order, so two batches never wait for each other in a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable

import gevent.lock

#: Stripes: enough that writers rarely share one, even while a status batch of a thousand
#: instances holds its stripes through a commit (1.8 MB of locks).
STRIPES = 8192


class TaskWriteLocks:
    """Per-task write locks, striped over a fixed set shared by all jobs."""

    __slots__ = ("_locks",)

    def __init__(self, stripes: int = STRIPES) -> None:
        if stripes < 1:
            raise ValueError("stripes must be >= 1")
        self._locks = [gevent.lock.RLock() for _ in range(stripes)]

    def hold(self, job_id: str, instances: Iterable[int]) -> list[gevent.lock.RLock]:
        """Acquire the stripes of `instances` of `job_id` (ascending); returns them for
        `release`.  Reentrant for the greenlet that holds them."""
        n = len(self._locks)
        base = hash(job_id)
        locks = [self._locks[k] for k in sorted({(base + i) % n for i in instances})]
        for lock in locks:
            lock.acquire()
        return locks

    @staticmethod
    def release(locks: list[gevent.lock.RLock]) -> None:
        """Release what `hold` acquired."""
        for lock in reversed(locks):
            lock.release()
