"""Cassandra leadership epochs and fenced writes (see peloton/storage/leader_store.py).

Claims are lightweight transactions on the role's `leader_epochs` row.  A
fenced view checks before every write method, with a lightweight transaction
that changes nothing (`UPDATE ... SET epoch = <mine> ... IF epoch = <mine>`),
that the writer's epoch is still the stored one: a serial read that sees
every claim committed before it.  The check and the write are two
operations; Cassandra has no transaction across partitions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from peloton.common.fencing import READ_PREFIXES
from peloton.storage.cassandra.base import CassandraBase, applied
from peloton.storage.leader_store import FencedOut, claim_one_by_one

_CLAIM_ATTEMPTS = 20


class CassandraLeaders(CassandraBase):
    """LeaderEpochStore over Cassandra."""

    def claim_leadership(self, role: str, epoch: int | None, holder: str) -> int:
        for _ in range(_CLAIM_ATTEMPTS):
            row = self.q1("leader_epochs.get", role)
            if row is None:
                mine = epoch if epoch is not None else 1
                if applied(self.q1("leader_epochs.create", role, mine, holder)):
                    return mine
                continue
            stored = int(row["epoch"])
            mine = stored + 1 if epoch is None else epoch
            if stored > mine:
                raise FencedOut(f"{role}: a newer leader holds epoch {stored}; epoch {mine} is stale")
            if applied(self.q1("leader_epochs.cas", mine, holder, role, stored)):
                return mine
        raise FencedOut(f"{role}: could not claim leadership (claims kept racing)")

    def claim_leaderships(self, epochs: Mapping[str, int], holder: str) -> list[str]:
        # One lightweight transaction per role: Cassandra has no transaction across rows.
        return claim_one_by_one(self.claim_leadership, epochs, holder)

    def leader_epoch(self, role: str) -> int | None:
        row = self.q1("leader_epochs.get", role)
        return None if row is None else int(row["epoch"])

    def leader_epochs(self, roles: Sequence[str]) -> dict[str, int]:
        # One read per role, as the claims themselves are one lightweight transaction each.
        found = {role: self.leader_epoch(role) for role in sorted(set(roles))}
        return {role: epoch for role, epoch in found.items() if epoch is not None}

    def check_epoch(self, role: str, mine: int | None) -> None:
        """FencedOut unless `mine` is the role's stored epoch (a serial, LWT check)."""
        if mine is None:
            raise FencedOut(f"{role}: this process's leadership term is over; refusing to write")
        row = self.q1("leader_epochs.get", role)
        holder = str(row.get("holder") or "") if row else ""
        if row is None or not applied(self.q1("leader_epochs.cas", mine, holder, role, mine)):
            raise FencedOut(f"{role}: epoch {mine} is no longer the leader's; a newer leader "
                            "took over, so this write is refused")

    def with_fencing(self, role: str, epoch: Callable[[], int | None]) -> Any:
        return _FencedCassandra(self, role, epoch)


class _FencedCassandra:
    """The store with an epoch check before every write method (reads pass through)."""

    def __init__(self, store: CassandraLeaders, role: str, epoch: Callable[[], int | None]) -> None:
        self._store = store
        self._role = role
        self._epoch = epoch

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if (not callable(value) or name.startswith(READ_PREFIXES) or name.startswith("_")
                or name in ("leader_epoch", "leader_epochs", "with_fencing", "claim_leadership",
                            "claim_leaderships", "check_epoch")):
            return value
        store, role, epoch = self._store, self._role, self._epoch

        @functools.wraps(value)
        def write(*args: Any, **kwargs: Any) -> Any:
            store.check_epoch(role, epoch())
            return value(*args, **kwargs)

        self.__dict__[name] = write
        return write
