"""SQL leadership epochs and fenced writes (see peloton/storage/leader_store.py).

A claim does not wait on the old term's locks.  Every fenced write holds the role's row
FOR SHARE until it commits, and the claim updates that row; a leader paused inside a
write transaction (SIGSTOP, a frozen VM) used to hold the new leader's claim, and so its
whole start, for as long as the pause lasted (20 s seen).  On PostgreSQL the claim now
waits `CLAIM_PATIENCE` at most: then the sessions its lock waits on (`pg_blocking_pids`:
the deposed term's transactions on the row) are terminated, which rolls their writes
back, and the claim goes on.  Terminating them is what fencing asks anyway: a write of
a term that is over must not land.  (SQLite has one writer at a time across processes:
a writer paused holding it blocks every process, and nothing can take it away.)
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.storage.leader_store import FencedOut, claim_one_by_one
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import leader_epochs

log = logging.getLogger(__name__)

#: Seconds a claim waits on other sessions' locks before it ends them (PostgreSQL).
CLAIM_PATIENCE = 0.5


class SqlLeaders:
    """LeaderEpochStore over SQL."""

    db: Database

    def claim_leadership(self, role: str, epoch: int | None, holder: str) -> int:
        def tx(conn: Connection) -> int:
            q = sa.select(leader_epochs.c.epoch).where(leader_epochs.c.role == role)
            if self.db.dialect == "postgresql":
                q = q.with_for_update()
                pid = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
                with _BreakLocks(self.db, pid, role):
                    stored = conn.execute(q).scalar()
            else:
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

    def claim_leaderships(self, epochs: Mapping[str, int], holder: str) -> list[str]:
        if self.db.dialect == "postgresql" or len(epochs) < 2:
            # Each claim may have to end a paused writer's sessions on its own row
            # (`_BreakLocks` watches one role): one at a time.
            return claim_one_by_one(self.claim_leadership, epochs, holder)

        def tx(conn: Connection) -> list[str]:
            roles = sorted(epochs)
            stored = {str(r): int(e) for r, e in conn.execute(
                sa.select(leader_epochs.c.role, leader_epochs.c.epoch)
                .where(leader_epochs.c.role.in_(roles)))}
            refused = [r for r in roles if r in stored and stored[r] > epochs[r]]
            fresh = [{"role": r, "epoch": epochs[r], "holder": holder}
                     for r in roles if r not in stored]
            if fresh:
                conn.execute(sa.insert(leader_epochs), fresh)
            moved = [{"r": r, "epoch": epochs[r], "holder": holder}
                     for r in roles if r in stored and r not in refused]
            if moved:
                conn.execute(sa.update(leader_epochs)
                             .where(leader_epochs.c.role == sa.bindparam("r"))
                             .values(epoch=sa.bindparam("epoch"),
                                     holder=sa.bindparam("holder")), moved)
            return refused

        return self.db.run("claim leaderships", tx, fenced=False)

    def leader_epoch(self, role: str) -> int | None:
        q = sa.select(leader_epochs.c.epoch).where(leader_epochs.c.role == role)
        found = self.db.run("read leader epoch", lambda c: c.execute(q).scalar(), write=False)
        return None if found is None else int(found)

    def leader_epochs(self, roles: Sequence[str]) -> dict[str, int]:
        if not roles:
            return {}
        q = (sa.select(leader_epochs.c.role, leader_epochs.c.epoch)
             .where(leader_epochs.c.role.in_(sorted(set(roles)))))
        rows = self.db.run("read leader epochs", lambda c: list(c.execute(q)), write=False)
        return {str(role): int(epoch) for role, epoch in rows}

    def with_fencing(self, role: str, epoch: Callable[[], int | None]) -> Any:
        view = copy.copy(self)
        view.db = self.db.with_fence(role, epoch)
        view.url = self.db.url  # type: ignore[attr-defined]
        return view


class _BreakLocks:
    """While a claim waits for its row lock: every `CLAIM_PATIENCE` seconds, terminate the
    sessions the claim's session (`pid`) waits on (see the module docstring)."""

    def __init__(self, db: Database, pid: int, role: str) -> None:
        self._db, self._pid, self._role = db, pid, role
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"claim-{role}", daemon=True)

    def __enter__(self) -> _BreakLocks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(CLAIM_PATIENCE * 4)

    def _run(self) -> None:
        ended = sa.text("SELECT b, pg_terminate_backend(b) FROM "
                        "unnest(pg_blocking_pids(:pid)) AS b")
        while not self._done.wait(CLAIM_PATIENCE):
            try:
                with self._db.engine.connect() as conn:
                    rows = conn.execute(ended, {"pid": self._pid}).all()
                    conn.commit()
            except Exception:  # the claim itself reports what is wrong with the database
                log.warning("claim of %s: cannot end the sessions it waits on", self._role,
                            exc_info=True)
                continue
            if rows:
                log.warning("claim of %s: ended %d session(s) of an earlier term that held "
                            "its row (pids %s); their writes are rolled back", self._role,
                            len(rows), ", ".join(str(r[0]) for r in rows))
