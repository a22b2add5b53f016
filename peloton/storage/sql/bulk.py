"""SQL side of the copy tool's BulkStore: scan, fetch, upsert and delete records by kind.

A scan walks a table in primary-key order and its cursor is the last key
as JSON, so a resumed scan continues with `(key columns) > (last key)`
through the primary-key index.  `put_records` decodes every payload
(corrupt data stops the batch with DataCorruption), writes the rows with
the same row builders the normal write path uses (so derived columns and
the job index come out identical), and saves the copy checkpoint in the
same transaction: after a crash the checkpoint never claims more than
was written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.storage import codec
from peloton.storage.bulk import KIND_BY_NAME, ActiveJob, Checkpoint, Key, Record
from peloton.storage.job_index import runtime_columns
from peloton.storage.sql import cluster, cron, history, jobs, tables, tasks
from peloton.storage.sql.database import Database

t = tables


@dataclass(frozen=True)
class _Spec:
    table: sa.Table
    keys: tuple[str, ...]
    payload: str | None = "body"
    revision: str | None = None
    only_complete_jobs: bool = False


_SPECS: dict[str, _Spec] = {
    "respool": _Spec(t.respools, ("pool_id",)),
    "host": _Spec(t.hosts, ("hostname",)),
    "framework": _Spec(t.frameworks, ("name",)),
    "job_config": _Spec(t.job_configs, ("job_id", "version")),
    "job_runtime": _Spec(t.jobs, ("job_id",), "runtime", "revision", only_complete_jobs=True),
    "job_name": _Spec(t.job_names, ("name", "job_id")),
    "active_job": _Spec(t.active_jobs, ("job_id",), None),
    "secret": _Spec(t.secrets, ("secret_id",)),
    "volume": _Spec(t.volumes, ("volume_id",)),
    "task_config": _Spec(t.task_configs, ("job_id", "version", "instance")),
    "task_runtime": _Spec(t.task_runtimes, ("job_id", "instance"), revision="revision"),
    "pod_event": _Spec(t.pod_events, ("job_id", "instance", "run_id", "time_us", "state")),
    "update": _Spec(t.updates, ("update_id",), revision="revision"),
    "workflow_event": _Spec(t.workflow_events, ("update_id", "instance", "time_us", "state")),
    "cron_job": _Spec(t.cron_jobs, ("name",), revision="revision"),
}


def _key_expr(spec: _Spec) -> Any:
    cols = [spec.table.c[k] for k in spec.keys]
    return cols[0] if len(cols) == 1 else sa.tuple_(*cols)


def _key_value(spec: _Spec, key: Sequence[Any]) -> Any:
    return key[0] if len(spec.keys) == 1 else tuple(key)


def _base_where(spec: _Spec) -> list[Any]:
    return [spec.table.c.revision.is_not(None)] if spec.only_complete_jobs else []


class SqlBulk:
    """BulkStore over SQL."""

    db: Database

    def _rows(self, kind: str, records: Sequence[Record]) -> list[dict[str, Any]]:
        k = KIND_BY_NAME[kind]
        values = [codec.from_json(k.entity, r.payload, k.describe(r.key)) for r in records]
        expires = self.db.options.clock() + self.db.options.pod_event_ttl
        build: dict[str, Callable[[Key, Any], dict[str, Any]]] = {
            "respool": lambda key, v: cluster.respool_row(v),
            "host": lambda key, v: cluster.host_row(v),
            "framework": lambda key, v: cluster.framework_row(v),
            "secret": lambda key, v: cluster.secret_row(v),
            "volume": lambda key, v: cluster.volume_row(v),
            "job_config": lambda key, v: {"job_id": key[0], "version": key[1],
                                          "created_at": v.created_at, "body": codec.to_json(v)},
            "job_runtime": lambda key, v: {"job_id": key[0], **runtime_columns(v)},
            "job_name": lambda key, v: jobs.name_row(v),
            "active_job": lambda key, v: {"job_id": key[0]},
            "task_config": lambda key, v: {"job_id": key[0], "version": key[1],
                                           "instance": key[2], "body": codec.to_json(v)},
            "task_runtime": lambda key, v: tasks.runtime_row(str(key[0]), int(key[1]), v),
            "pod_event": lambda key, v: history.pod_event_row(v, expires),
            "update": lambda key, v: history.update_row(v),
            "workflow_event": lambda key, v: history.workflow_event_row(v),
            "cron_job": lambda key, v: cron.cron_row(v),
        }
        return [build[kind](r.key, v) for r, v in zip(records, values, strict=True)]

    def count_records(self, kind: str) -> int:
        spec = _SPECS[kind]
        q = sa.select(sa.func.count()).select_from(spec.table).where(*_base_where(spec))
        return int(self.db.run(f"count {kind}", lambda c: c.execute(q).scalar() or 0,
                               write=False))

    def _select(self, spec: _Spec) -> Any:
        cols = [spec.table.c[k] for k in spec.keys]
        extra = [spec.table.c[c] for c in (spec.revision, spec.payload) if c is not None]
        return sa.select(*cols, *extra).where(*_base_where(spec))

    def _record(self, kind: str, spec: _Spec, row: Any) -> Record:
        n = len(spec.keys)
        key = tuple(row[:n])
        rev = int(row[n]) if spec.revision is not None else 0
        payload = (row[-1] if spec.payload is not None
                   else codec.to_json(ActiveJob(str(key[0]))))
        return Record(key, rev, payload)

    def scan_records(self, kind: str, after: str | None,
                     limit: int) -> tuple[list[Record], str | None]:
        spec = _SPECS[kind]
        q = self._select(spec).order_by(*[spec.table.c[k] for k in spec.keys]).limit(limit)
        if after is not None:
            q = q.where(_key_expr(spec) > _key_value(spec, json.loads(after)))
        rows = self.db.run(f"scan {kind}", lambda c: list(c.execute(q)), write=False)
        records = [self._record(kind, spec, r) for r in rows]
        cursor = json.dumps(list(records[-1].key)) if len(records) == limit else None
        return records, cursor

    def get_records(self, kind: str, keys: Sequence[Key]) -> list[Record]:
        spec = _SPECS[kind]

        def read(conn: Connection) -> list[Any]:
            out: list[Any] = []
            for part in tasks.chunks(list(keys), 300):
                values = [_key_value(spec, k) for k in part]
                out.extend(conn.execute(self._select(spec).where(_key_expr(spec).in_(values))))
            return out
        return [self._record(kind, spec, r) for r in self.db.run(f"get {kind}", read,
                                                                   write=False)]

    def put_records(self, kind: str, records: Sequence[Record],
                    checkpoint: Checkpoint | None = None) -> None:
        spec = _SPECS[kind]
        rows = self._rows(kind, records)
        job_ids = sorted({str(r.key[0]) for r in records})

        def tx(conn: Connection) -> None:
            if kind == "job_runtime":
                self.db.upsert(conn, spec.table, rows, update=list(rows[0])[1:] if rows else [])
                for job_id in job_ids:  # runtime copied before its config: index it now
                    if conn.execute(sa.select(t.jobs.c.config_version)
                                    .where(t.jobs.c.job_id == job_id)).scalar() is None:
                        jobs.reindex(conn, job_id)
            else:
                self.db.upsert(conn, spec.table, rows)
            if kind == "job_config":
                for job_id in job_ids:
                    jobs.reindex(conn, job_id)
            if checkpoint is not None:
                self._save_checkpoint(conn, checkpoint)

        self.db.run(f"put {kind}", tx)

    def delete_records(self, kind: str, keys: Sequence[Key]) -> None:
        spec = _SPECS[kind]

        def tx(conn: Connection) -> None:
            for part in tasks.chunks(list(keys), 300):
                values = [_key_value(spec, k) for k in part]
                conn.execute(sa.delete(spec.table).where(_key_expr(spec).in_(values)))
                if kind == "job_runtime":
                    conn.execute(sa.delete(t.job_labels).where(t.job_labels.c.job_id.in_(values)))
            if kind == "job_config":
                for job_id in sorted({str(k[0]) for k in keys}):
                    jobs.reindex(conn, job_id)

        if keys:
            self.db.run(f"delete {kind}", tx)

    # -- checkpoints -------------------------------------------------------
    def _save_checkpoint(self, conn: Connection, cp: Checkpoint) -> None:
        self.db.upsert(conn, t.copy_checkpoints, [{
            "copy_id": cp.copy_id, "kind": cp.kind, "cursor": cp.cursor, "done": cp.done,
            "passes": cp.passes, "copied": cp.copied}])

    def get_checkpoint(self, copy_id: str, kind: str) -> Checkpoint | None:
        c = t.copy_checkpoints.c
        q = sa.select(t.copy_checkpoints).where(c.copy_id == copy_id, c.kind == kind)
        row = self.db.run("get copy checkpoint", lambda conn: conn.execute(q).first(),
                          write=False)
        if row is None:
            return None
        return Checkpoint(row.copy_id, row.kind, row.cursor, bool(row.done), int(row.passes),
                          int(row.copied))

    def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.db.run("save copy checkpoint", lambda c: self._save_checkpoint(c, checkpoint))

    def clear_checkpoints(self, copy_id: str) -> None:
        q = sa.delete(t.copy_checkpoints).where(t.copy_checkpoints.c.copy_id == copy_id)
        self.db.run("clear copy checkpoints", lambda c: c.execute(q))
