"""Clocks that drive the simulated backend: a manual one for tests, a real one for runs.

Both keep a heap of (due time, sequence, callback); the sequence keeps
callbacks due at the same time in the order they were scheduled, which is
what makes STARTING, RUNNING and the end of one run arrive in order.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Protocol

Callback = Callable[[], None]


class SimClock(Protocol):
    """Time and timers for the simulation."""

    def now(self) -> float:
        """Current simulated time in seconds."""

    def call_at(self, when: float, fn: Callback) -> None:
        """Run `fn` at time `when` (at once, in order, if it is already past)."""


class _Heap:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callback]] = []
        self._seq = itertools.count()

    def push(self, when: float, fn: Callback) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), fn))

    def pop_due(self, now: float) -> Callback | None:
        if self._heap and self._heap[0][0] <= now:
            return heapq.heappop(self._heap)[2]
        return None

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None


class ManualClock:
    """Time moves only when a test calls `advance`; callbacks run in the caller's thread."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap = _Heap()
        self._lock = threading.RLock()

    def now(self) -> float:
        """Current simulated time."""
        return self._now

    def call_at(self, when: float, fn: Callback) -> None:
        """Schedule `fn`; it runs during a later `advance` (or `run_due`)."""
        with self._lock:
            self._heap.push(when, fn)

    def run_due(self) -> int:
        """Run every callback due by now, including ones they schedule for now; returns how many."""
        ran = 0
        while True:
            with self._lock:
                fn = self._heap.pop_due(self._now)
            if fn is None:
                return ran
            fn()
            ran += 1

    def advance(self, seconds: float) -> int:
        """Move time forward, running callbacks at their due times in order; returns how many ran."""
        return self.advance_to(self._now + seconds)

    def advance_to(self, when: float) -> int:
        """Move time to `when` (never back), running callbacks at their due times in order;
        returns how many ran.  Exact: a callback due at `when` runs, whatever the float sums
        that led there (the simulation driver steps from one due time to the next)."""
        end = max(self._now, when)
        ran = self.run_due()
        while True:
            with self._lock:
                due = self._heap.next_due()
                if due is None or due > end:
                    break
                self._now = max(self._now, due)
            ran += self.run_due()
        self._now = end
        return ran + self.run_due()

    def next_due(self) -> float | None:
        """When the earliest scheduled callback is due (None when none is)."""
        with self._lock:
            return self._heap.next_due()


class RealClock:
    """Wall-clock time (monotonic); one thread (a greenlet under gevent) runs the callbacks."""

    def __init__(self) -> None:
        self._heap = _Heap()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def now(self) -> float:
        """Monotonic seconds."""
        return time.monotonic()

    def call_at(self, when: float, fn: Callback) -> None:
        """Schedule `fn` at monotonic time `when`."""
        with self._cond:
            head = self._heap.next_due()
            self._heap.push(when, fn)
            if head is None or when < head:
                self._cond.notify()  # the loop sleeps until the old head: wake it earlier
        if self._thread is None:
            self.start()

    def start(self) -> None:
        """Start the timer thread (done on first use)."""
        with self._cond:
            if self._thread is not None:
                return
            self._stopped = False
            self._thread = threading.Thread(target=self._loop, name="sim-clock", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop running callbacks; pending ones are dropped."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    due = self._heap.next_due()
                    wait = None if due is None else due - time.monotonic()
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopped:
                    return
                batch = []
                now = time.monotonic()
                while (fn := self._heap.pop_due(now)) is not None:
                    batch.append(fn)
            for fn in batch:
                fn()
