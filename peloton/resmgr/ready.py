"""The queues between admission, placement and launch: ready gangs, retries, placed runs.

* `ReadyQueue` holds admitted gangs (READY tasks) in FIFO order for the
  placement engine, plus gangs whose placement failed, each waiting until
  its retry time.  A gang stays one entry while it is retried, so the
  placer keeps seeing it whole (all or nothing).
* `PlacedQueue` holds placements (PLACED runs per host) until the job
  manager takes them.

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
from peloton.core.model.sched import Placement
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
    """Placements reported by the placement engine, oldest first, until launched."""

    def __init__(self) -> None:
        self._items: deque[Placement] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def push(self, placement: Placement) -> None:
        """Keep a placement for the job manager."""
        self._items.append(placement)

    def push_front(self, placement: Placement) -> None:
        """Return the unused rest of a placement to the head."""
        self._items.appendleft(placement)

    def pop(self) -> Placement:
        """The oldest placement (IndexError when empty)."""
        return self._items.popleft()
