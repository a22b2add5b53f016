"""Forecast accuracy: how close `peloton job forecast` comes to when pending tasks really start.

Run as `python -m tests.bench.bench_forecast`.  For each trace (the simulation's sample,
docs/examples/simulation, and a synthetic Google-format one: task_events rows generated with
a seeded RNG and read by the real importer) the real scheduler replays the trace on a
simulated clock; every `EVERY` simulated seconds the live state is read exactly as the
resource manager's ForecastService reads it (`LiveState` over the replay's daemons and
store) and every pending task's start is forecast (one run of the snapshot, all pending
tasks as targets).  Each forecast start is compared with the task's actual start:

* **no future arrivals**: against a replay of the trace cut at that instant (jobs submitted
  after it never come).  With the true durations given, the forecast should be exact;
* **with arrivals**: against the full replay (later jobs may overtake or delay it: what the
  forecast cannot know);
* **estimated durations**: durations as the service estimates them (the job's finished
  runs, else a default hour), against the replay cut at that instant.

Per task, a job's identical instances may start in another order in the forecast than in
the replay (same times, other instances); the per-job figure (the last pending task's start,
what `peloton job forecast JOB` answers) does not depend on it.

Reported: median and p90 absolute error in seconds (nearest rank) and the tasks compared.
A task not started by the end of the horizon in either run is left out (counted in the note).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from peloton.cluster.forecast import LiveState, rotation_of
from peloton.core.forecast.model import DurationSource, Snapshot
from peloton.core.model.resources import Resources
from peloton.simulation.cluster import ClusterSpec, HostGroup, load_cluster
from peloton.simulation.daemons import SimulatedCluster
from peloton.simulation.driver import job_id_for
from peloton.simulation.forecast_plan import build
from peloton.simulation.forecast_run import start_times
from peloton.simulation.google_trace import import_task_events, parse_rows
from peloton.simulation.jobs import job_spec_for
from peloton.simulation.observer import TaskObserver
from peloton.simulation.pools import PoolsSpec, load_pools
from peloton.simulation.result import TaskEventKind
from peloton.simulation.trace import Trace, TraceJob
from peloton.simulation.trace_io import load_trace
from tests.bench.common import report, scaled

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples" / "simulation"
#: Simulated seconds between forecast instants, and how far each forecast looks.
EVERY = scaled(1800.0, smoke=3600.0)
HORIZON = 6 * 3600.0
Key = tuple[str, int]


class _Starts:
    """A recorder keeping every start of each task (a preempted task starts again)."""

    def __init__(self) -> None:
        self.all: dict[Key, list[float]] = {}
        self.current: dict[Key, float] = {}

    def pool_sample(self, *args: object, **kw: object) -> None:
        """Not used."""

    def cluster_sample(self, *args: object, **kw: object) -> None:
        """Not used."""

    def task_event(self, t: float, kind: TaskEventKind, job: str, instance: int, *,
                   reason: str = "") -> None:
        """Keep starts."""
        if kind is TaskEventKind.STARTED:
            self.all.setdefault((job, instance), []).append(t)
            self.current[(job, instance)] = t

    def finish(self, end: float) -> None:
        """Not used."""


@dataclass
class Replay:
    """One replay: every start of every task, and the snapshots taken on the way."""

    starts: dict[Key, list[float]]
    snapshots: dict[float, tuple[Snapshot, Snapshot]]  # t -> (estimated, exact durations)

    def next_starts(self, at: float) -> dict[Key, float]:
        """Each task's first start at or after `at` (when a task pending then started)."""
        out = {}
        for key, times in self.starts.items():
            later = [t for t in times if t >= at]
            if later:
                out[key] = later[0]
        return out


