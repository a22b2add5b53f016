"""A wake-up signal between greenlets that is also safe to fire from another native thread.

The resource manager's loops and blocking port calls (`dequeue_gangs`,
`get_placements`) wait on greenlet events in the hub of the thread that
built the daemon.  In a monkey-patched process every caller is a greenlet
of that hub.  In an unpatched process (most tests) a gRPC handler runs in
a native worker thread, and a gevent event must not be set from there; a
`Wakeup` then hands the set to its hub through the loop's thread-safe
callback, and a waiter on a foreign thread polls instead of parking.

Each `fire()` replaces the event, so every greenlet waiting at that moment
wakes and a waiter that arrives later waits for the next fire.
"""

from __future__ import annotations

import gevent
import gevent.event
from gevent import monkey

_native_ident = monkey.get_original("_thread", "get_ident")
_native_sleep = monkey.get_original("time", "sleep")
_native_monotonic = monkey.get_original("time", "monotonic")

#: How often a waiter on a foreign native thread looks again (seconds).
FOREIGN_POLL = 0.005


class Wakeup:
    """Wakes every current waiter on `fire()`; see the module docstring."""

    def __init__(self) -> None:
        self._hub = gevent.get_hub()
        self._event = gevent.event.Event()
        self._fires = 0

    def _home(self) -> bool:
        return bool(_native_ident() == self._hub.thread_ident)

    def fire(self) -> None:
        """Wake everyone waiting now.  Callable from any thread."""
        self._fires += 1
        event, self._event = self._event, gevent.event.Event()
        if self._home():
            event.set()
        else:
            self._hub.loop.run_callback_threadsafe(event.set)

    def token(self) -> int:
        """A marker to pass to `wait`: a fire after it was taken ends the wait at once."""
        return self._fires

    def wait(self, timeout: float, token: int | None = None) -> bool:
        """Wait up to `timeout` seconds for a fire (since `token`, if given); True if fired."""
        # Read the event before checking the token: `fire` counts before it swaps, so a
        # fire racing with this call either shows in the count or sets this event.
        event = self._event
        if token is not None and self._fires != token:
            return True
        if timeout <= 0:
            return False
        if self._home():
            return bool(event.wait(timeout))
        start = self._fires if token is None else token
        deadline = _native_monotonic() + timeout
        while self._fires == start:
            left = deadline - _native_monotonic()
            if left <= 0:
                return False
            _native_sleep(min(FOREIGN_POLL, left))
        return True
