"""SQL history tables: pod events (with retention), updates (CAS) and workflow events.

Pod events carry an `expires_at` stamped when they are written (the
store's clock plus its retention), and `expire_pod_events` deletes the
expired ones through an index, which is how a SQL database gets what
Cassandra does with a TTL.  Events are keyed by their identity (job,
instance, run, time in microseconds, state), so writing one twice keeps one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.core.model.events import PodEvent
from peloton.core.model.update import UpdateInfo, WorkflowEvent
from peloton.storage import codec
from peloton.storage.bulk import time_key
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import pod_events, updates, workflow_events

#: Expired pod events deleted in one transaction (`expire_pod_events`).
EXPIRE_CHUNK = 5000

_POD_EVENT_UPSERT = (
    "INSERT INTO pod_events (job_id, instance, run_id, time_us, state, expires_at, body) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}) "
    "ON CONFLICT (job_id, instance, run_id, time_us, state) "
    "DO UPDATE SET expires_at = excluded.expires_at, body = excluded.body")
_POD_EVENT_UPSERT_SQLITE = _POD_EVENT_UPSERT.format(p="?")
_POD_EVENT_UPSERT_PG = _POD_EVENT_UPSERT.format(p="%s")


def pod_event_row(event: PodEvent, expires_at: float) -> dict[str, Any]:
    """The pod_events row of an event."""
    return {"job_id": event.job_id, "instance": event.instance, "run_id": event.run_id,
            "time_us": time_key(event.time), "state": event.state.value,
            "expires_at": expires_at, "body": codec.to_json(event)}


def pod_event_rows(db: Database, events: Sequence[PodEvent]) -> list[tuple[Any, ...]]:
    """The pod_events rows of events written now (expiring after the retention)."""
    expires = db.options.clock() + db.options.pod_event_ttl
    to_json = codec.dataclass_json(PodEvent)  # looked up once: one event per task write
    return [(e.job_id, e.instance, e.run_id, time_key(e.time), e.state._value_, expires,
             to_json(e)) for e in events]


def insert_pod_events(db: Database, conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Upsert `pod_event_rows` in the transaction of `conn`."""
    # Every task state change writes one of these: plain tuples through the DB-API
    # cursor, since SQLAlchemy's per-row statement bookkeeping costs more than the insert.
    sql = _POD_EVENT_UPSERT_PG if db.dialect == "postgresql" else _POD_EVENT_UPSERT_SQLITE
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.executemany(sql, rows)


def update_row(update: UpdateInfo) -> dict[str, Any]:
    """The updates row of a workflow (stored as given, revision included)."""
    return {"update_id": update.update_id, "job_id": update.job_id,
            "state": update.state.value, "revision": update.revision,
            "creation_time": update.creation_time, "body": codec.to_json(update)}


def workflow_event_row(event: WorkflowEvent) -> dict[str, Any]:
    """The workflow_events row of an event (instance -1 is the workflow itself)."""
    return {"update_id": event.update_id,
            "instance": -1 if event.instance is None else event.instance,
            "time_us": time_key(event.time), "state": event.state.value,
            "body": codec.to_json(event)}


def update_entity(update_id: str) -> str:
    """How errors name a workflow."""
    return f"update {update_id}"


