"""Finding bridge jobs in Peloton and reading their current configuration cheaply.

* `job_id(key)`: GetJobIDFromJobName (Peloton keeps name -> ids, newest first,
  even for deleted jobs, so callers treat a later NotFound as "no job").
* `query(role, env, name)`: QueryJobs on the bridge's job labels, paged; one
  call answers getJobSummary / getJobs / getRoleSummary for a whole role,
  where Peloton's bridge made one GetJob call per job.
* `current(summary)`: the job's TaskConfig, fetched with GetJob only when the
  job's entity version changed since we last looked (the version moves on
  every spec or workflow change), so steady-state listings cost one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aurorabridge import labels
from aurorabridge.atop.job_key import JobKey
from aurorabridge.ports import PelotonPort
from aurorabridge.ptoa.task_config import TaskConfigReader
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.query import query_pb2
from peloton.core.errors import NotFound

MAX_CACHED_JOBS = 100_000


@dataclass(frozen=True, slots=True)
class JobConfig:
    """What Aurora listings need from a job's spec."""

    version: str
    owner: str
    instance_count: int
    task_config: Any


class JobDirectory:
    """Job lookups over a PelotonPort, with a per-job config cache."""

    def __init__(self, port: PelotonPort, reader: TaskConfigReader, page_size: int = 1000) -> None:
        self._port = port
        self._reader = reader
        self._page = page_size
        self._configs: dict[str, JobConfig] = {}

    def job_id(self, key: JobKey) -> str | None:
        """The id of the job named by `key`, or None."""
        try:
            resp = self._port.get_job_id_from_name(key.job_name)
        except NotFound:
            return None
        return str(resp.job_id[0].value) if resp.job_id else None

    def get(self, job_id: str, version: str = "") -> svc.GetJobResponse | None:
        """GetJob (full info plus current workflow); None if the job is gone."""
        try:
            return self._port.get_stateless_job(job_id, version=version)
        except NotFound:
            return None

    def query(self, role: str = "", environment: str = "",
              name: str = "") -> list[stateless_pb2.JobSummary]:
        """Summaries of bridge jobs matching the non-empty key parts (all pages)."""
        out: list[stateless_pb2.JobSummary] = []
        offset = 0
        while True:
            page = query_pb2.PaginationSpec(offset=offset, limit=self._page)
            wanted = labels.query_labels(role, environment, name)
            spec = stateless_pb2.QuerySpec(labels=wanted, pagination=page)
            resp = self._port.query_stateless_jobs(spec)
            records = list(resp.records)
            out.extend(r for r in records if _matches(r, role, environment, name))
            offset += len(records)
            if not records or len(records) < self._page or offset >= resp.pagination.total:
                return out

    def cached(self, summary: stateless_pb2.JobSummary) -> JobConfig | None:
        """The job's config if the cache holds it at the summary's entity version (no call)."""
        cached = self._configs.get(summary.job_id.value)
        version = summary.status.version.value
        return cached if cached is not None and version and cached.version == version else None

    def config(self, summary: stateless_pb2.JobSummary) -> JobConfig | None:
        """The job's current config, from cache when its entity version is unchanged."""
        cached = self.cached(summary)
        if cached is not None:
            return cached
        job_id = summary.job_id.value
        resp = self.get(job_id)
        if resp is None:
            self._configs.pop(job_id, None)
            return None
        return self.remember(job_id, resp.job_info)

    def remember(self, job_id: str, info: stateless_pb2.JobInfo) -> JobConfig:
        """Cache the config of a JobInfo just read."""
        spec = info.spec
        task = self._reader.task_config(spec.default_spec, spec.name, spec.owner, spec.sla)
        config = JobConfig(info.status.version.value, spec.owner, spec.instance_count, task)
        if len(self._configs) >= MAX_CACHED_JOBS:
            self._configs.clear()
        self._configs[job_id] = config
        return config


def _matches(summary: stateless_pb2.JobSummary, role: str, environment: str, name: str) -> bool:
    """Re-check the label query locally (an older jobmgr may ignore label filters)."""
    found = {lab.key: lab.value for lab in summary.labels}
    if found.get(labels.BRIDGE_JOB[0]) != labels.BRIDGE_JOB[1]:
        return False
    wanted = ((labels.ROLE_KEY, role), (labels.ENVIRONMENT_KEY, environment), (labels.NAME_KEY, name))
    return all(not v or found.get(k) == v for k, v in wanted)


def is_gone(summary_or_status: Any, instance_count: int) -> bool:
    """Whether Aurora should no longer list the job: killed (desired KILLED) or scaled to 0."""
    return instance_count == 0 or summary_or_status.desired_state == stateless_pb2.JOB_STATE_KILLED
