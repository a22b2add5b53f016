"""Which entries of the remote-volume cache to evict (remote_volumes.py applies the plan).

The rule, kept apart from the files it is about so a table test can walk it:

* an entry some live run links to (or is about to: fetched for a run not started yet) is
  never evicted: removing it would pull a file from under a running task;
* of the others, the least recently used go first (last use: the latest time a run took
  or let go of the entry; ties broken by name, so a plan is deterministic);
* only as many as it takes to bring the cache, with what is being added, within its
  budget.  When even evicting every unused entry is not enough, all of them go and the
  plan says how far over the budget the cache stays (until runs release their entries).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """One cache entry as the rule sees it."""

    name: str
    size: int  # bytes: a file's length, or the sum of an unpacked tree's files
    last_used: float  # wall-clock seconds
    users: int  # live runs holding it


@dataclass(frozen=True, slots=True)
class EvictionPlan:
    """Entries to remove (least recently used first), and the bytes the cache stays over
    its budget after that (0: it fits)."""

    evict: tuple[str, ...]
    over_by: int


def evictable(entry: CacheEntry) -> bool:
    """Whether an entry may be removed: no live run holds it."""
    return entry.users == 0


def plan_evictions(entries: Iterable[CacheEntry], budget: int, incoming: int = 0) -> EvictionPlan:
    """What to evict so that the entries plus `incoming` new bytes fit in `budget` bytes."""
    entries = list(entries)
    total = sum(e.size for e in entries) + incoming
    evict: list[str] = []
    for entry in sorted(filter(evictable, entries), key=lambda e: (e.last_used, e.name)):
        if total <= budget:
            break
        evict.append(entry.name)
        total -= entry.size
    return EvictionPlan(tuple(evict), max(0, total - budget))