def replay(trace: Trace, cluster: ClusterSpec, pools: PoolsSpec,
           snapshot_at: Sequence[float] = (), grace: float = HORIZON) -> Replay:
    """Replay `trace` through the real daemons (as the driver steps them), reading live state
    at each of `snapshot_at`, until `grace` seconds after the trace's ideal end."""
    starts = _Starts()
    sim: SimulatedCluster
    observer = TaskObserver(starts, lambda: sim.now)
    by_id: dict[str, TraceJob] = {}

    def duration(job_id: str, instance: int) -> float:
        return by_id[job_id].duration_of(instance) or math.inf

    sim = SimulatedCluster(epoch=0.0, durations=duration, preemption=cluster.preemption,
                           watcher=observer.task_changed)
    sim.start(cluster.hosts(), ((p.path, p.config) for p in pools))
    jobs, todo = trace.jobs, sorted(snapshot_at)
    snaps: dict[float, tuple[Snapshot, Snapshot]] = {}
    t, nxt_job = 0.0, 0
    horizon = trace.ideal_end() + grace
    try:
        while True:
            sim.advance_to(t)
            while nxt_job < len(jobs) and jobs[nxt_job].submit <= t:
                job_id = job_id_for(nxt_job)
                by_id[job_id] = jobs[nxt_job]
                sim.submit(job_spec_for(jobs[nxt_job], jobs[nxt_job].pool), job_id)
                observer.submitted(job_id, jobs[nxt_job])
                nxt_job += 1
            sim.run_instant()
            while todo and todo[0] <= t:
                todo.pop(0)
                live = LiveState(sim.resmgr, sim.hostmgr, sim.store, now=sim.clock.now,
                                 rotation=rotation_of(sim.hostmgr, sim.placement))
                estimated = live.snapshot("")
                snaps[t] = (estimated, _exact(estimated, by_id, starts, t))
            if nxt_job == len(jobs) and not todo and observer.all_batch_finished:
                break
            times = [x for x in (jobs[nxt_job].submit if nxt_job < len(jobs) else None,
                                 todo[0] if todo else None, sim.next_due()) if x is not None]
            if not times or min(times) > horizon:
                break
            t = max(sim.now, min(times))
    finally:
        sim.close()
    names = {job_id_for(i): j.job for i, j in enumerate(jobs)}
    ids = {name: job_id for job_id, name in names.items()}
    return Replay({(ids[job], i): times for (job, i), times in starts.all.items()}, snaps)


def _exact(snap: Snapshot, by_id: dict[str, TraceJob], starts: _Starts, now: float) -> Snapshot:
    """`snap` with every duration the trace's own (given: exact)."""
    def end(job_id: str, instance: int) -> float | None:
        job = by_id[job_id]
        secs = job.duration_of(instance)
        began = starts.current.get((job.job, instance), now)
        return None if secs is None else max(began + secs - now, 1e-3)
    return replace(
        snap,
        running=tuple(replace(r, remaining=end(r.job_id, r.instance), source=DurationSource.GIVEN,
                              duration=by_id[r.job_id].duration_of(r.instance))
                      for r in snap.running),
        queued=tuple(replace(q, duration=by_id[q.job_id].duration_of(q.instance),
                             source=DurationSource.GIVEN) for q in snap.queued))


def forecast_all(snap: Snapshot, horizon: float = HORIZON) -> dict[Key, float]:
    """The forecast start (seconds after the snapshot) of every queued task, in one run."""
    targets = frozenset((q.job_id, q.instance) for q in snap.queued)
    if not targets:
        return {}
    fs = build(snap, targets, horizon=horizon)
    return start_times(fs, deadline=math.inf)


def _rank(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)), 1) - 1] if ordered else math.nan


def _abs_error(predicted: float, actual: float) -> float:
    """|predicted - actual| to the microsecond: the two runs count time from other origins
    (the forecast's now is its t = 6 s), so equal instants differ by float rounding."""
    return round(abs(predicted - actual), 6)


def errors(predicted: dict[Key, float], actual: dict[Key, float], at: float) -> tuple[list[float], int]:
    """Absolute errors over the tasks both know, and how many were left out."""
    out, left = [], 0
    for key, secs in predicted.items():
        if key in actual:
            out.append(_abs_error(secs, actual[key] - at))
        else:
            left += 1
    return out, left


def job_errors(predicted: dict[Key, float], actual: dict[Key, float],
               at: float) -> tuple[list[float], int]:
    """Absolute errors of each job's last pending start (what `peloton job forecast JOB`
    answers), over the jobs whose pending tasks both runs started."""
    jobs: dict[str, list[Key]] = {}
    for key in predicted:
        jobs.setdefault(key[0], []).append(key)
    out, left = [], 0
    for keys in jobs.values():
        if all(k in actual for k in keys):
            out.append(_abs_error(max(predicted[k] for k in keys),
                                  max(actual[k] for k in keys) - at))
        else:
            left += 1
    return out, left


