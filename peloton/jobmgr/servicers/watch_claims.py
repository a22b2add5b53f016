"""What a member published of each job partition since it claimed it (watch.py's publisher).

A Watch of one job follows the member that holds the job's partition
(watch_fanin.py).  When the partition moves to a member that was listed already,
the fan-in opens its stream on the new owner only once the member directory
reports the move, a moment after the new owner claimed the partition and began
publishing its jobs' changes (its recovery's first ones).  So each member keeps,
per partition, the changes it published of that partition's jobs since its
latest claim of it, and a Watch carrying `peloton-watch-from: claim` is given
those of its jobs (filtered) before the live ones: the moving watch reads the new
owner from its claim, not from the stream's opening.

Invariants:

* A partition's history begins at its claim (`claimed`, called before the member
  can publish any of its jobs) and grows while the partition is held; a release
  (`released`) closes it (nothing of that partition is published after), and it
  is kept, for a fan-in that sees the move late, until it ages out.
* Histories are bounded together: `size` changes in all and `seconds` from each
  claim.  A history past either limit is dropped whole and its partition marked
  *gone*: `since_claim` then raises HistoryGone (the Watch is refused OUT_OF_RANGE
  and the caller's watch ends), never answering with a gap.  A newer claim of the
  partition starts afresh.
* A partition this process never claimed has published nothing: its history is
  empty (a stream opened before the claim sees all of it live).
* Each claim knows the epoch it took over from (`after`: the partition's epoch in the
  store before this member's claim, storage/partition_fences.py).  A Watch reading a new
  owner from its claim names the epoch of the owner it read last; a claim that took over
  from another epoch means a member the Watch never read drove the partition in between,
  and `since_claim` raises HistoryGone (a gap is never answered).  For a partition not
  claimed here yet it says which, so the publisher checks the claim when it comes.
* Recording costs a dict lookup while no history is kept (the common case: no
  claim in the last `seconds`); the partition hash is computed only while one is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


class HistoryGone(Exception):
    """A Watch asked for changes from a point (this process's start, a partition's claim)
    and they are no longer all kept (too many, or too long ago), or they do not follow the
    claim the Watch read last."""


def taken_over(partition: int, claimed_after: int | None, read_last: int) -> str:
    """Why a Watch reading this member from its claim of `partition` cannot go on: the
    claim took over from epoch `claimed_after`, the Watch last read the claim `read_last`."""
    return (f"this job manager claimed partition {partition} over from epoch "
            f"{claimed_after if claimed_after is not None else 'none'}, not from {read_last} "
            "(the claim this watch read last): another member drove it in between")


@dataclass(eq=False, slots=True)
class _Claim:
    until: float  # monotonic seconds after which the history no longer covers the claim
    after: int | None = None  # the partition's epoch before this claim (None: unknown)
    entries: list[tuple[Any, ...]] = field(default_factory=list)
    held: bool = True


class ClaimHistories:
    """The changes published of each partition's jobs since its claim; see the module
    docstring.  `partition(job_id)`: the job's partition (the member's `Ownership`);
    `clock`: monotonic seconds."""

    def __init__(self, partition: Callable[[str], int], *, seconds: float, size: int,
                 clock: Callable[[], float]) -> None:
        self._partition = partition
        self._seconds = seconds
        self._size = max(1, size)
        self._clock = clock
        self._claims: dict[int, _Claim] = {}  # in claim order: the oldest first
        self._gone: set[int] = set()
        self._total = 0
        self._next_sweep = 0.0

    @property
    def active(self) -> bool:
        """Some partition's history is kept (the publisher must go on listening)."""
        self._sweep(self._clock())
        return bool(self._claims)

    def claimed(self, partition: int, after: int | None = None) -> None:
        """This member took `partition`, over from epoch `after` (None: unknown, e.g. a
        cluster without partition fences): its history starts now, empty."""
        self._forget(partition)
        self._gone.discard(partition)
        self._claims[partition] = _Claim(self._clock() + self._seconds, after)

    def released(self, partition: int) -> None:
        """This member let `partition` go: its history is closed, kept until it ages out."""
        claim = self._claims.get(partition)
        if claim is not None:
            claim.held = False

    def record(self, job_id: str, entry: tuple[Any, ...]) -> None:
        """A change of `job_id` was published (watch.py's entry)."""
        if not self._claims:
            return
        self._sweep(self._clock())
        partition = self._partition(job_id)
        claim = self._claims.get(partition)
        if claim is None or not claim.held:
            return
        while self._total >= self._size:  # make room: the oldest claims' histories go first
            self._lose(next(iter(self._claims)))
        if partition in self._claims:  # not itself lost to make room
            claim.entries.append(entry)
            self._total += 1

    def since_claim(self, job_ids: Iterable[str], after: int | None = None
                    ) -> tuple[list[tuple[Any, ...]], list[int]]:
        """The changes published of the partitions of `job_ids` since their claims (every
        change of those partitions: the caller filters), partition by partition, and the
        partitions not claimed here (nothing published yet); raises HistoryGone if one's
        history is no longer whole, or, with `after` (the epoch of the claim the caller
        read last), if a claim took over from another epoch (module docstring)."""
        now = self._clock()
        out: list[tuple[Any, ...]] = []
        unclaimed: list[int] = []
        for partition in sorted({self._partition(j) for j in job_ids}):
            claim = self._claims.get(partition)
            if claim is not None and now > claim.until:
                self._lose(partition)
            if partition in self._gone:
                raise HistoryGone(f"the changes published since this job manager claimed "
                                  f"partition {partition} are no longer all kept")
            if claim is None:
                unclaimed.append(partition)
                continue
            if after is not None and claim.after != after:
                raise HistoryGone(taken_over(partition, claim.after, after))
            out.extend(claim.entries)
        return out, unclaimed

    def _sweep(self, now: float) -> None:
        """Drop the histories that no longer cover their claims (at most once a second:
        `record` runs for every change)."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(1.0, self._seconds)
        for partition in [p for p, c in self._claims.items() if now > c.until]:
            self._lose(partition)

    def _lose(self, partition: int) -> None:
        self._forget(partition)
        self._gone.add(partition)

    def _forget(self, partition: int) -> None:
        claim = self._claims.pop(partition, None)
        if claim is not None:
            self._total -= len(claim.entries)
