"""Blocking calls off the hub: the one rule for work that blocks inside a C library.

Every daemon (and every component test) runs monkey-patched gevent: all of a
process's work is greenlets of one hub, and a greenlet only gives way when it
waits.  A call that waits *inside* a C library without going through the
patched standard library stops every greenlet for as long as it waits.  Of the
libraries we use, only sqlite3 does that (a transaction waiting for the database
lock or the disk), and hashlib's scrypt holds the hub as long with CPU work (a
password check: tens of milliseconds in C, peloton/common/auth/passwords.py);
psycopg waits in its own loop on the patched `select`, kazoo and gRPC's gevent
mode wait on patched primitives, cassandra-driver uses its gevent reactor.  So:

* a call that may block in C goes through a `BlockingPool`: it runs on one of
  the pool's native threads while the calling greenlet waits and the others run;
* code on a pool thread runs only the library call: it must not touch the hub's
  greenlet objects (the job manager's locks, events, caches);
* in a process that is not monkey-patched (a tool, a test's child process) there
  is no hub to keep free, and calls run in the caller.

The pool is gevent's `ThreadPool`, bound to the hub of the thread that built it;
a call from any other native thread (for example a pool thread calling back in)
runs in that thread, so nesting cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gevent import monkey
from gevent.threadpool import ThreadPool

T = TypeVar("T")


def cooperative() -> bool:
    """Whether this process is monkey-patched (its threads are greenlets of one hub)."""
    return bool(monkey.is_module_patched("threading"))


class BlockingPool:
    """Native threads for calls that block in C; see the module docstring.

    `size` 0 runs every call in the caller (deterministic tests that accept a
    blocked hub).  Calls beyond `size` at once wait for a free thread.
    """

    def __init__(self, size: int, name: str = "blocking") -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.name = name
        self.size = size
        self._pool: Any = None
        if size and cooperative():
            self._pool = ThreadPool(size)

    @property
    def threaded(self) -> bool:
        """Whether calls leave the caller's thread."""
        return self._pool is not None

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on a pool thread (the calling greenlet waits) and return or raise what
        it did; inline when the pool is not threaded."""
        if self._pool is None:
            return fn()
        result: T = self._pool.apply(fn)
        return result

    def close(self) -> None:
        """Stop the threads (calls in flight finish first).  Idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.kill()