def google_trace(seed: int = 7, jobs: int = 60) -> Trace:
    """A synthetic Google-format trace: task_events rows from a seeded RNG, through the real
    importer (pools by priority band: /free, /batch, /production)."""
    rng = random.Random(seed)
    rows, t = [], 600_000_000  # microseconds; the window starts at 600 s
    for j in range(jobs):
        t += int(rng.expovariate(1 / 240.0) * 1e6)
        priority = rng.choice([0, 1, 4, 4, 4, 9, 10])
        cpu, mem = rng.choice([0.0625, 0.125, 0.25]), rng.choice([0.01, 0.02, 0.05])
        for task in range(rng.randint(1, 20)):
            start = t + int(rng.uniform(0, 5) * 1e6)
            end = start + int(rng.uniform(300, 3600) * 1e6)
            job = 6_250_000_000 + j
            rows.append(f"{t},,{job},{task},,0,u,0,{priority},{cpu},{mem},0.001,0")
            rows.append(f"{start},,{job},{task},m1,1,u,0,{priority},{cpu},{mem},0.001,0")
            rows.append(f"{end},,{job},{task},m1,4,u,0,{priority},{cpu},{mem},0.001,0")
    rows.sort(key=lambda r: int(r.split(",", 1)[0]))
    trace, _ = import_task_events(parse_rows(rows, "synthetic"))
    return trace


def google_setup() -> tuple[ClusterSpec, PoolsSpec]:
    """8 hosts of 32 cpu; the importer's three pools sharing them 1:2:4."""
    from peloton.core.model.resources import ResourceKind
    from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
    from peloton.simulation.pools import PoolSpec

    cluster = ClusterSpec((HostGroup("node", 8, Resources(cpu=32, mem_mb=131072,
                                                          disk_mb=1_000_000)),))
    pools = []
    for name, share, reservation in (("free", 1, 0), ("batch", 2, 64), ("production", 4, 96)):
        cfg = ResourcePoolConfig(name, "root", tuple(
            ResourceConfig(kind, reservation=reservation * scale, limit=256 * scale,
                           share=share)
            for kind, scale in ((ResourceKind.CPU, 1), (ResourceKind.MEMORY, 4096),
                                (ResourceKind.DISK, 4000))))
        pools.append(PoolSpec(f"/{name}", cfg))
    return cluster, PoolsSpec(tuple(pools))


def measure(name: str, trace: Trace, cluster: ClusterSpec, pools: PoolsSpec) -> None:
    """Every figure of one trace (module docstring)."""
    started = time.perf_counter()
    last = max(j.submit for j in trace.jobs)
    instants = [EVERY * k for k in range(1, int(last // EVERY) + 1)]
    full = replay(trace, cluster, pools, instants)
    figures: dict[str, tuple[list[float], int]] = {
        "exact": ([], 0), "exact_job": ([], 0), "arrivals": ([], 0), "estimated": ([], 0)}
    forecasts = 0
    for at, (estimated, exact) in sorted(full.snapshots.items()):
        if not exact.queued:
            continue
        cut = Trace(trace.header, tuple(j for j in trace.jobs if j.submit <= at))
        alone = replay(cut, cluster, pools).next_starts(at)
        predicted = forecast_all(exact)
        guessed = forecast_all(estimated)
        forecasts += 2
        for label, pred, truth in (("exact", predicted, alone),
                                   ("arrivals", predicted, full.next_starts(at)),
                                   ("estimated", guessed, alone)):
            errs, left = errors(pred, truth, at)
            figures[label] = (figures[label][0] + errs, figures[label][1] + left)
        errs, left = job_errors(predicted, alone, at)
        figures["exact_job"] = (figures["exact_job"][0] + errs, figures["exact_job"][1] + left)
    wall = time.perf_counter() - started
    notes = {"exact": "true durations, no arrivals after the instant: should be 0 (a job's "
                      "instances may start in another order: the job figure below)",
             "exact_job": "as exact, per job: its last pending task's start (the CLI's answer)",
             "arrivals": "true durations, later jobs arrive as in the trace",
             "estimated": "durations as the service estimates them, no arrivals"}
    for label, (errs, left) in figures.items():
        note = (f"{notes[label]}; {len(errs)} at {len(full.snapshots)} instants every "
                f"{EVERY:g} s, {left} left out (not started in one of the runs)")
        report(f"forecast.{name}.{label}.p50_abs_error", _rank(errs, 50), "s", note=note)
        report(f"forecast.{name}.{label}.p90_abs_error", _rank(errs, 90), "s")
        report(f"forecast.{name}.{label}.count", float(len(errs)),
               "jobs" if label == "exact_job" else "tasks")
    report(f"forecast.{name}.wall", wall, "s",
           note=f"replays and {forecasts} forecast runs, one core")


def main() -> None:
    """Both traces."""
    measure("sample", load_trace(EXAMPLES / "sample-trace.jsonl"),
            load_cluster(EXAMPLES / "cluster.yaml"), load_pools(EXAMPLES / "pools.yaml"))
    cluster, pools = google_setup()
    measure("google_synthetic", google_trace(), cluster, pools)


if __name__ == "__main__":
    main()
