"""Cassandra history tables: pod events (TTL), updates (LWT) and workflow events.

Pod events are inserted `USING TTL` the store's retention (the table also
has Peloton's 90-day default), so Cassandra expires them itself and
`expire_pod_events` has nothing to do.  `pod_event_instances` remembers
which (job, instance) partitions have events, so deleting a job can find
them all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.core.model.events import PodEvent
from peloton.core.model.update import UpdateInfo, WorkflowEvent
from peloton.storage import codec
from peloton.storage.bulk import time_key
from peloton.storage.cassandra.base import NO_LIMIT, CassandraBase, applied


def update_entity(update_id: str) -> str:
    """How errors name a workflow."""
    return f"update {update_id}"


class CassandraHistory(CassandraBase):
    """PodEventStore and UpdateStore over Cassandra."""

    # -- pod events --------------------------------------------------------
    def add_pod_events(self, events: Sequence[PodEvent]) -> None:
        ttl = max(1, int(self.options.pod_event_ttl))
        self.many("pod_event_instances.add", sorted({(e.job_id, e.instance) for e in events}))
        self.many("pod_events.add", [
            (e.job_id, e.instance, e.run_id, time_key(e.time), e.state.value,
             codec.to_json(e), ttl) for e in events])

    def get_pod_events(self, job_id: str, instance: int, run_id: int | None = None,
                       limit: int | None = None) -> list[PodEvent]:
        n = NO_LIMIT if limit is None else limit
        if n == 0:
            return []
        rows = (self.q("pod_events.get", job_id, instance, n) if run_id is None
                else self.q("pod_events.get_run", job_id, instance, run_id, n))
        return [codec.from_json(PodEvent, r["body"],
                                f"pod event of task {job_id}-{instance} run {r['run_id']}")
                for r in rows]

    def delete_pod_events(self, job_id: str, instance: int, from_run: int, to_run: int) -> None:
        self.q("pod_events.delete_runs", job_id, instance, from_run, to_run)

    def expire_pod_events(self, now: float | None = None) -> int:
        return 0  # rows carry a TTL; Cassandra removes them

    # -- updates -----------------------------------------------------------
    def create_update(self, update: UpdateInfo) -> UpdateInfo:
        stored = dataclasses.replace(update, revision=1)
        self.q("updates_by_job.add", update.job_id, update.update_id)
        if not applied(self.q1("update_info.create", update.update_id, update.job_id, 1,
                               update.state.value, update.creation_time,
                               codec.to_json(stored))):
            raise AlreadyExists(f"update {update.update_id} already exists")
        return stored

    def get_update(self, update_id: str) -> UpdateInfo:
        row = self.q1("update_info.get", update_id)
        if row is None:
            raise NotFound(f"update {update_id} not found")
        return codec.from_json(UpdateInfo, row["body"], update_entity(update_id))

    def update_update(self, update: UpdateInfo) -> UpdateInfo:
        stored = dataclasses.replace(update, revision=update.revision + 1)
        res = self.q1("update_info.cas", stored.revision, stored.state.value,
                      stored.creation_time, codec.to_json(stored), update.update_id,
                      update.revision)
        if applied(res):
            return stored
        if res is None or res.get("revision") is None:
            raise NotFound(f"update {update.update_id} not found")
        raise Conflict(f"update {update.update_id} is at revision {res['revision']}, "
                       f"not {update.revision}")

    def get_updates_for_job(self, job_id: str) -> list[UpdateInfo]:
        ids = [str(r["update_id"]) for r in self.q("updates_by_job.get", job_id)]
        results = self.many("update_info.get", [(i,) for i in ids])
        updates = [codec.from_json(UpdateInfo, rows[0]["body"], update_entity(i))
                   for i, rows in zip(ids, results, strict=True) if rows]
        updates.sort(key=lambda u: (u.creation_time, u.update_id), reverse=True)
        return [u for u in updates if u.job_id == job_id]

    def delete_update(self, update_id: str) -> None:
        row = self.q1("update_info.get", update_id)
        self.q("workflow_events.delete", update_id)
        if row is not None:
            self.q("updates_by_job.remove", row["job_id"], update_id)
        self.q("update_info.delete", update_id)

    def add_workflow_event(self, event: WorkflowEvent) -> None:
        instance = -1 if event.instance is None else event.instance
        self.q("workflow_events.add", event.update_id, instance, time_key(event.time),
               event.state.value, codec.to_json(event))

    def get_workflow_events(self, update_id: str, instance: int | None = None,
                            limit: int | None = None) -> list[WorkflowEvent]:
        n = NO_LIMIT if limit is None else limit
        if n == 0:
            return []
        rows = self.q("workflow_events.get", update_id, -1 if instance is None else instance, n)
        return [codec.from_json(WorkflowEvent, r["body"], f"workflow event of update {update_id}")
                for r in rows]
