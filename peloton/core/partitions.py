"""Jobs partitioned among all-active job managers: which partition a job is in, who owns it.

Pure arithmetic for docs/design/all-active-jobmgr.md:

* `partition_of(job_id, count)`: a job's partition, a stable keyed hash (blake2b) of its id,
  the same in every process and every run (Python's `hash()` is salted per process);
* `assign(members, count)`: rendezvous (highest-random-weight) hashing: each partition goes
  to the member with the highest `score(member, partition)`.  Every member computing it
  from the same membership gets the same answer, every partition has exactly one owner
  while any member is live, and a membership change moves only the partitions it must
  (a joiner takes only partitions it now wins; a leaver's partitions go to their
  next-best members; nothing moves between two members that stayed);
* `moves(before, after)`: the partitions whose owner differs between two assignments,
  what a handover has to do;
* `fence_name(partition)`: the name a partition's epoch is kept under in the store (the
  same leader-epoch mechanism as a role's, peloton/storage/leader_store.py);
* `PartitionSet`: the partitions a member asks the shared daemons about (the resource
  manager hands it placements and preemption victims of those partitions' jobs only);
* `CHORE_PARTITION`: the partition whose owner runs the job managers' cluster-wide chores
  (work of no one job, e.g. expiring old pod events), so exactly one member runs each.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from peloton.core.errors import InvalidArgument

#: Partitions of a cluster unless configured (fixed for the life of its store).
DEFAULT_PARTITIONS = 64
#: Prefix of the store's fence names of partitions (`jobmgr/partition/<n>`).
FENCE_PREFIX = "jobmgr/partition/"
#: The partition whose owner runs the cluster-wide chores, under that partition's fence
#: (partition 0 exists whatever the count, and it moves like any other, so a chore has
#: exactly one runner whenever any member is live).
CHORE_PARTITION = 0


def _hash64(data: str) -> int:
    return int.from_bytes(hashlib.blake2b(data.encode(), digest_size=8).digest(), "big")


def _check_count(count: int) -> None:
    if count < 1:
        raise InvalidArgument(f"partition count must be at least 1, got {count}", field="partitions")


#: Job ids whose partition is remembered: every stored write of a task asks its job's
#: partition (the group committer's batch key, the partition fence), and a blake2b of the
#: id costs ~0.7 us against ~0.1 for a hit (a task write asks it several times); a cluster
#: has far fewer live jobs than this.
PARTITION_CACHE = 4096


@functools.lru_cache(maxsize=PARTITION_CACHE)
def partition_of(job_id: str, count: int = DEFAULT_PARTITIONS) -> int:
    """The partition (0 .. count-1) of a job.  Ids are compared case-insensitively (UUID text
    may come in either case), so both spellings of one id land in the same partition."""
    _check_count(count)
    return _hash64(job_id.lower()) % count


def score(member: str, partition: int) -> int:
    """The rendezvous weight of `member` for `partition` (the highest weight owns it)."""
    return _hash64(f"{member}\x00{partition}")


def fence_name(partition: int) -> str:
    """The store's fence (leader-epoch) name of a partition."""
    return f"{FENCE_PREFIX}{partition}"


@dataclass(frozen=True, slots=True)
class PartitionSet:
    """Some of a cluster's `count` partitions: the jobs whose work one member takes.

    Callers that want every job (a lone job manager) pass None instead, so a cluster of
    one asks exactly what it asked before partitions existed.
    """

    count: int
    held: frozenset[int]

    def __post_init__(self) -> None:
        _check_count(self.count)
        if any(not 0 <= p < self.count for p in self.held):
            raise InvalidArgument(f"partitions must be in 0..{self.count - 1}: "
                                  f"{sorted(self.held)}", field="partitions")

    def covers(self, job_id: str) -> bool:
        """`job_id`'s partition is one of these."""
        return partition_of(job_id, self.count) in self.held


@dataclass(frozen=True, slots=True)
class Assignment:
    """The owner of every partition (None: no member is live)."""

    owners: tuple[str | None, ...]

    @property
    def count(self) -> int:
        """The number of partitions."""
        return len(self.owners)

    def owner(self, partition: int) -> str | None:
        """The member owning `partition`."""
        return self.owners[partition]

    def owned_by(self, member: str) -> frozenset[int]:
        """The partitions `member` owns."""
        return frozenset(p for p, m in enumerate(self.owners) if m == member)

    def owner_of_job(self, job_id: str) -> str | None:
        """The member owning `job_id`'s partition."""
        return self.owners[partition_of(job_id, self.count)]


def assign(members: Iterable[str], count: int = DEFAULT_PARTITIONS) -> Assignment:
    """Each partition to the member of highest `score` (ties, astronomically rare, to the
    largest member id, so the answer never depends on the order `members` come in)."""
    _check_count(count)
    live = set(members)
    if not live:
        return Assignment((None,) * count)
    return Assignment(tuple(_winner(live, p) for p in range(count)))


def _winner(members: set[str], partition: int) -> str:
    return max(members, key=lambda m: (score(m, partition), m))


@dataclass(frozen=True, slots=True)
class Move:
    """One partition changing hands: `source` releases it, then `target` acquires it
    (None on either side: no member held it / no member is left to take it)."""

    partition: int
    source: str | None
    target: str | None


def moves(before: Assignment, after: Assignment) -> tuple[Move, ...]:
    """The partitions whose owner differs between two assignments, in partition order."""
    if before.count != after.count:
        raise InvalidArgument(f"assignments of {before.count} and {after.count} partitions "
                              "cannot be compared", field="partitions")
    return tuple(Move(p, a, b) for p, (a, b) in enumerate(zip(before.owners, after.owners,
                                                              strict=True)) if a != b)


@dataclass(frozen=True, slots=True)
class Handover:
    """What one member must do to go from the partitions it holds to those assigned to it."""

    release: frozenset[int]
    acquire: frozenset[int]


def handover(member: str, held: Iterable[int], assignment: Assignment) -> Handover:
    """Partitions `member` holds but is no longer assigned (release them first), and
    partitions assigned to it that it does not hold yet (acquire them once free)."""
    mine = assignment.owned_by(member)
    have = frozenset(held)
    return Handover(release=have - mine, acquire=mine - have)
