"""A stored cron job: its schedule, collision policy, run template and run bookkeeping.

A cron job is a name (unique; the Aurora bridge uses `role/env/name`) and a
template: a BATCH JobSpec, each run being a new job created from it.  The
bookkeeping makes runs happen once per due time across restarts and leader
changes (see trigger.py and peloton/jobmgr/cron.py):

* `last_due_ms`: the latest due time already claimed (set to the time of
  scheduling at first, so no earlier due time ever runs);
* `pending`: a run claimed but not yet created: its deterministic job id,
  the due time (0 for a manual start) and, for KILL_EXISTING, the run being
  killed first.  Creating with that id is idempotent, so a new leader that
  finds a pending run finishes it instead of starting another;
* `last_run_job_id`: the newest run created.

Every write is a compare-and-set on `revision` (the store bumps it).

With all-active job managers (docs/design/all-active-jobmgr.md) a cron job belongs to the
job partition of its name (`schedule_partition`): only that partition's owner advances it,
under that partition's fence.  Its runs' job ids are drawn in the same partition
(`run_job_id`), so the owner creates, stops and reads its runs as its own jobs, and a new
owner of the partition computes the very same id for a claimed run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import Enum

from peloton.core.model.job import JobSpec
from peloton.core.partitions import DEFAULT_PARTITIONS, partition_of

#: Namespace of run job ids: uuid5(RUN_NAMESPACE, f"{name}@{due or manual id}"), with
#: "/<n>" appended for the n-th draw when the plain one is in another partition.
RUN_NAMESPACE = uuid.UUID("6f3c7a44-0c55-4b0f-9a36-2b1f0c1d5e21")


class CollisionPolicy(Enum):
    """What a due run does while the previous run still has active tasks (Aurora's names)."""

    KILL_EXISTING = "KILL_EXISTING"  # kill the active run, then start the new one (the default)
    CANCEL_NEW = "CANCEL_NEW"  # skip the new run
    RUN_OVERLAP = "RUN_OVERLAP"  # start the new run beside the active one


@dataclass(frozen=True, slots=True)
class PendingRun:
    """A claimed run not yet created."""

    job_id: str
    due_ms: int  # 0: started by hand (startCronJob)
    kill_job_id: str = ""  # the active run to kill first (KILL_EXISTING)


@dataclass(frozen=True, slots=True)
class CronJob:
    """One cron job as stored."""

    name: str
    schedule: str  # as written (valid for schedule.parse); reads return it unchanged
    policy: CollisionPolicy
    template: JobSpec
    created_ms: int
    last_due_ms: int
    last_run_job_id: str = ""
    pending: PendingRun | None = None
    #: Free text for the front that scheduled it (the Aurora bridge leaves its marker here).
    opaque_data: str = ""
    revision: int = 0


def schedule_partition(name: str, count: int = DEFAULT_PARTITIONS) -> int:
    """The job partition a cron job belongs to: its name's (a name never changes)."""
    return partition_of(name, count)


def run_job_id(name: str, tag: str, count: int = DEFAULT_PARTITIONS) -> str:
    """The deterministic job id of the run of `name` tagged `tag` (a due time or a start id),
    in the cron job's partition of `count`: uuid5 names are drawn in a fixed order until
    one falls there (`count` draws on average; every process draws the same sequence)."""
    want = schedule_partition(name, count)
    base = f"{name}@{tag}"
    job_id, draw = str(uuid.uuid5(RUN_NAMESPACE, base)), 0
    while partition_of(job_id, count) != want:
        draw += 1
        job_id = str(uuid.uuid5(RUN_NAMESPACE, f"{base}/{draw}"))
    return job_id
