"""Fencing: a leader whose term is over must not write any more.

A leader learns it lost its ZooKeeper session only when kazoo tells it
(SUSPENDED after 2/3 of the session timeout), and stopping its components
takes a moment more; a write issued in that window could land after a new
leader started from storage.  `Fence` closes that window in-process: every
write through a `fenced(...)` object first checks that the term it was
built for is still the current one (the candidate still leads *with the
same epoch*, and its connection is up), and raises `Unavailable` otherwise.

This is the cheap half of fencing.  The other half is in the store
(peloton/storage/leader_store.py): every term claims its epoch there, writes
go through `Store.with_fencing`, and the store itself refuses, in the write's
own transaction, a write stamped with an epoch older than the newest claim,
so a process paused (SIGSTOP) between this check and its write is refused
when it resumes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from peloton.core.errors import Unavailable

T = TypeVar("T")

#: Methods that only read (every other method of a fenced object is treated as a write).
READ_PREFIXES = ("get_", "query_", "scan_", "count_", "schema_", "describe", "close")


class Fence:
    """Whether one term is still current; `check()` raises once it is not."""

    def __init__(self, current: Callable[[], bool], what: str) -> None:
        self._current = current
        self.what = what

    @property
    def valid(self) -> bool:
        """The term is still current."""
        return self._current()

    def check(self) -> None:
        """Raise Unavailable if the term is over."""
        if not self._current():
            raise Unavailable(f"{self.what} is over (leadership lost); refusing to write")


class _Fenced:
    """Attribute proxy: reads pass through, writes check the fence first (cached per name)."""

    def __init__(self, target: Any, fence: Fence) -> None:
        self._target = target
        self._fence = fence

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value) or name.startswith(READ_PREFIXES) or name.startswith("_"):
            return value
        fence = self._fence

        @functools.wraps(value)
        def write(*args: Any, **kwargs: Any) -> Any:
            fence.check()
            return value(*args, **kwargs)

        self.__dict__[name] = write  # later lookups skip __getattr__
        return write


def fenced(target: T, fence: Fence) -> T:
    """`target` with every non-read method guarded by `fence` (typed as `target`)."""
    return cast(T, _Fenced(target, fence))
