"""Cassandra side of the copy tool's BulkStore.

Scans walk a table in token order with `token(partition key) > token(?)`
and LIMIT; a page that fills up may have cut its last partition short, so
that partition is dropped from the page and read whole instead (the
driver pages through it).  The cursor is therefore always the key of the
last *complete* partition, and a resumed scan never skips or repeats a
row.  Batches are upserts, so writing one twice after a crash is harmless;
the checkpoint is written after the batch it describes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from peloton.core.model.job import JobRuntime, JobSpec
from peloton.storage import codec
from peloton.storage.bulk import KIND_BY_NAME, ActiveJob, Checkpoint, Key, Record
from peloton.storage.cassandra.base import CassandraBase, key_of, value_of_key
from peloton.storage.cassandra.index import JobIndexWriter
from peloton.storage.cassandra.jobs import ACTIVE_SHARD
from peloton.storage.cassandra.session import Row
from peloton.storage.cassandra.statements import SCANNED

Writes = list[tuple[str, Sequence[Any]]]


def _key_columns(kind: str) -> tuple[str, ...]:
    _table, pk, ck, _payload, _rev = SCANNED[kind]
    return tuple(c for c in (*pk, *ck) if c != "shard_id")


def _pk_of(kind: str, key: Key) -> tuple[Any, ...]:
    """The partition key values of a record key."""
    pk = SCANNED[kind][1]
    if kind == "job_name":
        return (key_of(str(key[0])),)
    return (ACTIVE_SHARD,) if pk == ("shard_id",) else tuple(key[:len(pk)])


class CassandraBulk(CassandraBase, JobIndexWriter):
    """BulkStore over Cassandra."""

    def _record(self, kind: str, row: Row) -> Record:
        _table, _pk, _ck, payload, rev = SCANNED[kind]
        key = tuple(row[c] for c in _key_columns(kind))
        if kind == "job_name":
            key = (value_of_key(key[0]), *key[1:])
        body = row[payload] if payload else codec.to_json(ActiveJob(str(key[0])))
        return Record(key, int(row[rev]) if rev else 0, body)

    def count_records(self, kind: str) -> int:
        return len(self.q(f"scan.{kind}.keys"))

    def scan_records(self, kind: str, after: str | None,
                     limit: int) -> tuple[list[Record], str | None]:
        pk = SCANNED[kind][1]
        rows = (self.q(f"scan.{kind}.first", limit) if after is None
                else self.q(f"scan.{kind}.after", *json.loads(after), limit))
        if len(rows) < limit:
            return [self._record(kind, r) for r in rows], None
        last = tuple(rows[-1][c] for c in pk)
        head = [r for r in rows if tuple(r[c] for c in pk) != last]
        whole = self.q(f"scan.{kind}.partition", *last)
        return [self._record(kind, r) for r in head + whole], json.dumps(list(last))

    def get_records(self, kind: str, keys: Sequence[Key]) -> list[Record]:
        wanted = {tuple(k) for k in keys}
        partitions = sorted({_pk_of(kind, k) for k in wanted}, key=repr)
        out = []
        for rows in self.many(f"scan.{kind}.partition", partitions):
            out += [rec for rec in (self._record(kind, r) for r in rows) if rec.key in wanted]
        return out

    def put_records(self, kind: str, records: Sequence[Record],
                    checkpoint: Checkpoint | None = None) -> None:
        k = KIND_BY_NAME[kind]
        values = [codec.from_json(k.entity, r.payload, k.describe(r.key)) for r in records]
        writes: Writes = []
        for record, value in zip(records, values, strict=True):
            writes += self._writes(kind, record.key, value)
        for name, params in writes:
            self.q(name, *params)
        if kind in ("job_config", "job_runtime"):
            for job_id in sorted({str(r.key[0]) for r in records}):
                self._reindex(job_id)
        if checkpoint is not None:
            self.put_checkpoint(checkpoint)

    def _writes(self, kind: str, key: Key, v: Any) -> Writes:
        body = codec.to_json(v)
        ttl = max(1, int(self.options.pod_event_ttl))
        build: dict[str, Callable[[], Writes]] = {
            "respool": lambda: [("respools.put", (key[0], body))],
            "host": lambda: [("host_info.put", (key[0], v.state.value, body))],
            "framework": lambda: [("frameworks.put", (key[0], body))],
            "job_config": lambda: [("job_config.put", (key[0], key[1], v.created_at, body))],
            "job_runtime": lambda: [("job_runtime.put",
                                     (key[0], v.revision, v.state.value, body))],
            "job_name": lambda: [("job_name.add", (key_of(str(key[0])), key[1], v.time, body)),
                                 ("job_names_by_job.add", (key[1], key[0]))],
            "active_job": lambda: [("active_jobs.add", (ACTIVE_SHARD, key[0]))],
            "secret": lambda: [("secret_info.put", (key[0], v.job_id, body)),
                               ("secrets_by_job.add", (v.job_id, key[0]))],
            "volume": lambda: [("persistent_volumes.put", (key[0], v.job_id, body))],
            "task_config": lambda: [("task_config.put", (*key, body)),
                                    ("task_config_versions.add", (key[0], key[1]))],
            "task_runtime": lambda: [("task_runtime.put",
                                      (key[0], key[1], v.revision, v.state.value, body))],
            "pod_event": lambda: [("pod_events.add", (*key, body, ttl)),
                                  ("pod_event_instances.add", (key[0], key[1]))],
            "update": lambda: [("update_info.put", (key[0], v.job_id, v.revision,
                                                    v.state.value, v.creation_time, body)),
                               ("updates_by_job.add", (v.job_id, key[0]))],
            "workflow_event": lambda: [("workflow_events.add", (*key, body))],
            "cron_job": lambda: [("cron_jobs.put", (key[0], v.revision, body))],
        }
        return build[kind]()

    def _reindex(self, job_id: str) -> None:
        """Point a job's index entry at its newest config and its runtime."""
        old = self.q1("job_index.get", job_id)
        items: Writes = []
        newest = self.q1("job_config.newest", job_id, 1)
        if newest is not None:
            spec = codec.from_json(JobSpec, newest["body"], f"job config of job {job_id}")
            items += self.index_config_items(job_id, spec, old)
        rt = self.q1("job_runtime.get", job_id)
        if rt is not None:
            runtime = codec.from_json(JobRuntime, rt["body"], f"job runtime of job {job_id}")
            items += self.index_runtime_items(job_id, runtime, old)
        if items:
            self.batch(items)

    def delete_records(self, kind: str, keys: Sequence[Key]) -> None:
        for key in keys:
            if kind == "job_runtime":
                self.batch(self.index_delete_items(str(key[0]),
                                                   self.q1("job_index.get", key[0])))
                self.q("job_runtime.delete", key[0])
            elif kind == "job_config":
                self.q("job_config.delete", *key)
                self._reindex(str(key[0]))
            elif kind == "job_name":
                self.q("job_name.remove", key_of(str(key[0])), key[1])
                self.q("job_names_by_job.remove", key[1], key[0])
            elif kind == "active_job":
                self.q("active_jobs.remove", ACTIVE_SHARD, key[0])
            elif kind == "secret":
                row = self.q1("secret_info.get", key[0])
                self.q("secret_info.delete", key[0])
                if row is not None:
                    self.q("secrets_by_job.remove", row["job_id"], key[0])
            elif kind == "update":
                row = self.q1("update_info.get", key[0])
                self.q("update_info.delete", key[0])
                if row is not None:
                    self.q("updates_by_job.remove", row["job_id"], key[0])
            else:
                table = {"respool": "respools", "host": "host_info", "framework": "frameworks",
                         "volume": "persistent_volumes", "task_config": "task_config",
                         "task_runtime": "task_runtime", "pod_event": "pod_events",
                         "workflow_event": "workflow_events", "cron_job": "cron_jobs"}[kind]
                verb = "remove" if kind in ("task_config", "pod_event", "workflow_event") \
                    else "delete"
                self.q(f"{table}.{verb}", *key)

    # -- checkpoints -------------------------------------------------------
    def get_checkpoint(self, copy_id: str, kind: str) -> Checkpoint | None:
        row = self.q1("copy_checkpoints.get", copy_id, kind)
        if row is None:
            return None
        return Checkpoint(copy_id, kind, row["cursor"], bool(row["done"]), int(row["passes"]),
                          int(row["copied"]))

    def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        cp = checkpoint
        self.q("copy_checkpoints.put", cp.copy_id, cp.kind, cp.cursor, cp.done, cp.passes,
               cp.copied)

    def clear_checkpoints(self, copy_id: str) -> None:
        self.q("copy_checkpoints.delete", copy_id)
