"""The queues between admission, placement and launch: ready gangs, retries, placed runs.

* `ReadyQueue` holds admitted gangs (READY tasks) in FIFO order for the
  placement engine, plus gangs whose placement failed, each waiting until
  its retry time.  A gang stays one entry while it is retried, so the
  placer keeps seeing it whole (all or nothing).
* `PlacedQueue` holds placements (PLACED runs per host) until the job
  manager takes them, per job partition once members of an all-active
  cluster ask by partition.

Removal is lazy, as in Peloton: a task killed, preempted or placed while
its entry waits is not searched for; the entry is checked when it comes
out.  `owner` maps each task to the entry that currently stands for it,
so an entry left behind by a task that went PENDING and was admitted
again (which made a new entry) is recognised as stale.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque

from peloton.core.model.ids import TaskId
from peloton.core.model.sched import PlacedTask, Placement
from peloton.core.partitions import PartitionSet, partition_of
from peloton.core.respool.records import TaskRecord


class ReadyEntry:
    """One gang of READY tasks waiting for placement (or being placed)."""

    __slots__ = ("records",)

    def __init__(self, records: list[TaskRecord]) -> None:
        self.records = records

    def __repr__(self) -> str:
        return f"ReadyEntry({[str(r.task_id) for r in self.records]})"


class ReadyQueue:
    """FIFO of ready entries plus a retry heap; see the module docstring.

    Invariant: every task in `owner` is tracked and admitted; the entry it
    maps to is queued, waiting for its retry time, or out for placement.
    """

    def __init__(self) -> None:
        self._fifo: deque[ReadyEntry] = deque()
        self._later: list[tuple[float, int, ReadyEntry]] = []
        self._seq = itertools.count()
        self.owner: dict[TaskId, ReadyEntry] = {}
        #: Tasks whose next entry waits for a retry time (`defer`).
        self._deferred: dict[TaskId, float] = {}

    def __len__(self) -> int:
        """Entries queued or waiting to retry (stale ones included until they surface)."""
        return len(self._fifo) + len(self._later)

    def push(self, entry: ReadyEntry) -> None:
        """Queue an entry at the tail; it now stands for its tasks (one `defer`red waits
        for its retry time instead)."""
        if self._deferred:
            dues = [self._deferred.pop(r.task_id) for r in entry.records
                    if r.task_id in self._deferred]
            if dues:
                self.push_later(entry, max(dues))
                return
        self._own(entry)
        self._fifo.append(entry)

    def push_front(self, entry: ReadyEntry) -> None:
        """Put an entry back at the head (it keeps its turn)."""
        self._own(entry)
        self._fifo.appendleft(entry)

    def push_later(self, entry: ReadyEntry, due: float) -> None:
        """Queue an entry once `due` has passed (a placement retry)."""
        self._own(entry)
        heapq.heappush(self._later, (due, next(self._seq), entry))

    def defer(self, task_id: TaskId, due: float) -> None:
        """The task's next entry waits until `due` as a placement retry: a simulation
        resuming a live retry timer (the task is admitted again where the timer is lost)."""
        self._deferred[task_id] = due

    def retries(self) -> dict[TaskId, float]:
        """When each task waiting for a placement retry is due (stale entries left out)."""
        return {rec.task_id: due for due, _, entry in self._later for rec in entry.records
                if self.owner.get(rec.task_id) is entry}

    def _own(self, entry: ReadyEntry) -> None:
        owner = self.owner
        for rec in entry.records:
            owner[rec.task_id] = entry

    def promote(self, now: float) -> int:
        """Move retries that are due to the tail of the FIFO; returns how many."""
        later = self._later
        moved = 0
        while later and later[0][0] <= now:
            self._fifo.append(heapq.heappop(later)[2])
            moved += 1
        return moved

    def next_due(self) -> float | None:
        """When the earliest retry becomes due, or None."""
        return self._later[0][0] if self._later else None

    def pop(self) -> ReadyEntry | None:
        """The head entry, or None when the FIFO is empty."""
        return self._fifo.popleft() if self._fifo else None

    def has_ready(self) -> bool:
        """Some entry is in the FIFO (it may turn out stale)."""
        return bool(self._fifo)

    def forget(self, task_id: TaskId) -> None:
        """The task left READY/PLACING for good (placed, killed, back to PENDING)."""
        self.owner.pop(task_id, None)


class PlacedQueue:
    """Placements reported by the placement engine, oldest first, until launched.

    With all-active job managers each member takes the placements of its own partitions'
    jobs only (`pop(partitions)`).  The queue learns the cluster's partition count from the
    first member that asks and from then on keeps one FIFO per partition, each placement
    split into one piece per partition of its tasks' jobs (same host, same agent), so a
    member's take never scans or reorders another member's placements.  Until someone
    asks by partition (a lone job manager) it is one FIFO, as before partitions.  An
    unfiltered `pop` after the split takes the partitions' heads in turn.
    """

    def __init__(self) -> None:
        #: 0: one FIFO (nobody asked by partition); else the partition count of the split.
        self._count = 0
        self._fifos: dict[int, deque[Placement]] = {}
        self._size = 0
        #: Where the next pop's round over partitions starts (so none is always served last).
        self._turn = 0

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def push(self, placement: Placement) -> None:
        """Keep a placement for the job manager."""
        for key, piece in self._pieces(placement):
            self._fifos.setdefault(key, deque()).append(piece)
            self._size += 1

    def push_front(self, placement: Placement) -> None:
        """Return the unused rest of a placement to the head."""
        for key, piece in self._pieces(placement):
            self._fifos.setdefault(key, deque()).appendleft(piece)
            self._size += 1

    def pop(self, partitions: PartitionSet | None = None) -> Placement | None:
        """The oldest placement of a job in `partitions` (None: of any job), or None."""
        if partitions is not None and partitions.count != self._count:
            self._split(partitions.count)
        keys = sorted(self._fifos) if partitions is None or self._count == 0 \
            else sorted(partitions.held)
        if not keys:
            return None
        start = self._turn % len(keys)
        self._turn += 1
        for key in keys[start:] + keys[:start]:
            fifo = self._fifos.get(key)
            if fifo:
                self._size -= 1
                return fifo.popleft()
        return None

    def _pieces(self, placement: Placement) -> list[tuple[int, Placement]]:
        if self._count == 0:
            return [(0, placement)]
        by_key: dict[int, list[PlacedTask]] = {}
        for task in placement.tasks:
            by_key.setdefault(partition_of(task.task_id.job_id, self._count), []).append(task)
        if len(by_key) == 1:
            return [(next(iter(by_key)), placement)]
        return [(key, Placement(placement.hostname, placement.agent_id, tuple(tasks)))
                for key, tasks in by_key.items()]

    def _split(self, count: int) -> None:
        """Re-key every waiting placement by the partitions of `count` (once per cluster:
        the count is fixed for the life of its store), keeping each FIFO's order."""
        waiting = [p for key in sorted(self._fifos) for p in self._fifos[key]]
        self._count, self._fifos, self._size = count, {}, 0
        for placement in waiting:
            self.push(placement)
