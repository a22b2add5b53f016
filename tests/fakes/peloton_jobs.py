"""A fake Peloton for the archiver: the six v0 calls it makes, over jobs held in memory.

Behaves like the job manager where the archiver can tell: Query filters by
state and a half-open completion-time range, sorts by completion time
(then id) and pages; Get/List/GetPodEvents answer NotFound for a deleted
job; Delete refuses a non-terminal job (FailedPrecondition); GetPodEvents
is newest first and DeletePodEvents drops runs 1..runId.  `failures`
queues errors to raise from the next calls of a method (fault injection),
and `calls` records every call in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from google.protobuf.timestamp_pb2 import Timestamp

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import FailedPrecondition, NotFound

TERMINAL = {"SUCCEEDED", "FAILED", "KILLED"}


def rfc3339(seconds: float) -> str:
    """Epoch seconds as the API's RFC 3339 text."""
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts.ToJsonString()


@dataclass
class FakeJob:
    """One job: summary fields plus, per instance, how many runs it had."""

    job_id: str
    name: str = "job"
    job_type: str = "BATCH"
    state: str = "SUCCEEDED"
    completed: float = 0.0
    runs: list[int] = field(default_factory=lambda: [1])
    owner: str = "alice"

    @property
    def instances(self) -> int:
        return len(self.runs)


class FakePelotonJobs:
    """In-memory jobs answering `archiver.collect.PelotonJobs`."""

    def __init__(self) -> None:
        self.jobs: dict[str, FakeJob] = {}
        #: instance events: (job, instance) -> runs still stored (ascending).
        self.event_runs: dict[tuple[str, int], list[int]] = {}
        self.calls: list[tuple[str, str]] = []
        self.failures: dict[str, list[BaseException]] = {}
        self.on_delete: Callable[[str], None] | None = None

    def add(self, job: FakeJob) -> FakeJob:
        self.jobs[job.job_id] = job
        for i, runs in enumerate(job.runs):
            self.event_runs[(job.job_id, i)] = list(range(1, runs + 1))
        return job

    def deletes(self) -> list[str]:
        return [arg for name, arg in self.calls if name == "delete_job"]

    def _enter(self, method: str, arg: str) -> None:
        self.calls.append((method, arg))
        queued = self.failures.get(method)
        if queued:
            raise queued.pop(0)

    def _job(self, job_id: str) -> FakeJob:
        if job_id not in self.jobs:
            raise NotFound(f"job {job_id} not found")
        return self.jobs[job_id]

    # -- JobManager -------------------------------------------------------------------------------
    def query_jobs(self, spec: Any, *, respool_id: str = "", summary_only: bool = True) -> Any:
        self._enter("query_jobs", "")
        states = {job_pb2.JobState.Name(s) for s in spec.jobStates}
        found = [j for j in self.jobs.values() if not states or j.state in states]
        if spec.HasField("completionTimeRange"):
            lo = spec.completionTimeRange.min.ToNanoseconds() / 1e9
            hi = spec.completionTimeRange.max.ToNanoseconds() / 1e9
            found = [j for j in found if lo <= j.completed < hi]
        found.sort(key=lambda j: (j.completed, j.job_id))
        page = spec.pagination
        found = found[page.offset:page.offset + (page.limit or 100)]
        out = job_pb2.QueryResponse()
        for j in found:
            s = out.results.add(name=j.name, type=job_pb2.JobType.Value(j.job_type),
                                instanceCount=j.instances, owningTeam="team", owner=j.owner)
            s.id.value = j.job_id
            s.runtime.state = cast(job_pb2.JobState, job_pb2.JobState.Value(j.state))
        return out

    def get_job(self, job_id: str) -> Any:
        self._enter("get_job", job_id)
        j = self._job(job_id)
        out = job_pb2.GetResponse()
        info = out.jobInfo
        info.id.value = job_id
        info.config.name, info.config.owner, info.config.owningTeam = j.name, j.owner, "team"
        info.config.type = cast(job_pb2.JobType, job_pb2.JobType.Value(j.job_type))
        info.config.instanceCount = j.instances
        info.runtime.state = cast(job_pb2.JobState, job_pb2.JobState.Value(j.state))
        info.runtime.creationTime = rfc3339(max(1.0, j.completed - 60))
        info.runtime.completionTime = rfc3339(j.completed) if j.state in TERMINAL else ""
        info.runtime.taskStats[j.state if j.state in TERMINAL else "RUNNING"] = j.instances
        return out

    def delete_job(self, job_id: str) -> Any:
        self._enter("delete_job", job_id)
        j = self._job(job_id)
        if j.state not in TERMINAL:
            raise FailedPrecondition(f"job {job_id} is {j.state}")
        if self.on_delete is not None:
            self.on_delete(job_id)
        del self.jobs[job_id]
        for key in [k for k in self.event_runs if k[0] == job_id]:
            del self.event_runs[key]
        return job_pb2.DeleteResponse()

    # -- TaskManager ------------------------------------------------------------------------------
    def list_tasks(self, job_id: str, rng: Any = None) -> Any:
        self._enter("list_tasks", job_id)
        j = self._job(job_id)
        out = task_pb2.ListResponse()
        for i, runs in enumerate(j.runs):
            info = out.result.value[i]
            info.instanceId = i
            info.jobId.value = job_id
            info.config.name = j.name
            info.runtime.state = cast(task_pb2.TaskState, task_pb2.TaskState.Value(j.state))
            info.runtime.mesosTaskId.value = f"{job_id}-{i}-{runs}"
        return out

    def get_pod_events(self, job_id: str, instance_id: int, *, run_id: str = "",
                       limit: int = 0) -> Any:
        self._enter("get_pod_events", f"{job_id}-{instance_id}")
        self._job(job_id)
        runs = self.event_runs.get((job_id, instance_id), [])
        newest_first = sorted(runs, reverse=True)[:limit or None]
        out = task_pb2.GetPodEventsResponse()
        for run in newest_first:
            out.result.add(actualState="SUCCEEDED", hostname="h1").taskId.value = \
                f"{job_id}-{instance_id}-{run}"
        return out

    def delete_task_pod_events(self, job_id: str, instance_id: int, run_id: int) -> Any:
        self._enter("delete_task_pod_events", f"{job_id}-{instance_id}-{run_id}")
        key = (job_id, instance_id)
        self.event_runs[key] = [r for r in self.event_runs.get(key, []) if r > run_id]
        return task_pb2.DeletePodEventsResponse()
