"""Fencing per job partition: a member's writes to a partition's jobs pass only while it owns it.

With all-active job managers (docs/design/all-active-jobmgr.md) each job partition has one
owner at a time, and a partition's epoch is kept in the store exactly as a leader role's is
(peloton/storage/leader_store.py), under the fence name `jobmgr/partition/<n>`
(`peloton.core.partitions.fence_name`): the owner claims its epoch (ZooKeeper's zxid of its
claim node) with `claim_leadership`, and writes the partition's jobs only through
`with_fencing(name, epoch)`, so the store refuses, in the write's own transaction, a
write of a member whose claim a newer owner has superseded, even if that member still
believes it owns the partition (paused, cut off from ZooKeeper, slow to notice).

`PartitionFences` is one member's set of held partitions.  Each claim starts a
`PartitionTerm` with its own fenced store view; a term's view refuses writes in process as
soon as the term ends (`release`, a newer claim of the same partition here, or the member's
`live()` turning false, e.g. its ZooKeeper connection suspended), and in the store once
another member claimed a newer epoch.  Objects of an ended term keep a view that never
writes again, even if the member later takes the partition back: the new term has a new
view (as a new leadership term builds new objects).

Every call is made on the member's hub (one greenlet at a time); nothing here blocks
except the store calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from peloton.core.errors import Unavailable
from peloton.core.partitions import DEFAULT_PARTITIONS, fence_name, partition_of
from peloton.storage.leader_store import FencedOut
from peloton.storage.store import Store

log = logging.getLogger(__name__)


class PartitionNotHeld(Unavailable):
    """This member does not hold the partition of the job it was asked to write."""

    kind = "partition_not_held"


class PartitionTerm:
    """One member's hold on one partition, from its claim in the store until it ends.

    `store` writes only while the term is current (and, in the store, while no newer
    claim of the partition exists); reads always pass.
    """

    def __init__(self, store: Store, partition: int, count: int, epoch: int,
                 live: Callable[[], bool]) -> None:
        self.partition = partition
        self.count = count
        self.epoch = epoch
        self._live = live
        self._ended = False
        self.store: Store = store.with_fencing(fence_name(partition), self._current_epoch)

    @property
    def current(self) -> bool:
        """The term has not ended and the member is live (its claim may still be refused
        by the store if a newer owner claimed; only a write can find that out)."""
        return not self._ended and self._live()

    def _current_epoch(self) -> int | None:
        return self.epoch if self.current else None

    def owns(self, job_id: str) -> bool:
        """`job_id` is in this term's partition (a writer checks it before writing a job
        through `store`, so no job is written under another partition's fence)."""
        return partition_of(job_id, self.count) == self.partition

    def end(self) -> None:
        """End the term: `store` refuses every write from now on.  Idempotent."""
        self._ended = True


class PartitionFences:
    """The partitions one member (`holder`) holds, each with its term and fenced store."""

    def __init__(self, store: Store, holder: str, *, count: int = DEFAULT_PARTITIONS,
                 live: Callable[[], bool] = lambda: True) -> None:
        self._store = store
        self.holder = holder
        self.count = count
        self._live = live
        self._terms: dict[int, PartitionTerm] = {}

    @property
    def held(self) -> frozenset[int]:
        """The partitions with a term that has not ended."""
        return frozenset(p for p, t in self._terms.items() if t.current)

    def claim(self, partition: int, epoch: int | None) -> PartitionTerm:
        """Claim `partition` in the store from `epoch` on (None: solo, the stored epoch + 1)
        and start a term with it; a term of the partition held here before ends first.
        FencedOut if the store already has a newer epoch for the partition (this member's
        view of ZooKeeper is stale): nothing is held then."""
        if not 0 <= partition < self.count:
            raise ValueError(f"partition {partition} is not in 0..{self.count - 1}")
        self.release(partition)
        stored = self._store.claim_leadership(fence_name(partition), epoch, self.holder)
        term = PartitionTerm(self._store, partition, self.count, stored, self._live)
        self._terms[partition] = term
        log.info("%s: holds partition %d (epoch %d)", self.holder, partition, stored)
        return term

    def release(self, partition: int) -> None:
        """End this member's term of `partition`, if any (its writes stop at once)."""
        term = self._terms.pop(partition, None)
        if term is not None:
            term.end()
            log.info("%s: released partition %d (epoch %d)", self.holder, partition, term.epoch)

    def release_all(self) -> None:
        """End every term (leaving the cluster, or ZooKeeper lost)."""
        for partition in list(self._terms):
            self.release(partition)

    def term(self, partition: int) -> PartitionTerm | None:
        """The current term of `partition` here, or None."""
        term = self._terms.get(partition)
        return term if term is not None and term.current else None

    def for_job(self, job_id: str) -> Store:
        """The fenced store to write `job_id` through; PartitionNotHeld if this member does
        not hold its partition (the write belongs to the owner: forward it there)."""
        partition = partition_of(job_id, self.count)
        term = self.term(partition)
        if term is None:
            raise PartitionNotHeld(f"{self.holder} does not hold partition {partition} of job "
                                   f"{job_id}")
        return term.store


__all__ = ["FencedOut", "PartitionFences", "PartitionNotHeld", "PartitionTerm"]
