"""Backend-neutral records for copying and verifying a whole store.

The migration tool (migrations/copy.py, verify.py) moves every entity
between any two backends through this narrow interface instead of the
daemons' API, because a copy must preserve what the API deliberately
controls: revisions, config versions, event identities.  Each *kind* is
one logical table, identified the same way in every backend; a `Record`
is its key, its revision (0 where the kind has none) and its payload, the
entity's JSON from the codec.  Derived data (the job index, label rows,
lookup tables) is never copied: `put_records` rebuilds it.

Kinds are listed in dependency order (pools before jobs, configs before
runtimes), which is the order the copy uses.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from peloton.core.cron.model import CronJob
from peloton.core.errors import DataCorruption
from peloton.core.model.events import PodEvent
from peloton.core.model.host import HostInfo
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.respool import ResourcePool
from peloton.core.model.storage_records import (
    FrameworkInfo,
    JobNameEntry,
    SecretInfo,
    VolumeInfo,
)
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.model.update import UpdateInfo, WorkflowEvent
from peloton.storage import codec

Key = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class ActiveJob:
    """Payload of an active-set entry (the key says it all)."""

    job_id: str


@dataclass(frozen=True, slots=True)
class Kind:
    """One logical table: its name, key fields, payload class and whether it has revisions."""

    name: str
    key_fields: tuple[str, ...]
    entity: type[Any]
    revisioned: bool = False

    def describe(self, key: Key) -> str:
        """Human name of one entity, for error messages ("task_runtime a-1")."""
        return f"{self.name} {'/'.join(str(k) for k in key)}"


KINDS: tuple[Kind, ...] = (
    Kind("respool", ("pool_id",), ResourcePool),
    Kind("host", ("hostname",), HostInfo),
    Kind("framework", ("name",), FrameworkInfo),
    Kind("job_config", ("job_id", "version"), JobSpec),
    Kind("job_runtime", ("job_id",), JobRuntime, revisioned=True),
    Kind("job_name", ("name", "job_id"), JobNameEntry),
    Kind("active_job", ("job_id",), ActiveJob),
    Kind("secret", ("secret_id",), SecretInfo),
    Kind("volume", ("volume_id",), VolumeInfo),
    Kind("task_config", ("job_id", "version", "instance"), TaskSpec),
    Kind("task_runtime", ("job_id", "instance"), TaskRuntime, revisioned=True),
    Kind("pod_event", ("job_id", "instance", "run_id", "time_us", "state"), PodEvent),
    Kind("update", ("update_id",), UpdateInfo, revisioned=True),
    Kind("workflow_event", ("update_id", "instance", "time_us", "state"), WorkflowEvent),
    Kind("cron_job", ("name",), CronJob, revisioned=True),
)
KIND_BY_NAME = {k.name: k for k in KINDS}


@dataclass(frozen=True, slots=True)
class Record:
    """One stored entity as the copy tool sees it."""

    key: Key
    revision: int
    payload: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Progress of one copy of one kind, kept in the destination store.

    `cursor` is the source backend's opaque scan position after the last
    batch written; `done` marks the kind finished for the current pass and
    `passes` counts completed passes (the first full copy is pass 1).
    """

    copy_id: str
    kind: str
    cursor: str | None = None
    done: bool = False
    passes: int = 0
    copied: int = 0


def canonical_payload(kind: Kind, record: Record) -> str:
    """The payload decoded and encoded again: one spelling per value, whoever wrote it.
    Raises DataCorruption naming the entity if it does not decode."""
    return codec.to_json(codec.from_json(kind.entity, record.payload, kind.describe(record.key)))


def fingerprint(kind: Kind, record: Record) -> str:
    """What the catch-up pass compares: the revision where the kind has one (every write
    bumps it), else a hash of the canonical payload (of the raw one if it is corrupt)."""
    if kind.revisioned:
        return f"r{record.revision}"
    try:
        text = canonical_payload(kind, record)
    except DataCorruption:
        text = "corrupt:" + record.payload
    return "h" + hashlib.sha1(text.encode()).hexdigest()


def time_key(seconds: float) -> int:
    """An event time as the integer microseconds used in event keys."""
    return round(seconds * 1_000_000)


class BulkStore(Protocol):
    """Whole-store access for the migration tool; every backend implements it."""

    def count_records(self, kind: str) -> int:
        """How many records of `kind` are stored."""
        ...

    def scan_records(self, kind: str, after: str | None,
                     limit: int) -> tuple[list[Record], str | None]:
        """Up to `limit` records following the opaque cursor `after` (None = from the
        start), and the cursor to continue from (None once the scan is complete).
        Records are returned as stored (payloads are not decoded)."""
        ...

    def get_records(self, kind: str, keys: Sequence[Key]) -> list[Record]:
        """The stored records with these keys (absent keys are skipped)."""
        ...

    def put_records(self, kind: str, records: Sequence[Record],
                    checkpoint: Checkpoint | None = None) -> None:
        """Upsert records as they are (revisions kept), rebuilding derived index data.
        A payload that does not decode raises DataCorruption naming the entity, and
        nothing of the batch is written.  `checkpoint` is saved with the batch (in
        the same transaction where the backend has transactions)."""
        ...

    def delete_records(self, kind: str, keys: Sequence[Key]) -> None:
        """Delete records and their derived data.  Idempotent."""
        ...

    def get_checkpoint(self, copy_id: str, kind: str) -> Checkpoint | None:
        """The saved progress of a copy for one kind; None if there is none."""
        ...

    def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Save the progress of a copy for one kind."""
        ...

    def clear_checkpoints(self, copy_id: str) -> None:
        """Forget every checkpoint of a copy (to start it over).  Idempotent."""
        ...
