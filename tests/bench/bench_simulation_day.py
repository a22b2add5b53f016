"""Simulation engine benchmark: one day of a 10,000-host cluster through the real scheduler.

Run as `python -m tests.bench.bench_simulation_day` (`make bench` runs it with the rest).  The
trace is synthetic and generated at the start from a fixed seed, so every run replays the same
day: 10,000 hosts of 32 cores and 128 GiB in four zones; 5 organisations of 4 teams (20 leaf
pools, each org guaranteed 18 % of the cluster, every pool allowed to borrow up to all of it);
40 services of 250 instances (8 cores each, a quarter of the cluster) started in the first ten
minutes and running all day; and `JOBS` batch jobs arriving at a diurnal rate (twice as many in
the afternoon as at night), four times as many to the first organisation's teams and twice as
many to the second's as to the others', with heavy-tailed sizes (1 + Pareto, mean about 30 tasks, at most
2,000), 4 to 16 cores per task, log-normal durations (median 2 h, 5 min to 12 h), priorities
0-2 and one in ten not preemptible.

It reports the wall time of the run, the speed-up over real time, what the day held (tasks,
placement rounds) and the load average of the machine at the start (the machine is shared:
the wall time moves with it).  `BENCH_SIM_HOURS` shortens the day and `BENCH_SIM_JOBS` sets the
number of batch jobs (scaled with the hours by default) for a quicker look.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import random
import time

from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.core.states import JobType
from peloton.simulation.cluster import ClusterSpec, HostGroup
from peloton.simulation.driver import PelotonSimulator
from peloton.simulation.pools import PoolSpec, PoolsSpec
from peloton.simulation.recorder import ResultRecorder
from peloton.simulation.report import build_report
from peloton.simulation.scenario import Scenario
from peloton.simulation.trace import Trace, TraceHeader, TraceJob
from peloton.simulation.whatif import PlanOptions, plan
from tests.bench.common import report, rss_mb

HOSTS = 10_000
CORES, MEM_MB, DISK_MB = 32, 131_072, 1_000_000
ORGS, TEAMS = 5, 4
SERVICES, SERVICE_TASKS, SERVICE_CORES = 40, 250, 8
DAY = 86_400.0
JOBS = 4_000
SEED = 17


def pools() -> PoolsSpec:
    """5 organisations of 4 teams; each org guaranteed 18 % of the cluster, split evenly."""
    cores = HOSTS * CORES
    out = []

    def config(name: str, parent: str, reserved: float) -> ResourcePoolConfig:
        return ResourcePoolConfig(name, parent, (
            ResourceConfig(ResourceKind.CPU, reservation=reserved, limit=cores, share=1),
            ResourceConfig(ResourceKind.MEMORY, reservation=reserved * 4096,
                           limit=HOSTS * MEM_MB, share=1),
            ResourceConfig(ResourceKind.DISK, reservation=0, limit=HOSTS * DISK_MB, share=1)))

    for o in range(ORGS):
        org = round(cores * 0.18)
        out.append(PoolSpec(f"/org{o}", config(f"org{o}", "root", org)))
        for t in range(TEAMS):
            out.append(PoolSpec(f"/org{o}/team{t}", config(f"team{t}", f"/org{o}", org // TEAMS)))
    return PoolsSpec(tuple(out))


def trace(rng: random.Random, leaves: tuple[str, ...], secs: float, jobs: int) -> Trace:
    """Services first, then batch jobs at a diurnal rate (see the module docstring)."""
    out: list[TraceJob] = []
    for i in range(SERVICES):
        out.append(TraceJob(f"svc-{i:03d}", round(i * 600 / SERVICES, 1), leaves[i % len(leaves)],
                            SERVICE_TASKS, Resources(cpu=SERVICE_CORES, mem_mb=4096 * SERVICE_CORES),
                            priority=2, preemptible=False, type=JobType.SERVICE))
    # Arrival times by inverse transform of a rate 1 + 0.5 sin(...) peaking mid-afternoon.
    grid = [i * secs / 2000 for i in range(2001)]
    rate = [1 + 0.5 * math.sin(2 * math.pi * (t / DAY - 0.375)) for t in grid]
    cum = [0.0]
    for a, b in itertools.pairwise(rate):
        cum.append(cum[-1] + (a + b) / 2)
    submits = []
    for _ in range(jobs):
        u = rng.random() * cum[-1]
        k = max(1, bisect.bisect_left(cum, u))
        frac = (u - cum[k - 1]) / max(1e-12, cum[k] - cum[k - 1])
        submits.append(round(grid[k - 1] + frac * (grid[k] - grid[k - 1]), 1))
    # Skewed demand: the first organisation's teams get four times, the second's twice, the
    # share of the others, so busy pools borrow, queue and get preempted.
    weights = [4 if leaf.startswith("/org0/") else 2 if leaf.startswith("/org1/") else 1
               for leaf in leaves]
    for i, t in enumerate(sorted(submits)):
        n = min(2000, 1 + int(rng.paretovariate(1.4) * 9))
        cores = rng.choice([4, 4, 8, 8, 16])
        secs_ = round(min(43_200, max(300, rng.lognormvariate(math.log(7200), 1.0))))
        out.append(TraceJob(f"batch-{i:05d}", max(600.0, t), rng.choices(leaves, weights)[0], n,
                            Resources(cpu=cores, mem_mb=4096 * cores), float(secs_),
                            priority=rng.choice([0, 1, 2]), preemptible=rng.random() >= 0.1))
    out.sort(key=lambda j: j.submit)
    return Trace(TraceHeader(name="bench-day-10k"), tuple(out))


def scenario(secs: float, jobs: int) -> Scenario:
    """The day (or its first `secs`) as a scenario."""
    rng = random.Random(SEED)
    spec = pools()
    cluster = ClusterSpec((HostGroup("node", HOSTS, Resources(cpu=CORES, mem_mb=MEM_MB,
                                                              disk_mb=DISK_MB),
                                     (("zone", ("a", "b", "c", "d")),)),))
    base, _ = plan(trace(rng, spec.leaves(), secs, jobs), cluster, spec,
                   options=PlanOptions(horizon=secs, sample_interval=300))
    return base


def main() -> None:
    hours = float(os.environ.get("BENCH_SIM_HOURS", "24"))
    secs = hours * 3600
    jobs = int(os.environ.get("BENCH_SIM_JOBS", str(round(JOBS * secs / DAY))))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    sc = scenario(secs, jobs)
    gen_s = time.perf_counter() - t0
    tasks = sum(j.instances for j in sc.trace.jobs)
    rec = ResultRecorder(sc)
    sim = PelotonSimulator()
    stats = sim.run(sc, rec)
    result = rec.result()
    run = build_report(result)
    what = (f"{HOSTS:,} hosts, {len(sc.trace.jobs):,} jobs, {tasks:,} tasks over {hours:g} h "
            f"(load average {load:.1f} on {os.cpu_count()} cores at the start)")
    report("simulation.day_10k_hosts.wall_s", stats.wall_secs, "s", target="<=600",
           note=f"{what}; trace generated in {gen_s:.1f} s")
    report("simulation.day_10k_hosts.speedup", stats.speedup, "x",
           note=f"simulated {stats.simulated_secs:,.0f} s")
    leaves = [p for p in run.pools if p.leaf]
    report("simulation.day_10k_hosts.tasks_per_s", tasks / stats.wall_secs, "tasks/s",
           note=f"{run.wait.count:,} started, {run.finished:,} finished, "
                f"{sum(p.preemptions for p in leaves):,} preemptions, "
                f"cpu utilisation {100 * run.cluster.utilisation.cpu:.1f} %")
    report("simulation.day_10k_hosts.placement_rounds", sim.counts.get("placement_rounds", 0),
           "rounds", note=f"rounds that had work (each leases every host with room); "
                          f"{sim.counts.get('instants', 0):,} simulated instants")
    report("simulation.day_10k_hosts.peak_rss_mb", rss_mb(), "MB")


if __name__ == "__main__":
    main()
