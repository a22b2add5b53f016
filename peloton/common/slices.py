"""Long pure computations in bounded slices, so one big request cannot hold the hub.

A greenlet gives way only when it waits; walking, converting or encoding a 48 MB
request is seconds of Python that waits for nothing, and every other call of the
daemon waited behind it (issue 23 item 10).  Such a loop calls a `Slicer` once per
item: every `budget_s` of work it yields to the hub for one turn of its loop (due
timers, ready I/O, ready greenlets), so other calls answer between slices.  The big call
takes about as long as before; the small ones no longer wait for it.

Only code that works on values it owns may be sliced (a request, a converted spec):
other greenlets run at each slice boundary.  Outside a monkey-patched process, or
on a native thread other than the hub's, there is nothing to yield to and a slice
boundary does nothing.

(Threads do not help here: the GIL passes between threads every switch interval,
but protobuf's upb parser and serializer hold it throughout: a 48 MB parse on a
pool thread stopped the hub's thread for the whole 40-110 ms of it, measured.)
"""

from __future__ import annotations

import _thread
import sys
import time
from collections.abc import Callable
from typing import Any

#: Seconds of work between two yields.
DEFAULT_BUDGET_S = 0.01
#: A timer wait, not `sleep(0)`: sleep(0) only runs greenlets already ready, so timers
#: and I/O waited behind the slices (measured: 26 ticks of a 2 ms timer in 2 s).
_PAUSE_S = 0.0002


def _monkey() -> Any:
    # gevent is looked up, never imported: the pure users of this module (the converters,
    # and through them the simulation's model) must not depend on it.
    return sys.modules.get("gevent.monkey")


def _native_ident() -> int:
    monkey = _monkey()
    get_ident = monkey.get_original("_thread", "get_ident") if monkey else _thread.get_ident
    return int(get_ident())


_MAIN_THREAD = _native_ident()


def _yield_to_hub() -> None:
    monkey = _monkey()
    if monkey is not None and monkey.is_module_patched("time") and \
            _native_ident() == _MAIN_THREAD:
        sys.modules["gevent"].sleep(_PAUSE_S)


class Slicer:
    """Call once per item of a long loop; yields every `budget_s` of work (see module).

    The clock is read every `every` calls (a reading costs more than a small item; pass
    1 when each item is itself long, such as converting one instance config)."""

    __slots__ = ("_budget", "_calls", "_clock", "_every", "_last", "_pause", "slices")

    def __init__(self, budget_s: float = DEFAULT_BUDGET_S,
                 clock: Callable[[], float] = time.perf_counter,
                 pause: Callable[[], None] = _yield_to_hub, every: int = 64) -> None:
        self._budget = budget_s
        self._every = every
        self._clock = clock
        self._pause = pause
        self._calls = 0
        self._last = clock()
        #: Yields so far.
        self.slices = 0

    def __call__(self) -> None:
        self._calls += 1
        if self._calls % self._every:
            return
        now = self._clock()
        if now - self._last >= self._budget:
            self._pause()
            self.slices += 1
            self._last = self._clock()


def no_slices() -> None:
    """A stand-in Slicer for callers that must not yield."""
