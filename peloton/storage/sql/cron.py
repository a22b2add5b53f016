"""SQL cron job table: one row per name, the revision as a column for the compare-and-set."""

from __future__ import annotations

import dataclasses
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.core.cron.model import CronJob
from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.storage import codec
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import cron_jobs


def cron_row(job: CronJob) -> dict[str, Any]:
    """The cron_jobs row of a cron job."""
    return {"name": job.name, "revision": job.revision, "body": codec.to_json(job)}


class SqlCron:
    """CronJobStore over SQL."""

    db: Database

    def create_cron_job(self, job: CronJob) -> CronJob:
        stored = dataclasses.replace(job, revision=1)
        self.db.run("create cron job", lambda c: c.execute(sa.insert(cron_jobs), [cron_row(stored)]),
                    duplicate=lambda: AlreadyExists(f"cron job {job.name} already exists"))
        return stored

    def get_cron_job(self, name: str) -> CronJob:
        q = sa.select(cron_jobs.c.body).where(cron_jobs.c.name == name)
        body = self.db.run("get cron job", lambda c: c.execute(q).scalar(), write=False)
        if body is None:
            raise NotFound(f"cron job {name} not found")
        return codec.from_json(CronJob, body, f"cron job {name}")

    def get_cron_jobs(self) -> list[CronJob]:
        q = sa.select(cron_jobs.c.name, cron_jobs.c.body).order_by(cron_jobs.c.name)
        rows = self.db.run("list cron jobs", lambda c: list(c.execute(q)), write=False)
        return [codec.from_json(CronJob, r.body, f"cron job {r.name}") for r in rows]

    def update_cron_job(self, job: CronJob) -> CronJob:
        stored = dataclasses.replace(job, revision=job.revision + 1)
        row = cron_row(stored)
        del row["name"]

        def tx(conn: Connection) -> None:
            c = cron_jobs.c
            done = conn.execute(sa.update(cron_jobs).where(c.name == job.name, c.revision == job.revision)
                                .values(**row)).rowcount
            if done == 1:
                return
            rev = conn.execute(sa.select(c.revision).where(c.name == job.name)).scalar()
            if rev is None:
                raise NotFound(f"cron job {job.name} not found")
            raise Conflict(f"cron job {job.name} is at revision {rev}, not {job.revision}")

        self.db.run("update cron job", tx)
        return stored

    def delete_cron_job(self, name: str) -> bool:
        q = sa.delete(cron_jobs).where(cron_jobs.c.name == name)
        return bool(self.db.run("delete cron job", lambda c: c.execute(q).rowcount))
