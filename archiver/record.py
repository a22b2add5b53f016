"""The archive record: one finished job, self-contained, as canonical JSON bytes.

A record is everything hot storage knew about a job when it was archived,
so the job can be deleted there and still be read back years later without
any other table:

    {
      "format": "peloton.archive.job/v1",
      "job_id": "<uuid>",
      "summary": {"name", "owner", "owning_team", "type", "state", "creation_time",
                  "completion_time", "instance_count", "task_stats"},
      "job": <v0 JobInfo: config + runtime, proto JSON>,
      "tasks": {"<instance>": <v0 TaskInfo, proto JSON>},
      "pod_events": {"<instance>": [<v0 PodEvent, proto JSON>, ... newest first]}
    }

Times in `summary` are epoch seconds (floats), the rest is exactly what the
v0 API returned (`json_format.MessageToDict`, proto field names), so it
parses back into the same messages.  The body is canonical JSON (sorted
keys, no spaces, UTF-8): the same job state always gives the same bytes
and the same SHA-256, which is what lets sinks deduplicate a re-archived
job and lets the engine verify a read-back byte for byte.

Invariant: `RecordSummary` is derived from the body alone, so any sink can
rebuild its index from stored bodies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from peloton.core.errors import DataCorruption

FORMAT = "peloton.archive.job/v1"


class ArchiveCorrupt(DataCorruption):
    """Stored archive bytes fail their checksum or cannot be decoded.

    `where` names the damaged unit (a segment file, a database row) so an
    operator can find it; the error is raised, never swallowed, because a
    silently dropped record is a lost job.
    """

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"archive corrupt: {where}: {detail}")
        self.where = where
        self.detail = detail


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """The searchable fields of a record (what sinks index and `query` returns)."""

    job_id: str
    name: str
    owner: str
    owning_team: str
    job_type: str
    state: str
    creation_time: float
    completion_time: float
    instance_count: int
    #: (task state name, count) pairs, sorted by state name.
    task_stats: tuple[tuple[str, int], ...]
    sha256: str

    def to_json(self) -> dict[str, Any]:
        """Plain data (for index files and `--json` output)."""
        return {"job_id": self.job_id, "name": self.name, "owner": self.owner,
                "owning_team": self.owning_team, "type": self.job_type, "state": self.state,
                "creation_time": self.creation_time, "completion_time": self.completion_time,
                "instance_count": self.instance_count, "task_stats": dict(self.task_stats),
                "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordSummary:
        """The inverse of `to_json` (KeyError/TypeError/ValueError on a malformed mapping)."""
        return cls(job_id=str(data["job_id"]), name=str(data["name"]), owner=str(data["owner"]),
                   owning_team=str(data["owning_team"]), job_type=str(data["type"]),
                   state=str(data["state"]), creation_time=float(data["creation_time"]),
                   completion_time=float(data["completion_time"]),
                   instance_count=int(data["instance_count"]),
                   task_stats=_stats(data["task_stats"]), sha256=str(data["sha256"]))


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """One archived job: its summary and the canonical JSON body it was derived from."""

    summary: RecordSummary
    body: bytes

    @property
    def job_id(self) -> str:
        """The archived job's id."""
        return self.summary.job_id

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of `body`."""
        return self.summary.sha256

    def document(self) -> dict[str, Any]:
        """The record as plain data."""
        doc: dict[str, Any] = json.loads(self.body)
        return doc

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> ArchiveRecord:
        """Encode a record document canonically (ValueError if it lacks a required part)."""
        body = canonical(doc)
        return cls.from_body(body, where="new record", error=ValueError)

    @classmethod
    def from_body(cls, body: bytes, *, where: str,
                  error: type[Exception] | None = None) -> ArchiveRecord:
        """Wrap stored bytes, keeping them as they are; ArchiveCorrupt (naming `where`) if invalid."""
        try:
            doc = json.loads(body)
            s = doc["summary"]
            if doc.get("format") != FORMAT:
                raise ValueError(f"unknown record format {doc.get('format')!r}")
            summary = RecordSummary(
                job_id=str(doc["job_id"]), name=str(s["name"]), owner=str(s["owner"]),
                owning_team=str(s["owning_team"]), job_type=str(s["type"]), state=str(s["state"]),
                creation_time=float(s["creation_time"]), completion_time=float(s["completion_time"]),
                instance_count=int(s["instance_count"]), task_stats=_stats(s["task_stats"]),
                sha256=hashlib.sha256(body).hexdigest())
            for part in ("job", "tasks", "pod_events"):
                if not isinstance(doc[part], dict):
                    raise ValueError(f"{part} is not an object")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if error is not None:
                raise error(f"invalid archive record: {exc}") from exc
            raise ArchiveCorrupt(where, f"undecodable record: {exc}") from exc
        return cls(summary, body)


def canonical(doc: Mapping[str, Any]) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace, UTF-8 (same data -> same bytes)."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def _stats(data: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(data, Mapping):
        raise TypeError("task_stats is not an object")
    return tuple(sorted((str(k), int(v)) for k, v in data.items()))
