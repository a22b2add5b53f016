"""SQL job tables: versioned configs, the runtime CAS, names, the active set, delete.

A job's runtime and its index entry are one `jobs` row (see tables.py), so
creating a job, or storing a newer config, re-indexes it in the same
transaction that writes it: the index is never behind the data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.storage_records import JobNameEntry
from peloton.core.model.task import TaskSpec
from peloton.storage import codec
from peloton.storage.job_index import index_fields, job_runtime_entity, runtime_columns
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import (
    active_jobs,
    job_configs,
    job_labels,
    job_names,
    jobs,
    pod_events,
    task_configs,
    task_runtimes,
    updates,
    workflow_events,
)
from peloton.storage.sql.task_rows import task_config_rows


def reindex(conn: Connection, job_id: str, spec: JobSpec | None = None) -> None:
    """Point the job's index columns and label rows at config `spec` (default: the
    newest stored config).  Creates a runtime-less `jobs` row if there is none."""
    if spec is None:
        body = conn.execute(sa.select(job_configs.c.body)
                            .where(job_configs.c.job_id == job_id)
                            .order_by(job_configs.c.version.desc()).limit(1)).scalar()
        if body is None:
            return
        spec = codec.from_json(JobSpec, body, f"job config of job {job_id}")
    cols = index_fields(spec).columns()
    if conn.execute(sa.update(jobs).where(jobs.c.job_id == job_id).values(**cols)).rowcount == 0:
        conn.execute(sa.insert(jobs).values(job_id=job_id, **cols))
    conn.execute(sa.delete(job_labels).where(job_labels.c.job_id == job_id))
    labels = {(lb.key, lb.value) for lb in spec.labels}
    if labels:
        conn.execute(sa.insert(job_labels),
                     [{"job_id": job_id, "key": k, "value": v} for k, v in sorted(labels)])


def name_row(entry: JobNameEntry) -> dict[str, Any]:
    """The job_names row of a name history entry."""
    return {"name": entry.name, "job_id": entry.job_id, "update_time": entry.time,
            "body": codec.to_json(entry)}


#: Configs with at least this many per-instance specs, or stored bodies of at least this
#: many characters, are encoded / decoded off the hub.
BIG_CONFIG_INSTANCES = 64
BIG_CONFIG_BYTES = 1024 * 1024
T = TypeVar("T")


def _config_row(job_id: str, spec: JobSpec, body: str) -> dict[str, object]:
    """A job_configs row, passed to `execute` as parameters: a value built into the statement
    (`insert().values(body=...)`) stays referenced by SQLAlchemy's statement cache, which
    kept the last few configs' JSON (36 MB each for 800 per-instance configs) for good."""
    return {"job_id": job_id, "version": spec.version, "created_at": spec.created_at, "body": body}


