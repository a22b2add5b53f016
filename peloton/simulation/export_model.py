"""Turn what a live cluster recorded about its jobs into a trace, anonymised (the exporter's pure half).

`export.py` reads jobs from a store and an archive into `ObservedJob`s; this
module decides what they become:

- submit = the job's creation time, in seconds after the earliest exported job's
  (the header's `start` keeps that moment, as epoch seconds);
- each task's duration = its completion time minus its start time; a task still
  running counts until `now`; a task that never started takes the median duration
  of its job's tasks that did, and a job none of whose tasks started takes
  `unknown_duration` (both counted in the stats, so the user knows how much is
  guessed);
- resources per task = the job's default task resources, or the largest of any
  per-instance override, per kind; priority and preemptible from the job's SLA;
  the default task's constraint; BATCH stays BATCH, SERVICE (and stateful) jobs
  become SERVICEs; DAEMON jobs (one task per host) are left out (counted);
- names are anonymised by default: job ids become `j-<hash>`, every pool path
  segment `p-<hash>`, the values of TASK constraint labels (often job names) are
  hashed; HOST constraint labels (zones, racks) are kept, as they name
  infrastructure the CLUSTER.yaml must reproduce.  The hash is HMAC-SHA256 keyed
  with the salt, so the same name gives the same hash across exports with the same
  salt (pools stay comparable), and without the salt names cannot be guessed by
  hashing candidate names.
"""

from __future__ import annotations

