"""The workload trace: jobs with a submit time, a pool, instances, resources and durations.

A trace is what a simulation replays.  Time is seconds since the trace's start
(t = 0); `TraceHeader.start` optionally says which wall-clock moment that was.
The rules a job must satisfy live here (`check_job`), so the JSON-lines reader,
the importers and the exporter all enforce the same ones; the format itself is in
`trace_io` and documented in README.md beside this file.

Invariants of a `Trace` (checked by `check_trace`): job ids are unique and jobs
are in non-decreasing submit order, so a simulator can stream them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Constraint
from peloton.core.model.job import MAX_INSTANCES_PER_JOB
from peloton.core.model.resources import Resources
from peloton.core.states import JobType

#: The trace format this code reads and writes.
FORMAT = "peloton-sim-trace"
VERSION = 1

#: Job ids: letters, digits and . _ : @ - (what exporters and importers produce; no spaces).
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
#: Pool paths: /a/b, segments without spaces or slashes.
POOL_PATH = re.compile(r"^(/[^/\s]+)+$")
#: Largest Peloton priority (a uint32 on the wire).
MAX_PRIORITY = 2**32 - 1
#: Job types a trace may hold: batch work ends, services run until the simulation ends.
TRACE_JOB_TYPES = (JobType.BATCH, JobType.SERVICE)


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """The first line of a trace: its format version and where it came from."""

    version: int = VERSION
    name: str = ""
    #: Wall-clock epoch seconds of t = 0 (informational; 0 = unknown).
    start: float = 0.0
    #: Free text: which exporter or importer wrote it, from what.
    source: str = ""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of the trace: `instances` identical tasks submitted together.

    `duration` is how long each instance runs once started (None for a SERVICE,
    which runs until the simulation ends); `durations`, when not empty, gives each
    instance its own duration instead (one per instance).
    """

    job: str
    submit: float
    pool: str
    instances: int
    resources: Resources
    duration: float | None = None
    durations: tuple[float, ...] = ()
    priority: int = 0
    preemptible: bool = True
    type: JobType = JobType.BATCH
    constraint: Constraint | None = None
    #: At most one instance of this job per host.
    one_per_host: bool = False

    def duration_of(self, instance: int) -> float | None:
        """How long instance `instance` runs (None: until the simulation ends)."""
        if self.durations:
            return self.durations[instance]
        return self.duration

    @property
    def tasks(self) -> int:
        """Number of tasks (instances)."""
        return self.instances


@dataclass(frozen=True, slots=True)
class Trace:
    """A header and the jobs, in submit order."""

    header: TraceHeader
    jobs: tuple[TraceJob, ...]

    def __iter__(self) -> Iterator[TraceJob]:
        return iter(self.jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def task_count(self) -> int:
        """Tasks over all jobs."""
        return sum(j.instances for j in self.jobs)

    def pools(self) -> tuple[str, ...]:
        """The pools the jobs name, sorted."""
        return tuple(sorted({j.pool for j in self.jobs}))

    def ideal_end(self) -> float:
        """When the last batch task would end if every task started at its submit time."""
        end = 0.0
        for job in self.jobs:
            longest = max(job.durations) if job.durations else (job.duration or 0.0)
            end = max(end, job.submit + longest)
        return end


def _finite(value: float, field: str, *, minimum: float = 0.0, strict: bool = False) -> None:
    if not math.isfinite(value) or value < minimum or (strict and value <= minimum):
        op = ">" if strict else ">="
        raise InvalidArgument(f"must be a finite number {op} {minimum:g}, got {value!r}", field=field)


def check_job(job: TraceJob) -> None:
    """Raise InvalidArgument (naming the field) unless `job` obeys every rule of the format."""
    if not JOB_ID.match(job.job):
        raise InvalidArgument(f"job id {job.job!r} must be 1-128 of A-Z a-z 0-9 . _ : @ - "
                              "(starting with a letter or digit)", field="job")
    _finite(job.submit, "submit")
    if not POOL_PATH.match(job.pool):
        raise InvalidArgument(f"pool {job.pool!r} must be an absolute path like /batch/adhoc",
                              field="pool")
    if not 1 <= job.instances <= MAX_INSTANCES_PER_JOB:
        raise InvalidArgument(f"must be between 1 and {MAX_INSTANCES_PER_JOB:,}, got {job.instances}",
                              field="instances")
    for name, amount in (("cpu", job.resources.cpu), ("mem_mb", job.resources.mem_mb),
                         ("disk_mb", job.resources.disk_mb), ("gpu", job.resources.gpu)):
        _finite(amount, f"resources.{name}")
    if job.resources.is_zero():
        raise InvalidArgument("a task must ask for some cpu, memory, disk or gpu", field="resources")
    if job.type not in TRACE_JOB_TYPES:
        raise InvalidArgument(f"must be BATCH or SERVICE, got {job.type.value}", field="type")
    _check_durations(job)
    if not 0 <= job.priority <= MAX_PRIORITY:
        raise InvalidArgument(f"must be between 0 and {MAX_PRIORITY}, got {job.priority}",
                              field="priority")


def _check_durations(job: TraceJob) -> None:
    if job.type is JobType.SERVICE:
        if job.duration is not None or job.durations:
            raise InvalidArgument("a SERVICE runs until the simulation ends: give no duration",
                                  field="duration")
        return
    if job.duration is None and not job.durations:
        raise InvalidArgument("a BATCH job needs a duration (seconds each instance runs)",
                              field="duration")
    if job.duration is not None:
        _finite(job.duration, "duration", strict=True)
    if job.durations:
        if len(job.durations) != job.instances:
            raise InvalidArgument(f"has {len(job.durations)} entries for {job.instances} instances",
                                  field="durations")
        for i, value in enumerate(job.durations):
            _finite(value, f"durations[{i}]", strict=True)


def check_trace(jobs: Sequence[TraceJob]) -> None:
    """Every job valid, ids unique, submit times non-decreasing (InvalidArgument naming the job)."""
    seen: set[str] = set()
    last = 0.0
    for job in jobs:
        try:
            check_job(job)
        except InvalidArgument as exc:
            raise InvalidArgument(f"job {job.job!r}: {exc.message}", field=exc.field) from None
        if job.job in seen:
            raise InvalidArgument(f"job id {job.job!r} appears twice", field="job")
        if job.submit < last:
            raise InvalidArgument(f"job {job.job!r} is submitted at {job.submit:g}, before the job "
                                  f"before it ({last:g}); jobs must be in submit order", field="submit")
        seen.add(job.job)
        last = job.submit
