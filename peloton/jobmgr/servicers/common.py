"""Small reads the v1alpha and v0 update servicers share: summaries, workflows, pod names, specs."""

from __future__ import annotations

from typing import Any

from peloton.api.convert import update_options
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.ids import TaskId
from peloton.core.model.job import JobRuntime, JobSpec, JobSummary
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.jobmgr.cache import JobCache
from peloton.storage import ReadOnlyStore


def job_summary(job_id: str, spec: JobSpec, runtime: JobRuntime) -> JobSummary:
    """What a job query returns for a job, built from its config and runtime."""
    return JobSummary(job_id=job_id, name=spec.name, type=spec.type, owner=spec.owner,
                      owning_team=spec.owning_team, respool_id=spec.respool_id,
                      instance_count=spec.instance_count, labels=spec.labels, runtime=runtime,
                      sla=spec.sla)


def workflow_of(cache: JobCache, store: ReadOnlyStore, job_id: str,
                runtime: JobRuntime) -> UpdateInfo | None:
    """The job's current workflow (the cached one if it is the runtime's), or None."""
    if not runtime.update_id:
        return None
    job = cache.get(job_id)
    if job is not None and job.update is not None and job.update.update_id == runtime.update_id:
        return job.update
    try:
        return store.get_update(runtime.update_id)
    except NotFound:
        return None


def pod_name(value: str, field: str = "pod_name") -> TaskId:
    """A pod name `<job uuid>-<instance>` -> its task id (InvalidArgument naming `field`)."""
    try:
        return TaskId.parse(value)
    except InvalidArgument:
        raise InvalidArgument(f"{field} must look like '<job uuid>-<instance>', got {value!r}",
                              field=field) from None


def job_spec_at(cache: JobCache, store: ReadOnlyStore, job_id: str, version: int) -> JobSpec:
    """One config version of a job (from the cache when loaded there); NotFound if unknown."""
    job = cache.get(job_id)
    if job is not None and version in job.specs:
        return job.specs[version]
    return store.get_job_config(job_id, version or None)


def opaque(request: Any) -> str | None:
    """The request's opaque data if it sent one (None: keep what the workflow has)."""
    return str(request.opaque_data.data) if request.HasField("opaque_data") else None


def version(request: Any) -> str:
    """The request's entity version ("" when absent)."""
    return str(request.version.value) if request.HasField("version") else ""


def with_options(spec: UpdateSpec, context: Any) -> UpdateSpec:
    """`spec` with the update options the call carried in its metadata (our extension,
    proto/pelotonpy/api/update), checked; unchanged when it carried none."""
    metadata = context.invocation_metadata() if hasattr(context, "invocation_metadata") else ()
    return update_options.apply(spec, update_options.from_metadata(metadata))
