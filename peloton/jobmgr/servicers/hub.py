"""Running API calls on the job manager's greenlet hub, whichever thread gRPC calls from.

The job manager's state (cache, goal-state engines, locks) lives in the
greenlets of one gevent hub.  In a monkey-patched process (`peloton up`,
`peloton jobmgr`) gRPC handlers are greenlets of that same hub and a call
runs directly.  In an unpatched process (tests, embedding) gRPC runs
handlers on native worker threads, where gevent objects must not be
touched; there the call is handed to the hub through its loop's
thread-safe callback and the worker thread waits on a native lock.
Streams hand over one `next()` at a time, so a long stream never holds
the hub while the client reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import gevent
from gevent import monkey

from peloton.core.errors import Unavailable

T = TypeVar("T")

_native_ident = monkey.get_original("_thread", "get_ident")
_native_lock = monkey.get_original("_thread", "allocate_lock")
_native_thread = monkey.get_original("threading", "current_thread")
_END = object()
#: How often a waiting caller checks that the hub's thread still runs (seconds).
_CHECK = 0.25


class Hub:
    """The hub of the thread that built the job manager."""

    def __init__(self) -> None:
        self.hub = gevent.get_hub()
        self.thread = _native_thread()

    def here(self) -> bool:
        """Whether the caller runs on the hub's native thread."""
        return bool(_native_ident() == self.hub.thread_ident)

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a greenlet of the hub and return (or raise) what it did."""
        if self.here():
            return fn()
        done = _native_lock()
        done.acquire()
        box: list[Any] = []

        def run() -> None:
            try:
                box.append((True, fn()))
            except BaseException as exc:  # handed back to the calling thread as it is
                box.append((False, exc))
            finally:
                done.release()

        self.hub.loop.run_callback_threadsafe(gevent.spawn, run)
        while not done.acquire(timeout=_CHECK):
            if not self.thread.is_alive():
                # The job manager's thread ended (it was stopped): nothing will answer.
                raise Unavailable("the job manager has stopped; retry against a running one")
        ok, value = box[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def iterate(self, items: Iterator[T]) -> Iterator[T]:
        """Advance `items` on the hub, one item per hand-over.

        When the consumer stops early (a client went away), `items` is closed on the
        hub too, so its clean-up (`finally`) never runs on a foreign thread.
        """
        try:
            while True:
                item = self.call(lambda: next(items, _END))
                if item is _END:
                    return
                yield cast(T, item)
        finally:
            close = getattr(items, "close", None)
            if close is not None and self.thread.is_alive():
                self.call(close)


class ApiHook:
    """The job manager's `CallHook`: the API lockdown check, then the call on the hub."""

    def __init__(self, hub: Hub, check: Callable[[str], None]) -> None:
        self.hub = hub
        self.check = check

    def unary(self, where: str, call: Callable[[], Any]) -> Any:
        """Refuse a locked-down call, else run it on the hub."""
        self.check(where)
        return self.hub.call(call)

    def stream(self, where: str, call: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """Refuse a locked-down stream, else produce its items on the hub."""
        self.check(where)
        return self.hub.iterate(self.hub.call(call))
