"""Reading a finished job out of Peloton into a self-contained archive record.

The engine needs only the few v0 calls in `PelotonJobs`; the typed client
(`peloton.api.client.PelotonClient`) has them, and unit tests pass a small
in-memory fake.  A record holds the job's config and runtime (JobManager.Get),
every task (TaskManager.List) and every task's pod events over all runs
(TaskManager.GetPodEvents), as the v0 API returned them (see
archiver/record.py for the layout).
"""

from __future__ import annotations

from typing import Any, Protocol

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from archiver.record import FORMAT, ArchiveRecord
from peloton.api.gen.peloton.api.v0.job import job_pb2


class PelotonJobs(Protocol):
    """The v0 calls the archiver makes (a subset of PelotonClient's methods)."""

    def query_jobs(self, spec: Any, *, respool_id: str = "", summary_only: bool = True) -> Any:
        """JobManager.Query."""
        ...

    def get_job(self, job_id: str) -> Any:
        """JobManager.Get (NotFound if the job is gone)."""
        ...

    def delete_job(self, job_id: str) -> Any:
        """JobManager.Delete of a terminal job."""
        ...

    def list_tasks(self, job_id: str, rng: Any = None) -> Any:
        """TaskManager.List: every instance of a job."""
        ...

    def get_pod_events(self, job_id: str, instance_id: int, *, run_id: str = "",
                       limit: int = 0) -> Any:
        """TaskManager.GetPodEvents, newest first."""
        ...

    def delete_task_pod_events(self, job_id: str, instance_id: int, run_id: int) -> Any:
        """TaskManager.DeletePodEvents of runs 1..run_id."""
        ...


def to_plain(message: Any) -> dict[str, Any]:
    """A message as proto JSON with proto field names (unset fields left out, as on the wire)."""
    data: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return data


def epoch(rfc3339: str) -> float:
    """Epoch seconds of an RFC 3339 timestamp (0.0 for an empty one)."""
    if not rfc3339:
        return 0.0
    ts = Timestamp()
    ts.FromJsonString(rfc3339)
    return float(ts.seconds) + ts.nanos / 1e9


def build_record(client: PelotonJobs, job_id: str) -> ArchiveRecord:
    """Everything Peloton holds about `job_id`, as one record (NotFound if the job is gone)."""
    info = client.get_job(job_id).jobInfo
    tasks = client.list_tasks(job_id).result.value
    config, runtime = info.config, info.runtime
    summary = {
        "name": config.name, "owner": config.owner, "owning_team": config.owningTeam,
        "type": job_pb2.JobType.Name(config.type), "state": job_pb2.JobState.Name(runtime.state),
        "creation_time": epoch(runtime.creationTime),
        "completion_time": epoch(runtime.completionTime),
        "instance_count": config.instanceCount,
        "task_stats": {k: int(v) for k, v in runtime.taskStats.items()},
    }
    events = {str(i): [to_plain(e) for e in client.get_pod_events(job_id, i).result]
              for i in sorted(tasks)}
    doc = {
        "format": FORMAT,
        "job_id": job_id,
        "summary": summary,
        "job": to_plain(info),
        "tasks": {str(i): to_plain(tasks[i]) for i in sorted(tasks)},
        "pod_events": events,
    }
    return ArchiveRecord.from_document(doc)


def run_number(task_id: str) -> int | None:
    """The run of a v0 task id `<job>-<instance>-<run>` (None if it has no numeric run)."""
    _, _, run = task_id.rpartition("-")
    return int(run) if run.isdigit() else None
