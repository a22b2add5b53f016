"""Contract of fencing in the store: a deposed leader's writes are refused by the store itself.

Each stateful role (jobmgr, resmgr, hostmgr) keeps its newest leadership
epoch in the store (`leader_epochs`).  A daemon that gains leadership first
claims its epoch (`claim_leadership`); from then on it writes only through
`with_fencing(role, epoch)`, a view of the store on which every write
checks, in the same transaction as the write, that the stored epoch is still
the writer's and otherwise raises `FencedOut` and writes nothing:

* SQL: every write transaction reads the role's row `FOR SHARE`
  (PostgreSQL; SQLite's writers are serialized by BEGIN IMMEDIATE) and
  compares; a new leader's claim updates that row `FOR UPDATE`, so every
  write that starts after it sees the new epoch.  It waits for writes in
  flight only briefly: on PostgreSQL it then ends the sessions holding the
  row (a deposed leader paused inside a write transaction), which rolls
  their writes back (sql/leaders.py).
* Cassandra: before each write, a lightweight transaction on the role's row
  (`UPDATE ... IF epoch = <mine>`), which fails once a newer leader claimed.
  Cassandra cannot make that check and a write to another partition one
  transaction, so a writer paused *between* the two can still land one
  write; this narrows the window the in-process check leaves to that gap.

This closes what the in-process fence (peloton/common/fencing.py) cannot: a
leader paused (SIGSTOP, a long GC, a frozen VM) past its ZooKeeper session
that resumes and writes before it notices it lost leadership.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from peloton.core.errors import Unavailable

if TYPE_CHECKING:
    from peloton.storage.store import Store


class FencedOut(Unavailable):
    """The writer's leadership epoch is no longer the newest: a newer leader took over."""

    kind = "fenced_out"


def claim_one_by_one(claim: Callable[[str, int | None, str], int], epochs: Mapping[str, int],
                     holder: str) -> list[str]:
    """`claim_leaderships` as a claim per role (`claim`: a store's `claim_leadership`), for
    stores that cannot claim several in one transaction; the roles refused, sorted."""
    refused = []
    for role, epoch in sorted(epochs.items()):
        try:
            claim(role, epoch, holder)
        except FencedOut:
            refused.append(role)
    return refused


class LeaderEpochStore(Protocol):
    """Leadership epochs and fenced views of the store."""

    def claim_leadership(self, role: str, epoch: int | None, holder: str) -> int:
        """Record that `holder` leads `role` from `epoch` on and return the epoch.

        `epoch` None (a single process without ZooKeeper) takes the stored epoch plus one.
        FencedOut if the store already has a newer epoch for the role (this candidate is
        stale); claiming the stored epoch again is allowed (a retried claim)."""
        ...

    def claim_leaderships(self, epochs: Mapping[str, int], holder: str) -> list[str]:
        """`claim_leadership` of several roles at given epochs (a job manager member taking
        a leaver's partitions over): each role claimed as alone, in one transaction where
        the store has them (SQLite); returns the roles refused (a newer epoch stored),
        sorted, the others claimed."""
        ...

    def leader_epoch(self, role: str) -> int | None:
        """The newest claimed epoch of `role` (None if never claimed)."""
        ...

    def leader_epochs(self, roles: Sequence[str]) -> dict[str, int]:
        """`leader_epoch` of several roles in one read where the store can (a member
        taking thirty partitions over reads what each was claimed at before); roles
        never claimed are absent."""
        ...

    def with_fencing(self, role: str, epoch: Callable[[], int | None]) -> Store:
        """This store, except that every write first checks that `epoch()` is still the
        role's stored epoch (FencedOut otherwise; also when `epoch()` is None, i.e. the
        writer's term is over or has not begun).  Reads are not checked."""
        ...
