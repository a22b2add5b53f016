"""SQL leadership epochs and fenced writes (see peloton/storage/leader_store.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.storage.leader_store import FencedOut
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import leader_epochs


class SqlLeaders:
    """LeaderEpochStore over SQL."""

    db: Database

    def claim_leadership(self, role: str, epoch: int | None, holder: str) -> int:
        def tx(conn: Connection) -> int:
            q = sa.select(leader_epochs.c.epoch).where(leader_epochs.c.role == role)
            if self.db.dialect == "postgresql":
                q = q.with_for_update()
            stored = conn.execute(q).scalar()
            mine = (int(stored or 0) + 1) if epoch is None else epoch
            if stored is not None and int(stored) > mine:
                raise FencedOut(f"{role}: a newer leader holds epoch {stored}; epoch {mine} "
                                "is stale")
            if stored is None:
                conn.execute(sa.insert(leader_epochs).values(role=role, epoch=mine, holder=holder))
            else:
                conn.execute(sa.update(leader_epochs).where(leader_epochs.c.role == role)
                             .values(epoch=mine, holder=holder))
            return mine

        return self.db.run("claim leadership", tx, fenced=False)

    def leader_epoch(self, role: str) -> int | None:
        q = sa.select(leader_epochs.c.epoch).where(leader_epochs.c.role == role)
        found = self.db.run("read leader epoch", lambda c: c.execute(q).scalar(), write=False)
        return None if found is None else int(found)

    def with_fencing(self, role: str, epoch: Callable[[], int | None]) -> Any:
        view = copy.copy(self)
        view.db = self.db.with_fence(role, epoch)
        view.url = self.db.url  # type: ignore[attr-defined]
        return view