class SqlJobs:
    """JobConfigStore, JobRuntimeStore, JobNameStore and ActiveJobStore over SQL."""

    db: Database

    # -- configs -----------------------------------------------------------
    def create_job(self, job_id: str, spec: JobSpec, runtime: JobRuntime) -> JobRuntime:
        stored = dataclasses.replace(runtime, revision=1)
        self.db.run("create job", self._create_job_tx(job_id, spec, runtime, stored),
                    duplicate=lambda: AlreadyExists(f"job {job_id} already exists"))
        return stored

    def create_job_with_tasks(self, job_id: str, spec: JobSpec, runtime: JobRuntime,
                              default: TaskSpec, overrides: Mapping[int, TaskSpec]) -> JobRuntime:
        stored = dataclasses.replace(runtime, revision=1)
        body, rows = self._encode(lambda: (
            codec.to_json(spec), task_config_rows(job_id, spec.version, default, overrides)),
            len(overrides))
        create = self._create_job_tx(job_id, spec, runtime, stored, body)

        def tx(conn: Connection) -> None:
            create(conn)  # first: it raises AlreadyExists before a task config is touched
            conn.execute(sa.delete(task_configs).where(task_configs.c.job_id == job_id,
                                                       task_configs.c.version == spec.version))
            conn.execute(sa.insert(task_configs), rows)

        self.db.run("create job", tx, duplicate=lambda: AlreadyExists(f"job {job_id} already exists"))
        return stored

    def _encode(self, fn: Callable[[], T], instances: int) -> T:
        # A config with many per-instance specs is encoded off the hub (Database.compute).
        return self.db.compute(fn) if instances >= BIG_CONFIG_INSTANCES else fn()

    def _create_job_tx(self, job_id: str, spec: JobSpec, runtime: JobRuntime,
                       stored: JobRuntime, body: str | None = None
                       ) -> Callable[[Connection], None]:
        body = codec.to_json(spec) if body is None else body

        def tx(conn: Connection) -> None:
            rev = conn.execute(sa.select(jobs.c.revision)
                               .where(jobs.c.job_id == job_id)).scalar()
            if rev is not None:
                raise AlreadyExists(f"job {job_id} already exists")
            old = conn.execute(sa.select(job_configs.c.body).where(
                job_configs.c.job_id == job_id, job_configs.c.version == spec.version)).scalar()
            if old is not None and old != body:
                raise AlreadyExists(f"job {job_id} already has a different config "
                                    f"version {spec.version}")
            if old is None:
                conn.execute(sa.insert(job_configs), _config_row(job_id, spec, body))
            reindex(conn, job_id, spec)
            conn.execute(sa.update(jobs).where(jobs.c.job_id == job_id)
                         .values(**runtime_columns(stored)))
            entry = JobNameEntry(spec.name, job_id, runtime.creation_time or spec.created_at)
            self.db.upsert(conn, job_names, [name_row(entry)])
            if not runtime.state.terminal:
                self.db.upsert(conn, active_jobs, [{"job_id": job_id}])

        return tx

    def add_job_config(self, job_id: str, spec: JobSpec) -> None:
        # Only a plain dict leaves the hub: a job manager's cached spec may hold a mapping
        # that reads through the hub's own objects (jobmgr/task_configs.py).
        big = len(spec.instance_tasks) if isinstance(spec.instance_tasks, dict) else 0
        body = self._encode(lambda: codec.to_json(spec), big)

        def tx(conn: Connection) -> None:
            indexed = conn.execute(sa.select(jobs.c.config_version)
                                   .where(jobs.c.job_id == job_id)).first()
            if indexed is None:
                raise NotFound(f"job {job_id} not found")
            old = conn.execute(sa.select(job_configs.c.body).where(
                job_configs.c.job_id == job_id, job_configs.c.version == spec.version)).scalar()
            if old == body:
                return
            if old is not None:
                raise AlreadyExists(f"job {job_id} config version {spec.version} exists")
            conn.execute(sa.insert(job_configs), _config_row(job_id, spec, body))
            if spec.version >= (indexed[0] or 0):
                reindex(conn, job_id, spec)

        self.db.run("add job config", tx, duplicate=lambda: AlreadyExists(
            f"job {job_id} config version {spec.version} exists"))

    def get_job_config(self, job_id: str, version: int | None = None) -> JobSpec:
        q = sa.select(job_configs.c.version, job_configs.c.body).where(
            job_configs.c.job_id == job_id)
        q = (q.order_by(job_configs.c.version.desc()).limit(1) if version is None
             else q.where(job_configs.c.version == version))
        row = self.db.run("get job config", lambda c: c.execute(q).first(), write=False)
        if row is None:
            raise NotFound(f"job {job_id} config{'' if version is None else f' v{version}'} "
                           "not found")
        what = f"job config v{row.version} of job {job_id}"
        if len(row.body) >= BIG_CONFIG_BYTES:  # off the hub: seconds for 800 instance configs
            return self.db.compute(lambda: codec.from_json(JobSpec, row.body, what))
        return codec.from_json(JobSpec, row.body, what)

    def get_job_config_versions(self, job_id: str) -> list[int]:
        q = (sa.select(job_configs.c.version).where(job_configs.c.job_id == job_id)
             .order_by(job_configs.c.version))
        return self.db.run("list job config versions",
                           lambda c: [int(v) for v in c.execute(q).scalars()], write=False)

    def get_max_job_config_version(self, job_id: str) -> int:
        q = sa.select(sa.func.max(job_configs.c.version)).where(job_configs.c.job_id == job_id)
        found = self.db.run("get max job config version", lambda c: c.execute(q).scalar(),
                            write=False)
        if found is None:
            raise NotFound(f"job {job_id} has no config")
        return int(found)

    def delete_job_configs(self, job_id: str, versions: Sequence[int]) -> None:
        def tx(conn: Connection) -> None:
            conn.execute(sa.delete(job_configs).where(job_configs.c.job_id == job_id,
                                                      job_configs.c.version.in_(versions)))
            conn.execute(sa.delete(task_configs).where(task_configs.c.job_id == job_id,
                                                       task_configs.c.version.in_(versions)))
        if versions:
            self.db.run("delete job configs", tx)

    def delete_job(self, job_id: str) -> None:
        def tx(conn: Connection) -> None:
            update_ids = sa.select(updates.c.update_id).where(updates.c.job_id == job_id)
            conn.execute(sa.delete(workflow_events)
                         .where(workflow_events.c.update_id.in_(update_ids)))
            for table in (updates, pod_events, task_runtimes, task_configs, active_jobs,
                          job_names, job_labels, jobs, job_configs):
                conn.execute(sa.delete(table).where(table.c.job_id == job_id))
        self.db.run("delete job", tx)

    # -- runtime -----------------------------------------------------------
    def get_job_runtime(self, job_id: str) -> JobRuntime:
        q = sa.select(jobs.c.runtime).where(jobs.c.job_id == job_id,
                                            jobs.c.revision.is_not(None))
        body = self.db.run("get job runtime", lambda c: c.execute(q).scalar(), write=False)
        if body is None:
            raise NotFound(f"job {job_id} not found")
        return codec.from_json(JobRuntime, body, job_runtime_entity(job_id))

    def update_job_runtime(self, job_id: str, runtime: JobRuntime) -> JobRuntime:
        stored = dataclasses.replace(runtime, revision=runtime.revision + 1)

        def tx(conn: Connection) -> None:
            done = conn.execute(sa.update(jobs).where(
                jobs.c.job_id == job_id, jobs.c.revision == runtime.revision,
            ).values(**runtime_columns(stored))).rowcount
            if done == 1:
                return
            rev = conn.execute(sa.select(jobs.c.revision).where(jobs.c.job_id == job_id)).scalar()
            if rev is None:
                raise NotFound(f"job {job_id} not found")
            raise Conflict(f"job {job_id}: runtime is at revision {rev}, "
                           f"not {runtime.revision}")

        self.db.run("update job runtime", tx)
        return stored

    # -- names and the active set -------------------------------------------
    def get_job_id_by_name(self, name: str) -> str | None:
        ids = self.get_job_ids_by_name(name)
        return ids[0] if ids else None

    def get_job_ids_by_name(self, name: str) -> list[str]:
        q = (sa.select(job_names.c.job_id).where(job_names.c.name == name)
             .order_by(job_names.c.update_time.desc(), job_names.c.job_id.desc()))
        return self.db.run("get job ids by name", lambda c: list(c.execute(q).scalars()),
                           write=False)

    def add_active_job(self, job_id: str) -> None:
        self.db.run("add active job",
                    lambda c: self.db.upsert(c, active_jobs, [{"job_id": job_id}]))

    def delete_active_job(self, job_id: str) -> None:
        self.db.run("delete active job", lambda c: c.execute(
            sa.delete(active_jobs).where(active_jobs.c.job_id == job_id)))

    def get_active_jobs(self) -> list[str]:
        q = sa.select(active_jobs.c.job_id).order_by(active_jobs.c.job_id)
        return self.db.run("get active jobs", lambda c: list(c.execute(q).scalars()),
                           write=False)
