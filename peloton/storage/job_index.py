"""The job index entry: which columns of a job every backend indexes, and back to a summary.

Both backends store, per job, the fields a job query filters or sorts on
(taken from the newest config version and the runtime) next to the
runtime blob, and rebuild a `JobSummary` from them without reading the
config.  Keeping that mapping in one place is what makes the SQL and
Cassandra answers to the same query identical.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from peloton.core.errors import DataCorruption
from peloton.core.model.constraints import Label
from peloton.core.model.job import JobRuntime, JobSpec, JobSummary, SlaSpec
from peloton.core.states import JobType
from peloton.storage import codec
from peloton.storage.query import search_text


@dataclass(frozen=True, slots=True)
class IndexFields:
    """The config-derived columns of a job's index entry."""

    config_version: int
    name: str
    name_lower: str
    job_type: str
    owner: str
    owning_team: str
    respool_id: str
    instance_count: int
    labels: str
    sla: str
    search_text: str

    def columns(self) -> dict[str, Any]:
        """As a column -> value mapping."""
        return {f: getattr(self, f) for f in self.__slots__}


def index_fields(spec: JobSpec) -> IndexFields:
    """The index columns of a job at config `spec`."""
    return IndexFields(
        config_version=spec.version, name=spec.name, name_lower=spec.name.lower(),
        job_type=spec.type.value, owner=spec.owner, owning_team=spec.owning_team,
        respool_id=spec.respool_id, instance_count=spec.instance_count,
        labels=json.dumps([[lb.key, lb.value] for lb in spec.labels], separators=(",", ":")),
        sla=codec.to_json(spec.sla),
        search_text=search_text(spec.name, spec.owner, spec.owning_team, spec.labels))


def runtime_columns(runtime: JobRuntime) -> dict[str, Any]:
    """The runtime columns of a job's index entry (and of the SQL `jobs` row)."""
    return {"revision": runtime.revision, "state": runtime.state.value,
            "creation_time": runtime.creation_time,
            "completion_time": runtime.completion_time,
            "update_time": runtime.update_time, "runtime": codec.to_json(runtime)}


def decode_labels(text: str | None, job_id: str) -> tuple[Label, ...]:
    """Labels stored by `index_fields`; DataCorruption naming the job if unreadable."""
    try:
        pairs = json.loads(text or "[]")
        return tuple(Label(str(k), str(v)) for k, v in pairs)
    except (ValueError, TypeError) as exc:
        raise DataCorruption(f"job index entry of job {job_id} is corrupt: labels: {exc}") \
            from exc


def summary(job_id: str, row: Any) -> JobSummary:
    """A JobSummary from an index row (attribute or mapping access to the columns above)."""
    get = row.get if isinstance(row, dict) else (lambda name: getattr(row, name))
    runtime = codec.from_json(JobRuntime, get("runtime"), f"job runtime of job {job_id}")
    try:
        job_type = JobType(str(get("job_type")))
    except ValueError as exc:
        raise DataCorruption(f"job index entry of job {job_id} is corrupt: {exc}") from exc
    return JobSummary(
        job_id=job_id, name=get("name") or "", type=job_type, owner=get("owner") or "",
        owning_team=get("owning_team") or "", respool_id=get("respool_id") or "",
        instance_count=int(get("instance_count") or 0),
        labels=decode_labels(get("labels"), job_id), runtime=runtime,
        sla=codec.from_json(SlaSpec, get("sla") or "{}", f"job index entry of job {job_id}"))


def job_runtime_entity(job_id: str) -> str:
    """How errors name a job's runtime."""
    return f"job runtime of job {job_id}"
