"""Which dynamic uid a new task gets: the allocation rule, free of I/O.

A dynamic uid (identity.py) must be exclusive on the *machine* while its run
lives, not only within one agent: two agents (two `peloton up` clusters) on one
host that both hand out 70000 put tasks of different jobs under one uid, and
each can then signal, ptrace or read the other's files.  So a uid is taken only
when three things agree:

* this agent has no live run with it (`in_use`, the agent's own table);
* no account has it (`known`, so a task never becomes a real user);
* the machine-wide claim on it succeeds (`UidClaims.claim`): no other process
  on the machine holds it.  uidlocks.py implements that with one flock'ed file
  per uid; `Unshared` is the claim of an agent alone on its machine (unit tests).

The scan starts at a cursor (the uid after the last one given) and wraps, so
two agents do not both probe the same low uids on every launch, and a uid just
given back is not handed to the next task at once.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from typing import Protocol


class UidClaims(Protocol):
    """Machine-wide claims on dynamic uids, held for the life of a run.

    Called by the agent's Executor under its lock (one caller at a time per agent);
    other agents are other processes with their own instance over the same table.
    """

    def claim(self, uid: int, holder: str) -> bool:
        """Make `uid` this agent's for the run `holder` (its sandbox path) unless another
        process on the machine has it.  Never blocks.  True when claimed, or when
        `holder` already had it."""

    def reclaim(self, uid: int, holder: str) -> bool:
        """`claim` for a run adopted after an agent restart (its supervisor may already
        hold the uid on its behalf); may wait a moment for another agent's check to end.
        False: another run on the machine has the uid."""

    def release(self, uid: int, holder: str) -> None:
        """Give `uid` back when `holder`'s run has ended.  Idempotent; a no-op unless
        `holder` is the run that claimed it (a re-reported old run never frees the uid
        a newer run of this agent holds)."""


class Unshared:
    """The claims of an agent alone on its machine: every claim succeeds (the agent's
    own table keeps its runs apart).  For tests and agents that cannot switch users."""

    def claim(self, uid: int, holder: str) -> bool:
        return True

    def reclaim(self, uid: int, holder: str) -> bool:
        return True

    def release(self, uid: int, holder: str) -> None:
        return None


def scan(first: int, last: int, start: int) -> Iterator[int]:
    """Every uid of first..last once, from `start` (wrapping; out of range means `first`)."""
    if not first <= start <= last:
        start = first
    yield from range(start, last + 1)
    yield from range(first, start)


def pick_uid(first: int, last: int, *, start: int, in_use: Container[int],
             known: Callable[[int], bool], claim: Callable[[int], bool]) -> int | None:
    """The first uid from `start` that this agent does not use, no account has, and
    whose machine-wide claim succeeds (then held); None when the range is exhausted.

    `claim` is tried last: it is the only step with a cost (a file lock) and an effect.
    """
    for uid in scan(first, last, start):
        if uid in in_use or known(uid):
            continue
        if claim(uid):
            return uid
    return None
