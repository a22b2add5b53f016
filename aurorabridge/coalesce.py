"""Concurrent identical reads share one computation, without ever answering from the past.

Sixteen dashboards polling the same 5,000-task job each cost the bridge a
QueryPods call, 5,000 conversions and a 1.6 MB encode; done once for all of
them, the reply is as fresh.  `Coalescer.run(key, fn)` runs `fn` on behalf
of every caller of the same `key` whose call overlaps, with one guarantee:
a caller gets the result of a run that *started after it called*.  So a
client that killed a task and then lists tasks sees the kill (read your
writes); joining a run already under way could answer with state read
before the kill.

Per key, at most one run is in progress and at most one is waiting: callers
that arrive during a run join the waiting one, which starts when the current
run ends.  An exception from `fn` is raised to every caller of that run
(if the running greenlet is killed, they get Unavailable: Aurora clients retry).
Callers wait on `threading` primitives: gevent patches them in the bridge
process, and they are real with real threads.  A greenlet of an unpatched
process (tests serving the bridge from a thread) would stop its own hub by
waiting, so such callers run `fn` themselves, unshared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, cast

from gevent import getcurrent, monkey

from peloton.core.errors import Unavailable

R = TypeVar("R")



class _Run(Generic[R]):
    """One execution of `fn`, shared by its callers."""

    def __init__(self, after: _Run[R] | None) -> None:
        self.after = after  # the run this one must wait for before it starts
        self.done = threading.Event()
        self.value: R | None = None
        self.error: BaseException | None = None

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return cast(R, self.value)  # set whenever error is None


class Coalescer(Generic[R]):
    """Runs one `fn` per key for overlapping callers (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Hashable, _Run[R]] = {}
        self._waiting: dict[Hashable, _Run[R]] = {}

    def run(self, key: Hashable, fn: Callable[[], R]) -> R:
        """`fn()`, or the result of a run of it for `key` that started after this call."""
        if not _may_wait():
            return fn()
        with self._lock:
            joined = self._waiting.get(key)
            if joined is None:
                current = self._running.get(key)
                mine: _Run[R] = _Run(current)
                if current is None:
                    self._running[key] = mine
                else:
                    self._waiting[key] = mine
        if joined is not None:
            joined.done.wait()
            return joined.outcome()
        if mine.after is not None:
            try:
                mine.after.done.wait()
            except BaseException:  # killed before starting: this run's callers must not wait forever
                self._finish(key, mine, self._waiting, _interrupted())
                raise
            with self._lock:
                del self._waiting[key]
                self._running[key] = mine
        try:
            value = fn()
        except Exception as exc:  # handed to every caller of this run
            self._finish(key, mine, self._running, exc)
            raise
        except BaseException:  # killed while running: likewise
            self._finish(key, mine, self._running, _interrupted())
            raise
        mine.value = value
        self._finish(key, mine, self._running, None)
        return value

    def _finish(self, key: Hashable, run: _Run[R], table: dict[Hashable, _Run[R]],
                error: BaseException | None) -> None:
        """Take `run` out of `table` and release its callers (with `error` if it failed)."""
        with self._lock:
            del table[key]
        run.error = error
        run.done.set()


def _interrupted() -> Unavailable:
    """What a run's callers get when the greenlet running it (or about to) is killed."""
    return Unavailable("a shared read was interrupted; retry")


def _may_wait() -> bool:
    """Whether this caller can block on a threading.Event while another caller computes."""
    return bool(monkey.is_module_patched("threading")) or getcurrent().parent is None
