"""Run one Peloton call per item concurrently (GetJob per job, StopPod per instance, ...).

In the bridge process, where gevent has patched the socket layer, the calls
overlap on a greenlet pool of `workers`; elsewhere (unit tests) the same code
runs them one after another.  Results keep the order of `items`; the first
exception is raised after all calls finished, so nothing is left running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from gevent.pool import Pool

T = TypeVar("T")
R = TypeVar("R")


def fanout(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """`[fn(item) for item in items]`, at most `workers` at a time."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    outcomes: list[tuple[bool, object]] = []

    def guarded(item: T) -> tuple[bool, object]:
        try:
            return True, fn(item)
        except Exception as exc:  # re-raised below, once the pool has drained
            return False, exc

    outcomes = list(Pool(max(1, workers)).imap(guarded, items))
    results: list[R] = []
    for ok, value in outcomes:
        if not ok:
            assert isinstance(value, Exception)
            raise value
        results.append(value)  # type: ignore[arg-type]
    return results
