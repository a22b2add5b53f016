"""Identifiers of jobs, tasks, runs and pools.

A job id is a UUID string.  A task is (job id, instance id) and is written
`<job>-<instance>`.  Every launch of a task is a *run* with an integer run
id that only ever grows; the id a host backend sees (Mesos' TaskID) is
`<job>-<instance>-<run>`.  Never reusing a run id is what lets a late
status update for an old run be recognised and ignored (MESOS-2198).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from peloton.core.errors import InvalidArgument
from peloton.core.model.evolve import constructor

#: Id of the root resource pool (path "/").
ROOT_POOL_ID = "root"

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def new_id() -> str:
    """A fresh random UUID string (job, update and pool ids)."""
    return str(uuid.uuid4())


def is_uuid(value: str) -> bool:
    """`value` is a UUID in its text form."""
    return bool(_UUID.match(value or ""))


def validate_uuid(value: str, field: str) -> str:
    """Return `value` lower-cased if it is a UUID, else raise InvalidArgument naming `field`."""
    if not _UUID.match(value or ""):
        raise InvalidArgument(f"{field} must be a UUID, got {value!r}", field=field)
    return value.lower()


class TaskId(NamedTuple):
    """One instance of a job.

    A named tuple rather than a dataclass: task ids are built by the hundred
    thousand on the hot paths (results of batched writes, queues, placements),
    and a tuple is several times cheaper to make, hash and compare.
    """

    job_id: str
    instance: int

    def __str__(self) -> str:
        return f"{self.job_id}-{self.instance}"

    def run(self, run_id: int) -> RunId:
        """The id of one launch of this task."""
        return RunId(self.job_id, self.instance, run_id)

    @staticmethod
    def parse(text: str) -> TaskId:
        """Parse `<job uuid>-<instance>`."""
        job, sep, inst = text.rpartition("-")
        if not sep or not inst.isdigit():
            raise InvalidArgument(f"invalid task id {text!r}", field="task_id")
        return TaskId(validate_uuid(job, "task_id"), int(inst))


@dataclass(frozen=True, slots=True, order=True)
class RunId:
    """One launch of a task; its string form is the host backend's task id."""

    job_id: str
    instance: int
    run: int

    @property
    def task(self) -> TaskId:
        """The task this run belongs to."""
        return TaskId(self.job_id, self.instance)

    def __str__(self) -> str:
        return f"{self.job_id}-{self.instance}-{self.run}"

    @staticmethod
    def parse(text: str) -> RunId:
        """Parse `<job uuid>-<instance>-<run>`."""
        rest, sep, run = text.rpartition("-")
        job, sep2, inst = rest.rpartition("-")
        if not sep or not sep2 or not run.isdigit() or not inst.isdigit():
            raise InvalidArgument(f"invalid run id {text!r}", field="task_id")
        return _new_run_id(validate_uuid(job, "task_id"), int(inst), int(run))


def run_id_text(job_id: str, instance: int, run: int) -> str:
    """`str(RunId(job_id, instance, run))` without building the RunId: the host backend's
    id of a run, made once per launch and kill on the hot paths."""
    return f"{job_id}-{instance}-{run}"


#: Builds a RunId without the frozen `__init__` (one per status event in every consumer).
_new_run_id = constructor(RunId)


class RunIdParser:
    """`RunId.parse` for status-stream consumers, validating each job's UUID once.

    Each run's id comes back in two or three status events (STARTING, RUNNING, the end) and
    a job has many runs, so a consumer keeps one of these: the job part of an id is checked
    against the UUID pattern the first time it is seen, and the checked (lower-case) string
    is shared by every RunId of that job afterwards.  Only job ids are remembered, never
    runs: a cache per run id held ~250 bytes for each of the last 100,000 runs in every
    consumer, which a cluster running big jobs one after another kept as growth
    (tests/security/test_memory.py).  Bounded: emptied when it holds `capacity` job ids.
    """

    __slots__ = ("_capacity", "_jobs")

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._jobs: dict[str, str] = {}

    def parse(self, text: str) -> RunId:
        """`RunId.parse(text)` (InvalidArgument for a bad id, whose job is not remembered)."""
        rest, sep, run = text.rpartition("-")
        job, sep2, inst = rest.rpartition("-")
        if not sep or not sep2 or not run.isdigit() or not inst.isdigit():
            raise InvalidArgument(f"invalid run id {text!r}", field="task_id")
        checked = self._jobs.get(job)
        if checked is None:
            checked = validate_uuid(job, "task_id")
            if len(self._jobs) >= self._capacity:
                self._jobs.clear()
            self._jobs[job] = checked
        return _new_run_id(checked, int(inst), int(run))
