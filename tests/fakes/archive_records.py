"""Archive records for sink tests: realistic shape, chosen summary fields."""

from __future__ import annotations

import uuid
from typing import Any

from archiver.record import FORMAT, ArchiveRecord


def make_record(job_id: str | None = None, *, name: str = "job", owner: str = "alice",
                owning_team: str = "team", state: str = "SUCCEEDED", job_type: str = "BATCH",
                completed: float = 1_700_000_000.0, tasks: int = 2, note: str = "",
                padding: int = 0) -> ArchiveRecord:
    """A record as the engine would build it (`note`/`padding` vary the bytes)."""
    job_id = job_id or str(uuid.uuid4())
    task_docs: dict[str, Any] = {
        str(i): {"instanceId": i, "jobId": {"value": job_id},
                 "runtime": {"state": state, "message": f"done {note} ✓", "host": "h1"}}
        for i in range(tasks)}
    events = {str(i): [{"taskId": {"value": f"{job_id}-{i}-1"}, "actualState": state,
                        "timestamp": "2023-11-14T22:13:20Z"}] for i in range(tasks)}
    doc = {
        "format": FORMAT, "job_id": job_id,
        "summary": {"name": name, "owner": owner, "owning_team": owning_team, "type": job_type,
                    "state": state, "creation_time": completed - 60.0, "completion_time": completed,
                    "instance_count": tasks, "task_stats": {state: tasks}},
        "job": {"id": {"value": job_id}, "config": {"name": name, "owner": owner,
                                                    "description": "x" * padding},
                "runtime": {"state": state}},
        "tasks": task_docs, "pod_events": events,
    }
    return ArchiveRecord.from_document(doc)