class SqlHistory:
    """PodEventStore and UpdateStore over SQL."""

    db: Database

    # -- pod events --------------------------------------------------------
    def add_pod_events(self, events: Sequence[PodEvent]) -> None:
        if not events:
            return
        rows = pod_event_rows(self.db, events)
        self.db.run("add pod events", lambda conn: insert_pod_events(self.db, conn, rows))

    def get_pod_events(self, job_id: str, instance: int, run_id: int | None = None,
                       limit: int | None = None) -> list[PodEvent]:
        q = (sa.select(pod_events.c.run_id, pod_events.c.body)
             .where(pod_events.c.job_id == job_id, pod_events.c.instance == instance)
             .order_by(pod_events.c.run_id.desc(), pod_events.c.time_us.desc(),
                       pod_events.c.state))
        if run_id is not None:
            q = q.where(pod_events.c.run_id == run_id)
        if limit is not None:
            q = q.limit(limit)
        rows = self.db.run("get pod events", lambda c: list(c.execute(q)), write=False)
        return [codec.from_json(PodEvent, r.body,
                                f"pod event of task {job_id}-{instance} run {r.run_id}")
                for r in rows]

    def delete_pod_events(self, job_id: str, instance: int, from_run: int, to_run: int) -> None:
        q = sa.delete(pod_events).where(
            pod_events.c.job_id == job_id, pod_events.c.instance == instance,
            pod_events.c.run_id >= from_run, pod_events.c.run_id < to_run)
        self.db.run("delete pod events", lambda c: c.execute(q))

    def expire_pod_events(self, now: float | None = None) -> int:
        cutoff = self.db.options.clock() if now is None else now
        keys = (pod_events.c.job_id, pod_events.c.instance, pod_events.c.run_id,
                pod_events.c.time_us, pod_events.c.state)
        # At most EXPIRE_CHUNK events a transaction: a backlog (a million tasks' events
        # reaching their retention together, a sweep after a pause) deleted in one held the
        # write lock, and every group commit behind it, for as long as it took.
        chunk = sa.select(*keys).where(pod_events.c.expires_at <= cutoff).limit(EXPIRE_CHUNK)
        q = sa.delete(pod_events).where(sa.tuple_(*keys).in_(chunk))
        total = 0
        while True:
            gone = int(self.db.run("expire pod events", lambda c: c.execute(q).rowcount))
            total += gone
            if gone < EXPIRE_CHUNK:
                return total

    # -- updates -----------------------------------------------------------
    def create_update(self, update: UpdateInfo) -> UpdateInfo:
        stored = dataclasses.replace(update, revision=1)
        self.db.run("create update", lambda c: c.execute(sa.insert(updates), [update_row(stored)]),
                    duplicate=lambda: AlreadyExists(f"update {update.update_id} already exists"))
        return stored

    def get_update(self, update_id: str) -> UpdateInfo:
        q = sa.select(updates.c.body).where(updates.c.update_id == update_id)
        body = self.db.run("get update", lambda c: c.execute(q).scalar(), write=False)
        if body is None:
            raise NotFound(f"update {update_id} not found")
        return codec.from_json(UpdateInfo, body, update_entity(update_id))

    def update_update(self, update: UpdateInfo) -> UpdateInfo:
        stored = dataclasses.replace(update, revision=update.revision + 1)
        row = update_row(stored)
        del row["update_id"]

        def tx(conn: Connection) -> None:
            done = conn.execute(sa.update(updates).where(
                updates.c.update_id == update.update_id,
                updates.c.revision == update.revision).values(**row)).rowcount
            if done == 1:
                return
            rev = conn.execute(sa.select(updates.c.revision)
                               .where(updates.c.update_id == update.update_id)).scalar()
            if rev is None:
                raise NotFound(f"update {update.update_id} not found")
            raise Conflict(f"update {update.update_id} is at revision {rev}, "
                           f"not {update.revision}")

        self.db.run("update update", tx)
        return stored

    def get_updates_for_job(self, job_id: str) -> list[UpdateInfo]:
        q = (sa.select(updates.c.update_id, updates.c.body).where(updates.c.job_id == job_id)
             .order_by(updates.c.creation_time.desc(), updates.c.update_id.desc()))
        rows = self.db.run("get updates for job", lambda c: list(c.execute(q)), write=False)
        return [codec.from_json(UpdateInfo, r.body, update_entity(r.update_id)) for r in rows]

    def delete_update(self, update_id: str) -> None:
        def tx(conn: Connection) -> None:
            conn.execute(sa.delete(workflow_events)
                         .where(workflow_events.c.update_id == update_id))
            conn.execute(sa.delete(updates).where(updates.c.update_id == update_id))
        self.db.run("delete update", tx)

    def add_workflow_event(self, event: WorkflowEvent) -> None:
        row = workflow_event_row(event)
        self.db.run("add workflow event", lambda c: self.db.upsert(c, workflow_events, [row]))

    def get_workflow_events(self, update_id: str, instance: int | None = None,
                            limit: int | None = None) -> list[WorkflowEvent]:
        q = (sa.select(workflow_events.c.body)
             .where(workflow_events.c.update_id == update_id,
                    workflow_events.c.instance == (-1 if instance is None else instance))
             .order_by(workflow_events.c.time_us.desc(), workflow_events.c.state))
        if limit is not None:
            q = q.limit(limit)
        bodies = self.db.run("get workflow events", lambda c: list(c.execute(q).scalars()),
                             write=False)
        return [codec.from_json(WorkflowEvent, b, f"workflow event of update {update_id}")
                for b in bodies]
