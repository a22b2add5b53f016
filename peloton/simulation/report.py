"""The report's numbers: per pool over time, per run, and a what-if against its baseline.

`build_report(result)` computes, from one `SimulationResult`:
- per pool (every pool; an inner pool's task numbers cover its leaves): jobs and
  tasks submitted, started, finished, never ran, preemptions, lost; wait-time
  count / mean / p50 / p90 / p99 / max (metrics.percentile, nearest rank); demand,
  entitlement and allocation as time-weighted means over [0, end]; mean and peak
  pending count; and the same per time bucket (`buckets` equal intervals);
- the cluster: capacity, used, utilisation = used resource-seconds over capacity
  resource-seconds (per kind), overall and per bucket;
- jobs that never ran (some task never started): tasks and the most common reason,
  and the reasons over all such tasks.

`compare(baseline, whatif)` pairs the headline numbers of two reports (same pools)
as baseline / what-if / delta rows.  Everything is a frozen value; rendering is in
report_text, report_json, report_html and plots.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from peloton.simulation.metrics import (
    Amounts,
    ResourceSeries,
    StepSeries,
    bucket_edges,
    percentile,
    ratio,
)
from peloton.simulation.result import SimulationResult, TaskEventKind, TaskOutcome

DEFAULT_BUCKETS = 12


@dataclass(frozen=True, slots=True)
class WaitStats:
    """Wait times (first start minus submit) of the tasks that started; None without any."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    @staticmethod
    def of(waits: Sequence[float]) -> WaitStats:
        """Statistics of `waits` (seconds)."""
        if not waits:
            return WaitStats(0, None, None, None, None, None)
        return WaitStats(len(waits), sum(waits) / len(waits), percentile(waits, 50),
                         percentile(waits, 90), percentile(waits, 99), max(waits))


@dataclass(frozen=True, slots=True)
class PoolBucket:
    """One pool over one time interval: means of its samples, and preemptions in it."""

    start: float
    end: float
    demand: Amounts
    entitlement: Amounts
    allocation: Amounts
    pending: float
    preemptions: int


@dataclass(frozen=True, slots=True)
class PoolReport:
    """One pool over the whole run."""

    path: str
    leaf: bool
    jobs: int
    tasks: int
    started: int
    finished: int
    never_ran: int
    preemptions: int
    lost: int
    wait: WaitStats
    demand: Amounts
    entitlement: Amounts
    allocation: Amounts
    pending_mean: float
    pending_peak: int
    series: tuple[PoolBucket, ...]


@dataclass(frozen=True, slots=True)
class ClusterBucket:
    """The cluster over one time interval (means), and its utilisation per kind."""

    start: float
    end: float
    capacity: Amounts
    used: Amounts
    hosts: float
    utilisation: Amounts


@dataclass(frozen=True, slots=True)
class ClusterReport:
    """The cluster over the whole run."""

    capacity: Amounts
    used: Amounts
    utilisation: Amounts
    hosts_mean: float
    series: tuple[ClusterBucket, ...]


