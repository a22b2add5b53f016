"""The exporter against a SQLite store populated through the storage API, and a directory archive."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from google.protobuf import json_format

from archiver.record import FORMAT, ArchiveRecord
from archiver.sinks import open_sink
from peloton.api.convert.common import time_to_rfc3339
from peloton.api.convert.v0_job import job_info_to_v0
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.model.constraints import AndConstraint, Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.job import JobRuntime, JobSpec, SlaSpec
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePool, ResourcePoolConfig
from peloton.core.model.task import CommandSpec, TaskRuntime, TaskSpec
from peloton.core.states import JobState, JobType, TaskState
from peloton.simulation.export import ExportRequest, export
from peloton.simulation.export_model import Anonymiser
from peloton.simulation.pools import pools_from_data, pools_to_data
from peloton.simulation.trace_io import dump_trace, read_trace
from peloton.storage import StoreOptions, open_store

T0 = 1_700_000_000.0
NOW = T0 + 10_000
ZONE = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1)
SPREAD = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("job", "nightly-etl"), 1)


def spec(name: str, pool: str, instances: int, *, job_type: JobType = JobType.BATCH, cpu: float = 1,
         priority: int = 0, preemptible: bool = True, overrides: dict[int, TaskSpec] | None = None,
         constraint: object = None) -> JobSpec:
    task = TaskSpec(name=name, resources=Resources(cpu=cpu, mem_mb=256), command=CommandSpec("true"),
                    constraint=constraint)  # type: ignore[arg-type]
    return JobSpec(name=name, type=job_type, instance_count=instances, default_task=task,
                   respool_id=pool, owner="alice", sla=SlaSpec(priority=priority, preemptible=preemptible),
                   instance_tasks=overrides or {})


def run(start: float, end: float = 0.0, state: TaskState = TaskState.SUCCEEDED) -> TaskRuntime:
    return TaskRuntime(state=state, start_time=start, completion_time=end)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = open_store(url, StoreOptions(bootstrap=True))
    cpu = (ResourceConfig(ResourceKind.CPU, reservation=10, limit=20),)
    store.create_resource_pool(ResourcePool("p-batch", ResourcePoolConfig("batch", "root", cpu,
                                                                          owning_team="data")))
    store.create_resource_pool(ResourcePool("p-etl", ResourcePoolConfig("etl", "p-batch", cpu)))
    store.create_resource_pool(ResourcePool("p-web", ResourcePoolConfig("web", "root", cpu)))
    jobs = [
        # (id, spec, created, task runtimes)
        ("11111111-0000-0000-0000-000000000001",
         spec("nightly-etl", "p-etl", 3, priority=5, preemptible=False,
              overrides={2: TaskSpec(name="big", resources=Resources(cpu=4, mem_mb=128))},
              constraint=AndConstraint((ZONE, SPREAD))),
         T0 + 100, {0: run(T0 + 110, T0 + 170), 1: run(T0 + 120, T0 + 200),
                    2: run(T0 + 130, T0 + 190, TaskState.FAILED)}),
        ("11111111-0000-0000-0000-000000000002", spec("adhoc", "p-etl", 2), T0 + 200,
         {0: run(T0 + 200, T0 + 260), 1: TaskRuntime(state=TaskState.PENDING)}),
        ("11111111-0000-0000-0000-000000000003", spec("stuck", "p-etl", 1), T0 + 300,
         {0: TaskRuntime(state=TaskState.PENDING)}),
        ("11111111-0000-0000-0000-000000000004", spec("long", "p-etl", 1), T0 + 400,
         {0: run(T0 + 500, 0.0, TaskState.RUNNING)}),
        ("11111111-0000-0000-0000-000000000005", spec("www", "p-web", 2, job_type=JobType.SERVICE),
         T0 + 500, {0: run(T0 + 510, 0, TaskState.RUNNING)}),
        ("11111111-0000-0000-0000-000000000006", spec("agents", "p-web", 1, job_type=JobType.DAEMON),
         T0 + 600, {}),
        ("11111111-0000-0000-0000-000000000007", spec("old", "p-etl", 1), T0 - 86400 * 30, {}),
    ]
    for job_id, job_spec, created, runtimes in jobs:
        store.create_job(job_id, job_spec, JobRuntime(state=JobState.RUNNING, creation_time=created))
        if runtimes:
            store.create_task_runtimes(job_id, runtimes)
    store.close()
    return url


def test_jobs_become_a_trace_with_measured_durations(store_url: str) -> None:
    trace, stats, pools = export(ExportRequest(store_url, since=T0, anonymise=False), now=NOW)
    jobs = {j.job[-1]: j for j in trace.jobs}
    assert [j.job[-1] for j in trace.jobs] == ["1", "2", "3", "4", "5"]  # the daemon and the old job: out
    assert trace.header.start == T0 + 100 and [j.submit for j in trace.jobs] == [0, 100, 200, 300, 400]
    etl = jobs["1"]
    assert (etl.pool, etl.instances, etl.durations) == ("/batch/etl", 3, (60, 80, 60))
    assert etl.resources == Resources(cpu=4, mem_mb=256)  # the largest of default and override
    assert (etl.priority, etl.preemptible, etl.constraint) == (5, False, AndConstraint((ZONE, SPREAD)))
    assert jobs["2"].duration == 60 and jobs["2"].durations == ()  # the pending task takes the median
    assert jobs["3"].duration == 600  # never started: the default
    assert jobs["4"].duration == NOW - (T0 + 500)  # still running: until now
    assert jobs["5"].type is JobType.SERVICE and jobs["5"].duration is None
    assert (stats.jobs, stats.daemons_skipped, stats.tasks_median_duration, stats.jobs_unknown_duration,
            stats.tasks_still_running) == (5, 1, 1, 1, 1)
    assert pools.paths() == ("/batch", "/batch/etl", "/web")
    assert read_trace(dump_trace(trace).splitlines()) == trace


def test_names_are_anonymised_stably_with_the_salt(store_url: str) -> None:
    first, _, pools = export(ExportRequest(store_url, since=T0, salt="s1"), now=NOW)
    again, _, _ = export(ExportRequest(store_url, since=T0, salt="s1"), now=NOW)
    other, _, _ = export(ExportRequest(store_url, since=T0, salt="s2"), now=NOW)
    assert dump_trace(first) == dump_trace(again)
    assert [j.job for j in first.jobs] != [j.job for j in other.jobs]
    text = dump_trace(first) + str(pools_to_data(pools))
    for secret in ("nightly-etl", "11111111", "batch", "etl", "web", "data"):
        assert secret not in text
    etl = first.jobs[0]
    assert etl.job.startswith("j-") and etl.pool.count("/p-") == 2
    # The exported pools carry the same anonymised paths as the trace, and are a valid POOLS.yaml.
    assert etl.pool in pools.leaves()
    assert pools_from_data(pools_to_data(pools)) == pools
    # HOST labels name infrastructure and are kept; TASK label values (job names) are hashed.
    assert isinstance(etl.constraint, AndConstraint)
    zone, spread = etl.constraint.children
    assert zone == ZONE and isinstance(spread, LabelConstraint) and spread.label.value.startswith("h-")


def test_the_time_window_is_respected(store_url: str) -> None:
    trace, _, _ = export(ExportRequest(store_url, since=T0 + 150, until=T0 + 450, anonymise=False),
                         now=NOW)
    assert [j.job[-1] for j in trace.jobs] == ["2", "3", "4"]


def archived(job_id: str, job_spec: JobSpec, created: float,
             starts: list[tuple[float, float]]) -> ArchiveRecord:
    info = job_info_to_v0(job_id, job_spec, JobRuntime(state=JobState.SUCCEEDED, creation_time=created,
                                                      completion_time=created + 1000))
    tasks = {}
    for i, (start, end) in enumerate(starts):
        task = task_pb2.TaskInfo(instanceId=i)
        task.runtime.startTime = time_to_rfc3339(start)
        task.runtime.completionTime = time_to_rfc3339(end)
        tasks[str(i)] = json_format.MessageToDict(task, preserving_proto_field_name=True)
    doc = {"format": FORMAT, "job_id": job_id,
           "summary": {"name": job_spec.name, "owner": "alice", "owning_team": "", "type": "BATCH",
                       "state": "SUCCEEDED", "creation_time": created, "completion_time": created + 1000,
                       "instance_count": job_spec.instance_count, "task_stats": {"SUCCEEDED": 2}},
           "job": json_format.MessageToDict(info, preserving_proto_field_name=True),
           "tasks": tasks, "pod_events": {}}
    return ArchiveRecord.from_document(doc)


def test_archived_jobs_are_read_too(store_url: str, tmp_path: Path) -> None:
    url = f"dir://{tmp_path / 'archive'}"
    sink = open_sink(url)
    gone = str(uuid.UUID(int=42))
    sink.append(archived(gone, spec("archived", "p-etl", 2, cpu=2), T0 + 50,
                         [(T0 + 60, T0 + 90), (T0 + 60, T0 + 100)]))
    sink.append(archived("11111111-0000-0000-0000-000000000002", spec("adhoc", "p-etl", 9), T0 + 200,
                         [(T0 + 200, T0 + 201)]))  # also in the store: the store's copy wins
    sink.append(archived(str(uuid.UUID(int=43)), spec("ancient", "p-etl", 1), T0 - 86400, [(1, 2)]))
    sink.flush()
    sink.close()
    trace, stats, _ = export(ExportRequest(store_url, since=T0, archive_url=url, anonymise=False), now=NOW)
    first = trace.jobs[0]
    assert (first.job, first.submit, first.pool, first.durations) == (gone, 0, "/batch/etl", (30, 40))
    assert first.resources.cpu == 2
    assert next(j for j in trace.jobs if j.job.endswith("2")).instances == 2
    assert stats.from_archive == 1 and len(trace.jobs) == 6


def test_anonymiser_paths_hash_each_segment_by_its_whole_path() -> None:
    anon = Anonymiser("salt")
    assert anon.pool("/a/b").split("/")[1] == anon.pool("/a").split("/")[1]
    assert anon.pool("/a/b").split("/")[2] != anon.pool("/c/b").split("/")[2]
    assert Anonymiser(enabled=False).pool("/a/b") == "/a/b"
