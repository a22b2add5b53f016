"""A deadline queue: keys come out in deadline order once their deadline has passed.

This is the pure half of the goal-state engine (Peloton's
`pkg/common/deadline_queue`): no clock, no greenlets, no locks.  The caller
says what time it is, so tests drive it with plain numbers.

Invariants:
- a key is in the queue at most once;
- enqueueing a key that is already queued keeps the *earlier* deadline (a
  later one is ignored), so "evaluate no later than t" requests combine;
- among equal deadlines, keys come out in the order they were (last)
  scheduled.

Deadlines are floats on whatever clock the caller uses (the engine uses
the injected Clock's monotonic reading).  Internally a binary heap with lazy
deletion: superseded heap entries are skipped on pop and compacted away when
they outnumber the live ones.  A key's live heap entry is the very tuple its `_entries`
slot holds (one tuple per queued key, not two: a job manager queues a launch-timeout look
at every task it launches, a million at once at scale), so an entry is live exactly when
it is that object.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# Rebuild the heap when it holds more than this many stale entries per live one (plus a floor).
_COMPACT_RATIO = 2
_COMPACT_FLOOR = 64


class DeadlineQueue(Generic[K]):
    """Keys ordered by deadline; a key is present at most once, with its earliest deadline."""

    __slots__ = ("_entries", "_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._entries: dict[K, tuple[float, int, K]] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """Queued keys in deadline order (a snapshot; for debugging and tests)."""
        live = sorted(self._entries.values())
        return iter([k for _, _, k in live])

    def enqueue(self, key: K, deadline: float) -> bool:
        """Schedule `key` at `deadline` unless it is already due no later; True if the queue changed."""
        current = self._entries.get(key)
        if current is not None and current[0] <= deadline:
            return False
        entry = self._entries[key] = (deadline, next(self._seq), key)
        heapq.heappush(self._heap, entry)
        self._maybe_compact()
        return True

    def remove(self, key: K) -> bool:
        """Unschedule `key`; True if it was queued."""
        return self._entries.pop(key, None) is not None

    def deadline(self, key: K) -> float | None:
        """When `key` is due, or None if it is not queued."""
        entry = self._entries.get(key)
        return entry[0] if entry is not None else None

    def next_deadline(self) -> float | None:
        """The earliest deadline in the queue, or None when it is empty."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> K | None:
        """Remove and return the key with the earliest deadline if that deadline is <= `now`."""
        self._drop_stale_top()
        if not self._heap or self._heap[0][0] > now:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._entries[key]
        return key

    def pop_all_due(self, now: float) -> list[K]:
        """Remove and return every key due at `now`, earliest first."""
        due: list[K] = []
        while (key := self.pop_due(now)) is not None:
            due.append(key)
        return due

    def clear(self) -> None:
        """Forget every key."""
        self._heap.clear()
        self._entries.clear()

    def _drop_stale_top(self) -> None:
        heap = self._heap
        while heap:
            top = heap[0]
            if self._entries.get(top[2]) is top:
                return
            heapq.heappop(heap)

    def _maybe_compact(self) -> None:
        if len(self._heap) > _COMPACT_RATIO * len(self._entries) + _COMPACT_FLOOR:
            self._heap = list(self._entries.values())
            heapq.heapify(self._heap)
