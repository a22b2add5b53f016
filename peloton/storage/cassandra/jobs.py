"""Cassandra job tables: configs (LWT create), runtime (LWT CAS), names, active set, delete.

create_job order (so that a retry after a crash finishes the job):
1. the config row, `IF NOT EXISTS` - claims the job id; an identical row
   means this is a retry, a different one that the id is taken;
2. index entry, lookup rows, name history and active set (one logged batch);
3. the runtime row, `IF NOT EXISTS` - from here on the job exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from peloton.core.errors import AlreadyExists, Conflict, NotFound, Unavailable
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.storage_records import JobNameEntry
from peloton.core.model.task import TaskSpec
from peloton.storage import codec
from peloton.storage.cassandra.base import CassandraBase, applied, key_of
from peloton.storage.cassandra.index import JobIndexWriter
from peloton.storage.job_index import job_runtime_entity

ACTIVE_SHARD = 0


class CassandraJobs(CassandraBase, JobIndexWriter):
    """JobConfigStore, JobRuntimeStore, JobNameStore and ActiveJobStore over Cassandra."""

    # -- configs -----------------------------------------------------------
    def create_job(self, job_id: str, spec: JobSpec, runtime: JobRuntime) -> JobRuntime:
        body = codec.to_json(spec)
        claim = self.q1("job_config.create", job_id, spec.version, spec.created_at, body)
        if not applied(claim) and (claim or {}).get("body") != body:
            raise AlreadyExists(f"job {job_id} already has a different config "
                                f"version {spec.version}")
        if self.q1("job_runtime.get", job_id) is not None:
            raise AlreadyExists(f"job {job_id} already exists")
        stored = dataclasses.replace(runtime, revision=1)
        entry = JobNameEntry(spec.name, job_id, runtime.creation_time or spec.created_at)
        items = self.index_config_items(job_id, spec, None)
        items += self.index_runtime_items(job_id, stored, None)
        items += [("job_name.add", (key_of(entry.name), job_id, entry.time, codec.to_json(entry))),
                  ("job_names_by_job.add", (job_id, entry.name))]
        if not runtime.state.terminal:
            items.append(("active_jobs.add", (ACTIVE_SHARD, job_id)))
        self.batch(items)
        if not applied(self.q1("job_runtime.create", job_id, 1, stored.state.value,
                               codec.to_json(stored))):
            raise AlreadyExists(f"job {job_id} already exists")
        return stored

    def create_job_with_tasks(self, job_id: str, spec: JobSpec, runtime: JobRuntime,
                              default: TaskSpec, overrides: Mapping[int, TaskSpec]) -> JobRuntime:
        body = codec.to_json(spec)
        claim = self.q1("job_config.create", job_id, spec.version, spec.created_at, body)
        if not applied(claim) and (claim or {}).get("body") != body:
            raise AlreadyExists(f"job {job_id} already has a different config "
                                f"version {spec.version}")
        # The id is ours (or this is a retry of our own create): writing the task configs
        # cannot touch another job's.
        try:
            self.create_task_configs(job_id, spec.version, default, overrides)  # type: ignore[attr-defined]
            return self.create_job(job_id, spec, runtime)
        except Unavailable:
            raise  # unknown outcome: a retry finishes the create
        except AlreadyExists:
            if applied(claim):
                self.delete_job(job_id)
            raise
        except Exception:
            # A permanent failure: leave nothing of this job behind.
            self.delete_job(job_id)
            raise

    def add_job_config(self, job_id: str, spec: JobSpec) -> None:
        newest = self.q1("job_config.newest", job_id, 1)
        if newest is None:
            raise NotFound(f"job {job_id} not found")
        body = codec.to_json(spec)
        claim = self.q1("job_config.create", job_id, spec.version, spec.created_at, body)
        if not applied(claim):
            if (claim or {}).get("body") == body:
                return
            raise AlreadyExists(f"job {job_id} config version {spec.version} exists")
        if spec.version >= int(newest["version"]):
            self.batch(self.index_config_items(job_id, spec, self.q1("job_index.get", job_id)))

    def get_job_config(self, job_id: str, version: int | None = None) -> JobSpec:
        row = (self.q1("job_config.newest", job_id, 1) if version is None
               else self.q1("job_config.get", job_id, version))
        if row is None:
            raise NotFound(f"job {job_id} config{'' if version is None else f' v{version}'} "
                           "not found")
        return codec.from_json(JobSpec, row["body"],
                               f"job config v{row['version']} of job {job_id}")

    def get_job_config_versions(self, job_id: str) -> list[int]:
        return sorted(int(r["version"]) for r in self.q("job_config.versions", job_id))

    def get_max_job_config_version(self, job_id: str) -> int:
        row = self.q1("job_config.newest", job_id, 1)
        if row is None:
            raise NotFound(f"job {job_id} has no config")
        return int(row["version"])

    def delete_job_configs(self, job_id: str, versions: Sequence[int]) -> None:
        for v in versions:
            self.q("task_config.delete", job_id, v)
            self.q("task_config_versions.remove", job_id, v)
            self.q("job_config.delete", job_id, v)

    def delete_job(self, job_id: str) -> None:
        for row in self.q("updates_by_job.get", job_id):
            self.q("workflow_events.delete", row["update_id"])
            self.q("update_info.delete", row["update_id"])
        self.q("updates_by_job.delete", job_id)
        instances = [(job_id, r["instance_id"]) for r in self.q("pod_event_instances.get", job_id)]
        self.many("pod_events.delete", instances)
        self.q("pod_event_instances.delete", job_id)
        self.q("task_runtime.delete_all", job_id)
        for row in self.q("task_config_versions.get", job_id):
            self.q("task_config.delete", job_id, row["version"])
        self.q("task_config_versions.delete", job_id)
        for row in self.q("job_names_by_job.get", job_id):
            self.q("job_name.remove", key_of(row["job_name"]), job_id)
        self.q("job_names_by_job.delete", job_id)
        self.q("active_jobs.remove", ACTIVE_SHARD, job_id)
        self.batch(self.index_delete_items(job_id, self.q1("job_index.get", job_id)))
        # The runtime last but one and the configs last: a crash midway leaves a job that
        # still exists and can be deleted again.
        self.q("job_runtime.delete", job_id)
        self.q("job_config.delete_all", job_id)

    # -- runtime -----------------------------------------------------------
    def get_job_runtime(self, job_id: str) -> JobRuntime:
        row = self.q1("job_runtime.get", job_id)
        if row is None:
            raise NotFound(f"job {job_id} not found")
        return codec.from_json(JobRuntime, row["body"], job_runtime_entity(job_id))

    def update_job_runtime(self, job_id: str, runtime: JobRuntime) -> JobRuntime:
        stored = dataclasses.replace(runtime, revision=runtime.revision + 1)
        res = self.q1("job_runtime.cas", stored.revision, stored.state.value,
                      codec.to_json(stored), job_id, runtime.revision)
        if not applied(res):
            if res is None or res.get("revision") is None:
                raise NotFound(f"job {job_id} not found")
            raise Conflict(f"job {job_id}: runtime is at revision {res['revision']}, "
                           f"not {runtime.revision}")
        # Only the CAS winner writes the index, after its write is durable.
        old = self.q1("job_index.get", job_id)
        self.batch(self.index_runtime_items(job_id, stored, old))
        return stored

    # -- names and the active set ---------------------------------------------
    def get_job_id_by_name(self, name: str) -> str | None:
        ids = self.get_job_ids_by_name(name)
        return ids[0] if ids else None

    def get_job_ids_by_name(self, name: str) -> list[str]:
        rows = self.q("job_name.get", key_of(name))
        rows.sort(key=lambda r: (r["update_time"], r["job_id"]), reverse=True)
        return [str(r["job_id"]) for r in rows]

    def add_active_job(self, job_id: str) -> None:
        self.q("active_jobs.add", ACTIVE_SHARD, job_id)

    def delete_active_job(self, job_id: str) -> None:
        self.q("active_jobs.remove", ACTIVE_SHARD, job_id)

    def get_active_jobs(self) -> list[str]:
        return sorted(str(r["job_id"]) for r in self.q("active_jobs.all", ACTIVE_SHARD))
