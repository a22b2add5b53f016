"""Time as a dependency: monotonic seconds for durations, wall seconds for timestamps.

Every component that reads time takes a `Clock` in its constructor instead of calling
`time.time()` or `time.monotonic()` itself, so one test (or one simulation) can move time
for all of them at once.  The two readings are for different things and are never mixed:

- `monotonic()` measures durations and deadlines inside one process (timeouts, backoff,
  debounce, goal-state deadlines).  It never jumps when the system clock is set.
- `wall()` is seconds since the epoch, for what is stored or shown (creation, update and
  completion times of jobs, tasks and workflows; event times).  A duration between a stored
  timestamp and now (a task's time in LAUNCHED) is wall minus wall.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Where a component reads the time."""

    def monotonic(self) -> float:
        """Seconds on a clock that only moves forward (for durations and deadlines)."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch (for timestamps that are stored or shown)."""
        ...


class SystemClock:
    """The process's real clocks."""

    __slots__ = ()

    def monotonic(self) -> float:
        """`time.monotonic()`."""
        return time.monotonic()

    def wall(self) -> float:
        """`time.time()`."""
        return time.time()


#: The real clock, shared (it has no state).
SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """A clock that moves only when told to; both readings move together.

    `sleep` advances time instead of waiting and records the delay, so code that takes a
    sleep function (retries) can be tested without waiting.
    """

    def __init__(self, wall: float = 1_800_000_000.0, monotonic: float = 1_000.0) -> None:
        self._wall = wall
        self._monotonic = monotonic
        #: Every delay passed to `sleep`, in order.
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        """The fake monotonic time."""
        return self._monotonic

    def wall(self) -> float:
        """The fake wall time."""
        return self._wall

    def advance(self, seconds: float) -> None:
        """Move both readings forward by `seconds` (never backward)."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds}s)")
        self._monotonic += seconds
        self._wall += seconds

    def sleep(self, seconds: float) -> None:
        """Record `seconds` and advance by it, without waiting."""
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
