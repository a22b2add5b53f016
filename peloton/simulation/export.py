"""Read a live cluster's jobs from its store and archive (the exporter's I/O half).

`peloton simulate export --store URL --since 7d [--archive URL]` reads, for every
job created in [since, until):
- from the store (the storage gateway, any backend): the job's newest config
  (instances, default and per-instance task resources, SLA, constraint, pool
  id), its runtime (creation time) and its task runtimes (start and completion
  of each task's current run); pool ids become paths through the store's pools;
- from the archive (the archiver's sinks, read only): the same from each archived
  record's v0 JobInfo and TaskInfos.  A job in both is taken from the store.

It never writes to either.  What the jobs become is `export_model`'s business.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from google.protobuf import json_format

from peloton.api.convert.common import time_from_rfc3339
from peloton.api.convert.v0_job import job_spec_from_v0
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import PelotonError
from peloton.core.model.job import JobSpec
from peloton.simulation.export_model import (
    Anonymiser,
    ExportStats,
    ObservedJob,
    ObservedTask,
    build_trace,
    largest,
    pool_paths,
    pools_spec,
)
from peloton.simulation.pools import PoolsSpec
from peloton.simulation.trace import Trace
from peloton.storage import check_schema, open_store
from peloton.storage.query import JobQuery, SortField, TimeRange
from peloton.storage.store import ReadOnlyStore

#: Jobs read per store query page.
PAGE = 500


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """What to export: a time window of job creation, from a store and optionally an archive."""

    store_url: str
    since: float
    until: float | None = None
    archive_url: str | None = None
    salt: str = ""
    anonymise: bool = True
    unknown_duration: float = 600.0
    name: str = "export"


def observed(job_id: str, spec: JobSpec, pool_path: str, created: float,
             tasks: tuple[ObservedTask, ...]) -> ObservedJob:
    """An ObservedJob from a job's spec (task resources: the largest of default and overrides)."""
    resources = largest([spec.default_task.resources,
                         *(t.resources for t in spec.instance_tasks.values())])
    return ObservedJob(job_id=job_id, type=spec.type, pool_path=pool_path, created=created,
                       instances=spec.instance_count, resources=resources, priority=spec.sla.priority,
                       preemptible=spec.sla.preemptible, constraint=spec.default_task.constraint,
                       tasks=tasks)


def _pool_path(paths: dict[str, str], pool_id: str) -> str:
    return paths.get(pool_id) or f"/unknown-pool-{pool_id or 'none'}"


def read_store(store: ReadOnlyStore, since: float, until: float | None,
               paths: dict[str, str]) -> Iterator[ObservedJob]:
    """Every job created in [since, until), oldest first, paging through the job index."""
    query = JobQuery(creation_time=TimeRange(since, until), order_by=SortField.CREATION_TIME,
                     descending=False, limit=PAGE)
    offset = 0
    while True:
        page = store.query_jobs(replace(query, offset=offset))
        for summary in page.jobs:
            spec = store.get_job_config(summary.job_id)
            runtimes = store.get_task_runtimes(summary.job_id)
            tasks = tuple(ObservedTask(i, rt.start_time, rt.completion_time)
                          for i, rt in sorted(runtimes.items()))
            yield observed(summary.job_id, spec, _pool_path(paths, spec.respool_id),
                           summary.runtime.creation_time, tasks)
        offset += len(page.jobs)
        if not page.jobs or offset >= page.total:
            return


def _time(text: str) -> float:
    return time_from_rfc3339(text, "time") if text else 0.0


def record_job(doc: dict[str, Any], paths: dict[str, str]) -> ObservedJob:
    """An archived record's job (ValueError / PelotonError when its config cannot be read)."""
    info = json_format.ParseDict(doc["job"], job_pb2.JobInfo(), ignore_unknown_fields=True)
    spec = job_spec_from_v0(info.config)
    tasks: list[ObservedTask] = []
    for key, value in sorted(doc["tasks"].items(), key=lambda kv: int(kv[0])):
        task = json_format.ParseDict(value, task_pb2.TaskInfo(), ignore_unknown_fields=True)
        tasks.append(ObservedTask(int(key), _time(task.runtime.startTime),
                                  _time(task.runtime.completionTime)))
    return observed(str(doc["job_id"]), spec, _pool_path(paths, spec.respool_id),
                    _time(info.runtime.creationTime), tuple(tasks))


def read_archive(url: str, since: float, until: float | None, paths: dict[str, str],
                 stats: ExportStats) -> Iterator[ObservedJob]:
    """Archived jobs created in [since, until) (archives index completion time: filter after)."""
    from archiver.sinks import RecordQuery, open_sink

    sink = open_sink(url, create=False)
    try:
        for summary in sink.query(RecordQuery(since=since)):
            if summary.creation_time < since or (until is not None and summary.creation_time >= until):
                continue
            try:
                yield record_job(sink.get(summary.job_id).document(), paths)
            except (PelotonError, ValueError, KeyError, json_format.ParseError) as exc:
                stats.unreadable_skipped += 1
                stats.notes.append(f"archived job {summary.job_id}: {exc}")
    finally:
        sink.close()


def export(request: ExportRequest, *, now: float) -> tuple[Trace, ExportStats, PoolsSpec]:
    """The trace of the jobs `request` names, and the cluster's pool tree (both anonymised alike)."""
    anonymiser = Anonymiser(request.salt, request.anonymise)
    stats = ExportStats()
    store = open_store(request.store_url)
    try:
        check_schema(store)
        pools = store.get_resource_pools()
        paths = pool_paths(pools)
        jobs = {j.job_id: j for j in read_store(store, request.since, request.until, paths)}
    finally:
        store.close()
    if request.archive_url:
        for job in read_archive(request.archive_url, request.since, request.until, paths, stats):
            if job.job_id not in jobs:
                jobs[job.job_id] = job
                stats.from_archive += 1
    source = "peloton store" + (" and archive" if request.archive_url else "")
    trace, stats = build_trace(jobs.values(), now=now, anonymiser=anonymiser,
                               unknown_duration=request.unknown_duration, name=request.name,
                               source=source, stats=stats)
    return trace, stats, pools_spec(pools, anonymiser)