import hashlib
import hmac
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from peloton.core.model.constraints import (
    AndConstraint,
    Constraint,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.model.resources import Resources
from peloton.core.model.respool import ResourcePool
from peloton.core.respool.tree import PoolTree
from peloton.core.states import JobType
from peloton.simulation.pools import PoolSpec, PoolsSpec
from peloton.simulation.trace import POOL_PATH, Trace, TraceHeader, TraceJob, check_trace

#: Hex digits of a hash kept in an anonymised name (48 bits: collisions are checked anyway).
HASH_DIGITS = 12
#: Duration given to a batch job none of whose tasks ever started, by default.
DEFAULT_UNKNOWN_DURATION = 600.0


@dataclass(frozen=True, slots=True)
class ObservedTask:
    """One task's current run as the cluster recorded it (0 = not set)."""

    instance: int
    start: float
    completion: float


@dataclass(frozen=True, slots=True)
class ObservedJob:
    """A job as the cluster recorded it, reduced to what a trace needs."""

    job_id: str
    type: JobType
    pool_path: str
    created: float
    instances: int
    resources: Resources
    priority: int
    preemptible: bool
    constraint: Constraint | None
    tasks: tuple[ObservedTask, ...]


@dataclass
class ExportStats:
    """What the export kept, guessed and left out."""

    jobs: int = 0
    tasks: int = 0
    daemons_skipped: int = 0
    unreadable_skipped: int = 0
    from_archive: int = 0
    tasks_still_running: int = 0
    tasks_median_duration: int = 0
    jobs_unknown_duration: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """A summary for stderr."""
        return [f"exported {self.jobs} jobs ({self.from_archive} from the archive), {self.tasks} tasks",
                f"left out: {self.daemons_skipped} daemon jobs, {self.unreadable_skipped} jobs whose "
                "config could not be read",
                f"durations: {self.tasks_still_running} tasks still running (counted until now), "
                f"{self.tasks_median_duration} tasks never started (their job's median), "
                f"{self.jobs_unknown_duration} jobs with no started task (the default duration)",
                *self.notes]


class Anonymiser:
    """Stable, salted names for jobs, pools and task labels; identity when disabled."""

    def __init__(self, salt: str = "", enabled: bool = True) -> None:
        self.enabled = enabled
        self._key = salt.encode()
        self._jobs: dict[str, str] = {}
        self._taken: dict[str, str] = {}

    def _hash(self, kind: str, value: str) -> str:
        digest = hmac.new(self._key, f"{kind}\x00{value}".encode(), hashlib.sha256).hexdigest()
        return digest[:HASH_DIGITS]

    def job(self, job_id: str) -> str:
        """The trace id of a job (its UUID when not anonymising)."""
        if not self.enabled:
            return job_id
        name = self._jobs.get(job_id)
        if name is None:
            name = f"j-{self._hash('job', job_id)}"
            if self._taken.get(name, job_id) != job_id:  # a 48-bit collision: take more digits
                name = f"j-{hmac.new(self._key, job_id.encode(), hashlib.sha256).hexdigest()}"
            self._jobs[job_id] = name
            self._taken[name] = job_id
        return name

    def pool(self, path: str) -> str:
        """A pool path with every segment hashed (the hash of a segment depends on its whole path)."""
        if not self.enabled or path == "/":
            return path
        parts = [p for p in path.split("/") if p]
        return "".join(f"/p-{self._hash('pool', '/' + '/'.join(parts[:i + 1]))}"
                       for i in range(len(parts)))

    def constraint(self, constraint: Constraint | None) -> Constraint | None:
        """The constraint with TASK label values hashed (HOST labels kept)."""
        if constraint is None or not self.enabled:
            return constraint
        if isinstance(constraint, AndConstraint):
            return AndConstraint(tuple(self._leaf_or_tree(c) for c in constraint.children))
        if isinstance(constraint, OrConstraint):
            return OrConstraint(tuple(self._leaf_or_tree(c) for c in constraint.children))
        if constraint.kind is LabelKind.HOST:
            return constraint
        label = Label(constraint.label.key, f"h-{self._hash('label', constraint.label.value)}")
        return LabelConstraint(constraint.kind, constraint.condition, label, constraint.requirement)

    def _leaf_or_tree(self, c: Constraint) -> Constraint:
        out = self.constraint(c)
        assert out is not None
        return out


def _durations(job: ObservedJob, now: float, stats: ExportStats) -> list[float | None]:
    out: list[float | None] = []
    runs = {t.instance: t for t in job.tasks}
    for instance in range(job.instances):
        task = runs.get(instance)
        if task is None or task.start <= 0:
            out.append(None)
            continue
        end = task.completion if task.completion > 0 else now
        if task.completion <= 0:
            stats.tasks_still_running += 1
        out.append(end - task.start if end > task.start else None)
    return out


def to_trace_job(job: ObservedJob, origin: float, *, now: float, unknown_duration: float,
                 anonymiser: Anonymiser, stats: ExportStats) -> TraceJob | None:
    """One observed job as a trace job (None for a DAEMON job)."""
    if job.type is JobType.DAEMON:
        stats.daemons_skipped += 1
        return None
    if job.resources.is_zero():
        stats.unreadable_skipped += 1
        stats.notes.append(f"job {anonymiser.job(job.job_id)}: its tasks ask for no resources")
        return None
    duration: float | None = None
    durations: tuple[float, ...] = ()
    if job.type is JobType.BATCH:
        measured = _durations(job, now, stats)
        known = [d for d in measured if d is not None]
        if not known:
            stats.jobs_unknown_duration += 1
            duration = unknown_duration
        else:
            stats.tasks_median_duration += len(measured) - len(known)
            median = statistics.median(known)
            filled = tuple(median if d is None else d for d in measured)
            if all(d == filled[0] for d in filled):
                duration = filled[0]
            else:
                duration, durations = median, filled
    stats.jobs += 1
    stats.tasks += job.instances
    return TraceJob(job=anonymiser.job(job.job_id), submit=max(0.0, job.created - origin),
                    pool=anonymiser.pool(job.pool_path), instances=job.instances,
                    resources=job.resources, duration=duration, durations=durations,
                    priority=job.priority, preemptible=job.preemptible,
                    type=JobType.SERVICE if job.type is not JobType.BATCH else JobType.BATCH,
                    constraint=anonymiser.constraint(job.constraint))


def build_trace(jobs: Iterable[ObservedJob], *, now: float, anonymiser: Anonymiser,
                unknown_duration: float = DEFAULT_UNKNOWN_DURATION, name: str = "export",
                source: str = "", stats: ExportStats | None = None) -> tuple[Trace, ExportStats]:
    """The trace of `jobs` (any order; sorted by creation time, then job id)."""
    stats = stats or ExportStats()
    ordered = sorted(jobs, key=lambda j: (j.created, j.job_id))
    origin = ordered[0].created if ordered else 0.0
    out: list[TraceJob] = []
    for job in ordered:
        if not POOL_PATH.match(job.pool_path):
            stats.unreadable_skipped += 1
            stats.notes.append(f"job {anonymiser.job(job.job_id)}: no usable pool path")
            continue
        converted = to_trace_job(job, origin, now=now, unknown_duration=unknown_duration,
                                 anonymiser=anonymiser, stats=stats)
        if converted is not None:
            out.append(converted)
    out.sort(key=lambda j: (j.submit, j.job))
    check_trace(out)
    header = TraceHeader(name=name, start=origin, source=source)
    return Trace(header, tuple(out)), stats


def largest(resources: Sequence[Resources]) -> Resources:
    """Kind-wise maximum of several resource vectors (zero for none)."""
    out = Resources()
    for r in resources:
        out = out.max(r)
    return out


def pool_paths(pools: Sequence[ResourcePool]) -> dict[str, str]:
    """Pool id -> path, for the pools a store holds."""
    tree = PoolTree.from_pools(pools)
    return {node.pool_id: node.path for node in tree.nodes() if not node.is_root}


def pools_spec(pools: Sequence[ResourcePool], anonymiser: Anonymiser) -> PoolsSpec:
    """A store's pool tree as a POOLS.yaml spec, names anonymised like the trace's pool paths."""
    tree = PoolTree.from_pools(pools)
    out: list[PoolSpec] = []
    for node in tree.nodes():
        if node.is_root:
            continue
        path = anonymiser.pool(node.path)
        parent = path.rsplit("/", 1)[0]
        config = replace(node.config, name=path.rsplit("/", 1)[1], parent_id=parent or ROOT_POOL_ID)
        if anonymiser.enabled:
            config = replace(config, owning_team="", ldap_groups=(), description="")
        out.append(PoolSpec(path, config))
    return PoolsSpec(tuple(out))
