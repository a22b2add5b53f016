"""Cassandra cron job table: create `IF NOT EXISTS`, updates `IF revision = ?`."""

from __future__ import annotations

import dataclasses

from peloton.core.cron.model import CronJob
from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.storage import codec
from peloton.storage.cassandra.base import CassandraBase, applied


class CassandraCron(CassandraBase):
    """CronJobStore over Cassandra (lightweight transactions for every write but delete)."""

    def create_cron_job(self, job: CronJob) -> CronJob:
        stored = dataclasses.replace(job, revision=1)
        if not applied(self.q1("cron_jobs.create", job.name, 1, codec.to_json(stored))):
            raise AlreadyExists(f"cron job {job.name} already exists")
        return stored

    def get_cron_job(self, name: str) -> CronJob:
        row = self.q1("cron_jobs.get", name)
        if row is None:
            raise NotFound(f"cron job {name} not found")
        return codec.from_json(CronJob, row["body"], f"cron job {name}")

    def get_cron_jobs(self) -> list[CronJob]:
        jobs = [codec.from_json(CronJob, r["body"], f"cron job {r['name']}")
                for r in self.q("cron_jobs.all")]
        return sorted(jobs, key=lambda j: j.name)

    def update_cron_job(self, job: CronJob) -> CronJob:
        stored = dataclasses.replace(job, revision=job.revision + 1)
        res = self.q1("cron_jobs.cas", stored.revision, codec.to_json(stored), job.name, job.revision)
        if applied(res):
            return stored
        if res is None or res.get("revision") is None:
            raise NotFound(f"cron job {job.name} not found")
        raise Conflict(f"cron job {job.name} is at revision {res['revision']}, not {job.revision}")

    def delete_cron_job(self, name: str) -> bool:
        existed = self.q1("cron_jobs.get", name) is not None
        self.q("cron_jobs.delete", name)
        return existed
