"""Contracts of the job tables: configs, runtime, index and query, names, the active set.

Conventions shared by every storage Protocol (see also peloton/storage/README.md):
- Reads of one entity raise `NotFound` when it does not exist; "list" reads
  return an empty collection instead.  A method documented to return
  `X | None` returns None for "absent" and never raises NotFound.
- Every runtime write is a compare-and-set: the value passed carries the
  `revision` the caller last read; the store writes it only if the stored
  revision is still that one, stores it with `revision + 1` and returns the
  stored value.  A lost race raises `Conflict` and changes nothing.
- Deletes are idempotent (deleting what is absent is not an error).
- A lost database connection is retried with backoff, then raises
  `Unavailable`; a stored blob that cannot be decoded raises
  `DataCorruption` naming the entity; no write is ever half applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.task import TaskSpec
from peloton.storage.query import JobQuery, JobQueryResult


class JobConfigReads(Protocol):
    """Reading job configurations (JobConfigStore's reads)."""

    def get_job_config(self, job_id: str, version: int | None = None) -> JobSpec:
        """One config version; None means the newest.  NotFound if absent."""
        ...

    def get_job_config_versions(self, job_id: str) -> list[int]:
        """All stored config versions of a job, ascending ([] if none)."""
        ...


class JobConfigStore(JobConfigReads, Protocol):
    """Versioned job configurations (Peloton's job_config table); versions are immutable."""

    def create_job(self, job_id: str, spec: JobSpec, runtime: JobRuntime) -> JobRuntime:
        """Create a job: config version `spec.version`, runtime at revision 1, its index
        entry, its name in the name history, and (unless the runtime is terminal) its
        membership of the active set - all or nothing.

        Raises AlreadyExists if the job has a runtime already.  Retrying a create whose
        outcome was unknown is safe: if this exact config is stored but the rest is not,
        the rest is written.  Returns the stored runtime (revision 1).
        """
        ...

    def create_job_with_tasks(self, job_id: str, spec: JobSpec, runtime: JobRuntime,
                              default: TaskSpec, overrides: Mapping[int, TaskSpec]) -> JobRuntime:
        """`create_job` and `create_task_configs` of version `spec.version` as one unit: on
        any failure nothing is left (no task config without its job).  SQL: one
        transaction.  Cassandra: the config row's lightweight transaction claims the id
        before anything else is written, and a failure after it removes what was written
        (every step is an idempotent upsert, so a retry of an interrupted create finishes
        it).  Raises AlreadyExists like `create_job`."""
        ...

    def add_job_config(self, job_id: str, spec: JobSpec) -> None:
        """Store config version `spec.version` of an existing job and re-index the job
        from it if it is the newest version.  AlreadyExists if that version exists with
        other content (storing identical content again is a no-op); NotFound if the job
        does not exist."""
        ...

    def get_max_job_config_version(self, job_id: str) -> int:
        """The newest config version; NotFound if the job has none."""
        ...

    def delete_job_configs(self, job_id: str, versions: Sequence[int]) -> None:
        """Prune old config versions (and their task configs).  Idempotent."""
        ...

    def delete_job(self, job_id: str) -> None:
        """Remove every trace of a job: configs, runtime, index entry, name history
        entries, active-set membership, task configs and runtimes, pod events, and its
        updates with their workflow events.  Idempotent."""
        ...


class JobRuntimeReads(Protocol):
    """Reading job runtimes (JobRuntimeStore's reads)."""

    def get_job_runtime(self, job_id: str) -> JobRuntime:
        """The stored runtime; NotFound if the job does not exist."""
        ...


class JobRuntimeStore(JobRuntimeReads, Protocol):
    """The mutable state of each job, written by compare-and-set on `revision`."""

    def update_job_runtime(self, job_id: str, runtime: JobRuntime) -> JobRuntime:
        """CAS on `runtime.revision`; returns the stored runtime (revision + 1) and
        updates the job's index entry with it.  Conflict if the stored revision
        differs; NotFound if the job does not exist."""
        ...


class JobQueryStore(Protocol):
    """The job index: search by state, owner, pool, labels, name, keywords, times."""

    def query_jobs(self, query: JobQuery) -> JobQueryResult:
        """One sorted page of matching jobs and the total number of matches.
        Jobs whose runtime is not stored (mid-create, mid-copy) are not listed."""
        ...


class JobNameStore(Protocol):
    """Job name -> job id history (Peloton's job_name_to_id); written by create_job."""

    def get_job_id_by_name(self, name: str) -> str | None:
        """The job that most recently took `name`; None if no job ever had it."""
        ...

    def get_job_ids_by_name(self, name: str) -> list[str]:
        """Every job that had `name`, most recent first ([] if none)."""
        ...


class ActiveJobReads(Protocol):
    """Reading the active-job set (ActiveJobStore's reads)."""

    def get_active_jobs(self) -> list[str]:
        """Ids of all active jobs, sorted."""
        ...


class ActiveJobStore(ActiveJobReads, Protocol):
    """The set of non-terminal jobs the job manager recovers on start."""

    def add_active_job(self, job_id: str) -> None:
        """Mark a job active.  Idempotent."""
        ...

    def delete_active_job(self, job_id: str) -> None:
        """Forget a job from the active set.  Idempotent."""
        ...
