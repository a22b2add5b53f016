"""Simulation benchmark: what the recorder, the report and the trace format cost at scale.

Run as `python -m tests.bench.bench_simulation`.  The scheduler itself is not
timed here (that is the engine's benchmark, issue 17 part B): this measures
the parts around it at the size of one day of a 10,000-host cluster, so they
are known not to be what limits a simulation.  The workload: 50 leaf pools
under 5 parents, 400,000 tasks in 20,000 jobs over 24 h, every task submitted,
started and finished (5% preempted once and restarted), pools and the cluster
sampled every 60 s.  Recorder events come from a scripted loop (no scheduler).
"""

from __future__ import annotations

import io
import random
import time

from peloton.core.model.resources import Resources
from peloton.simulation.cluster import ClusterSpec, HostGroup
from peloton.simulation.pools import PoolSpec, PoolsSpec
from peloton.simulation.recorder import ResultRecorder
from peloton.simulation.report import build_report, compare
from peloton.simulation.report_files import render_report
from peloton.simulation.result import SimulationResult
from peloton.simulation.result import TaskEventKind as K
from peloton.simulation.scenario import Scenario
from peloton.simulation.trace import Trace, TraceHeader, TraceJob
from peloton.simulation.trace_io import dump_trace, read_trace
from peloton.simulation.whatif import PlanOptions, plan
from tests.bench.common import report, rss_mb

DAY = 86400.0
HOSTS = 10_000
JOBS = 20_000
TASKS_PER_JOB = 20
SAMPLE = 60.0


def pools() -> PoolsSpec:
    from peloton.core.model.resources import ResourceKind
    from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig

    out = []
    for p in range(5):
        cpu = (ResourceConfig(ResourceKind.CPU, reservation=10_000, limit=320_000, share=1),)
        out.append(PoolSpec(f"/org{p}", ResourcePoolConfig(f"org{p}", "root", cpu)))
        for c in range(10):
            leaf = (ResourceConfig(ResourceKind.CPU, reservation=1_000, limit=320_000, share=1),)
            out.append(PoolSpec(f"/org{p}/team{c}", ResourcePoolConfig(f"team{c}", f"/org{p}", leaf)))
    return PoolsSpec(tuple(out))


def trace(rng: random.Random, leaves: tuple[str, ...]) -> Trace:
    submits = sorted(rng.uniform(0, DAY - 7200) for _ in range(JOBS))
    jobs = tuple(TraceJob(f"j{i:06d}", round(t, 3), rng.choice(leaves), TASKS_PER_JOB,
                          Resources(cpu=rng.choice([1, 2, 4]), mem_mb=4096), float(rng.randint(60, 3600)))
                 for i, t in enumerate(submits))
    return Trace(TraceHeader(name="bench-day"), jobs)


def record(scenario: Scenario, rng: random.Random) -> tuple[float, int, SimulationResult]:
    """Feed a day of events and samples to a ResultRecorder; (seconds, calls, result)."""
    rec = ResultRecorder(scenario)
    events: list[tuple[float, int, K, str, int]] = []
    for job in scenario.trace.jobs:
        for i in range(job.instances):
            start = job.submit + rng.uniform(0, 120)
            events.append((job.submit, 0, K.SUBMITTED, job.job, i))
            if rng.random() < 0.05:
                cut = start + rng.uniform(1, 30)
                events += [(start, 1, K.STARTED, job.job, i), (cut, 2, K.PREEMPTED, job.job, i)]
                start = cut + rng.uniform(1, 60)
            events += [(start, 1, K.STARTED, job.job, i),
                       (start + (job.duration or 1), 3, K.FINISHED, job.job, i)]
    events.sort()
    paths = scenario.pools.paths()
    load = Resources(cpu=500, mem_mb=1_000_000)
    capacity = Resources(cpu=HOSTS * 32, mem_mb=HOSTS * 131072)
    calls = 0
    t0 = time.perf_counter()
    next_sample = 0.0
    for t, _, kind, job_id, instance in events:
        while next_sample <= t:
            for path in paths:
                rec.pool_sample(next_sample, path, demand=load, entitlement=load, allocation=load, pending=3)
            rec.cluster_sample(next_sample, capacity=capacity, used=load, hosts=HOSTS)
            calls += len(paths) + 1
            next_sample += SAMPLE
        rec.task_event(t, kind, job_id, instance)
        calls += 1
    end = max(t for t, *_ in events)
    rec.finish(end)
    return time.perf_counter() - t0, calls, rec.result()


def main() -> None:
    rng = random.Random(17)
    spec = pools()
    tr = trace(rng, spec.leaves())
    text = dump_trace(tr)
    t0 = time.perf_counter()
    dump_trace(tr)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    read_trace(io.StringIO(text))
    read_s = time.perf_counter() - t0
    report("simulation.trace_write.jobs_per_s", JOBS / write_s, "jobs/s", note=f"{JOBS:,} jobs")
    report("simulation.trace_read.jobs_per_s", JOBS / read_s, "jobs/s",
           note=f"{JOBS:,} jobs, strict validation")

    cluster = ClusterSpec((HostGroup("node", HOSTS, Resources(cpu=32, mem_mb=131072)),))
    base, _ = plan(tr, cluster, spec, options=PlanOptions(horizon=DAY + 7200))
    seconds, calls, result = record(base, rng)
    report("simulation.recorder.calls_per_s", calls / seconds, "calls/s",
           note=f"{calls:,} calls: {len(result.tasks):,} tasks' events and 1-min samples of "
                f"{len(spec.pools)} pools over 24 h")
    t0 = time.perf_counter()
    run = build_report(result)
    build_s = time.perf_counter() - t0
    report("simulation.report.build_s", build_s, "s", note=f"{len(result.tasks):,} tasks, 55 pools")
    compare(run, run)
    t0 = time.perf_counter()
    render_report([result, result], plots=False)
    text_s = time.perf_counter() - t0
    report("simulation.report.text_json_html_s", text_s, "s", note="baseline and what-if, no plots")
    t0 = time.perf_counter()
    render_report([result, result], plots=True)
    plots_s = time.perf_counter() - t0
    report("simulation.report.with_plots_s", plots_s, "s", note="baseline and what-if, 4 PNGs")
    report("simulation.peak_rss_mb", rss_mb(), "MB", note="trace, result and reports in memory")


if __name__ == "__main__":
    main()