@dataclass(frozen=True, slots=True)
class NeverRan:
    """A job some of whose tasks never started, and the most common reason given."""

    job: str
    pool: str
    tasks: int
    reason: str


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything the report says about one run."""

    label: str
    trace_name: str
    end: float
    horizon: float
    sample_interval: float
    seed: int
    jobs: int
    tasks: int
    finished: int
    changes: tuple[str, ...]
    arrival_scale: float
    wait: WaitStats
    pools: tuple[PoolReport, ...]
    cluster: ClusterReport
    never_ran: tuple[NeverRan, ...]
    reasons: tuple[tuple[str, int], ...]

    def pool(self, path: str) -> PoolReport:
        """The report of pool `path` (KeyError if none)."""
        for pool in self.pools:
            if pool.path == path:
                return pool
        raise KeyError(path)


def _utilisation(used: Amounts, capacity: Amounts) -> Amounts:
    return Amounts(cpu=ratio(used.cpu, capacity.cpu), mem_mb=ratio(used.mem_mb, capacity.mem_mb),
                     disk_mb=ratio(used.disk_mb, capacity.disk_mb), gpu=ratio(used.gpu, capacity.gpu))


def _in_pool(task_pool: str, path: str) -> bool:
    return task_pool == path or task_pool.startswith(path + "/")


def _pool_report(result: SimulationResult, path: str, tasks: Sequence[TaskOutcome],
                 edges: Sequence[tuple[float, float]]) -> PoolReport:
    samples = result.pool_samples.get(path, ())
    times = [s.t for s in samples]
    demand = ResourceSeries(times, [s.demand for s in samples])
    entitlement = ResourceSeries(times, [s.entitlement for s in samples])
    allocation = ResourceSeries(times, [s.allocation for s in samples])
    pending = StepSeries(times, [float(s.pending) for s in samples])
    stops = [i for i in result.interruptions
             if i.kind is TaskEventKind.PREEMPTED and _in_pool(i.pool, path)]
    end = result.end
    series = tuple(PoolBucket(a, b, demand.mean(a, b), entitlement.mean(a, b), allocation.mean(a, b),
                              pending.mean(a, b),
                              sum(1 for s in stops if a <= s.t < b or (b == end and s.t == end)))
                   for a, b in edges)
    waits = [t.wait for t in tasks if t.wait is not None]
    return PoolReport(
        path=path, leaf=path in result.leaves, jobs=len({t.job for t in tasks}), tasks=len(tasks),
        started=sum(1 for t in tasks if t.first_start is not None),
        finished=sum(1 for t in tasks if t.finished is not None),
        never_ran=sum(1 for t in tasks if t.first_start is None),
        preemptions=sum(t.preemptions for t in tasks), lost=sum(t.lost for t in tasks),
        wait=WaitStats.of(waits), demand=demand.mean(0.0, end),
        entitlement=entitlement.mean(0.0, end), allocation=allocation.mean(0.0, end),
        pending_mean=pending.mean(0.0, end), pending_peak=int(pending.peak(0.0, end)), series=series)


def _cluster_report(result: SimulationResult, edges: Sequence[tuple[float, float]]) -> ClusterReport:
    samples = result.cluster_samples
    times = [s.t for s in samples]
    capacity = ResourceSeries(times, [s.capacity for s in samples])
    used = ResourceSeries(times, [s.used for s in samples])
    hosts = StepSeries(times, [float(s.hosts) for s in samples])

    def bucket(a: float, b: float) -> ClusterBucket:
        if b > a:
            util = _utilisation(used.integral(a, b), capacity.integral(a, b))
        else:
            util = _utilisation(used.mean(a, b), capacity.mean(a, b))
        return ClusterBucket(a, b, capacity.mean(a, b), used.mean(a, b), hosts.mean(a, b), util)

    whole = bucket(0.0, result.end)
    return ClusterReport(capacity=whole.capacity, used=whole.used, utilisation=whole.utilisation,
                         hosts_mean=whole.hosts, series=tuple(bucket(a, b) for a, b in edges))


def _never_ran(tasks: Sequence[TaskOutcome]) -> tuple[tuple[NeverRan, ...], tuple[tuple[str, int], ...]]:
    by_job: dict[str, list[TaskOutcome]] = defaultdict(list)
    reasons: Counter[str] = Counter()
    for task in tasks:
        if task.first_start is None:
            by_job[task.job].append(task)
            reasons[task.pending_reason or "unknown"] += 1
    rows = []
    for job, waiting in by_job.items():
        counts = Counter(t.pending_reason or "unknown" for t in waiting)
        reason = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        rows.append(NeverRan(job, waiting[0].pool, len(waiting), reason))
    ordered = tuple(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    return tuple(rows), ordered


def build_report(result: SimulationResult, buckets: int = DEFAULT_BUCKETS) -> RunReport:
    """The report of one run (see the module docstring)."""
    edges = bucket_edges(result.end, buckets)
    by_pool: dict[str, list[TaskOutcome]] = {p: [] for p in result.pools}
    holders: dict[str, list[str]] = {}  # a task's pool -> the pools that contain it
    for task in result.tasks:
        paths = holders.get(task.pool)
        if paths is None:
            paths = holders[task.pool] = [p for p in result.pools if _in_pool(task.pool, p)]
        for path in paths:
            by_pool[path].append(task)
    pools = tuple(_pool_report(result, p, by_pool[p], edges) for p in result.pools)
    never, reasons = _never_ran(result.tasks)
    waits = [t.wait for t in result.tasks if t.wait is not None]
    return RunReport(
        label=result.label, trace_name=result.trace_name, end=result.end, horizon=result.horizon,
        sample_interval=result.sample_interval, seed=result.seed, jobs=result.jobs,
        tasks=len(result.tasks), finished=sum(1 for t in result.tasks if t.finished is not None),
        changes=result.changes, arrival_scale=result.arrival_scale, wait=WaitStats.of(waits),
        pools=pools, cluster=_cluster_report(result, edges), never_ran=never, reasons=reasons)


# -- what-if against baseline -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Delta:
    """One number in both runs and how it moved (None where a run has no value)."""

    metric: str
    unit: str
    baseline: float | None
    whatif: float | None
    #: Decimals a rendering shows (0 for counts).
    digits: int = 2

    @property
    def delta(self) -> float | None:
        """What-if minus baseline."""
        if self.baseline is None or self.whatif is None:
            return None
        return self.whatif - self.baseline


@dataclass(frozen=True, slots=True)
class PoolComparison:
    """The headline numbers of one pool in both runs."""

    path: str
    rows: tuple[Delta, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    """A what-if against its baseline: the cluster and every pool."""

    baseline: str
    whatif: str
    cluster: tuple[Delta, ...]
    pools: tuple[PoolComparison, ...]


def _wait_rows(a: WaitStats, b: WaitStats) -> list[Delta]:
    return [Delta("wait p50", "s", a.p50, b.p50, 1), Delta("wait p90", "s", a.p90, b.p90, 1),
            Delta("wait p99", "s", a.p99, b.p99, 1), Delta("wait max", "s", a.max, b.max, 1),
            Delta("wait mean", "s", a.mean, b.mean, 1)]


def _pool_rows(a: PoolReport, b: PoolReport) -> tuple[Delta, ...]:
    rows = _wait_rows(a.wait, b.wait)
    rows += [
        Delta("tasks started", "", a.started, b.started, 0),
        Delta("tasks finished", "", a.finished, b.finished, 0),
        Delta("never ran", "tasks", a.never_ran, b.never_ran, 0),
        Delta("preemptions", "", a.preemptions, b.preemptions, 0),
        Delta("lost", "tasks", a.lost, b.lost, 0),
        Delta("cpu demand", "cores", a.demand.cpu, b.demand.cpu),
        Delta("cpu entitlement", "cores", a.entitlement.cpu, b.entitlement.cpu),
        Delta("cpu allocation", "cores", a.allocation.cpu, b.allocation.cpu),
        Delta("pending mean", "tasks", a.pending_mean, b.pending_mean),
        Delta("pending peak", "tasks", a.pending_peak, b.pending_peak, 0),
    ]
    return tuple(rows)


def compare(baseline: RunReport, whatif: RunReport) -> Comparison:
    """The what-if's headline numbers beside the baseline's (pools matched by path)."""
    cluster = [Delta("end of run", "s", baseline.end, whatif.end, 1),
               Delta("tasks finished", "", baseline.finished, whatif.finished, 0),
               Delta("never ran", "tasks", sum(n.tasks for n in baseline.never_ran),
                     sum(n.tasks for n in whatif.never_ran), 0),
               Delta("cpu utilisation", "%", 100 * baseline.cluster.utilisation.cpu,
                     100 * whatif.cluster.utilisation.cpu, 1),
               Delta("memory utilisation", "%", 100 * baseline.cluster.utilisation.mem_mb,
                     100 * whatif.cluster.utilisation.mem_mb, 1),
               Delta("hosts up (mean)", "", baseline.cluster.hosts_mean, whatif.cluster.hosts_mean, 1),
               *_wait_rows(baseline.wait, whatif.wait)]
    other = {p.path: p for p in whatif.pools}
    pools = tuple(PoolComparison(p.path, _pool_rows(p, other[p.path]))
                  for p in baseline.pools if p.path in other)
    return Comparison(baseline.label, whatif.label, tuple(cluster), pools)
