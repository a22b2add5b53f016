"""Placement benchmark: 50,000 single-task gangs onto 5,000 and 50,000 hosts, batches of 100.

Run as `python -m tests.bench.bench_placement`.  The cluster is mixed:
hosts of 16/32/48/64 cores with 4 GB per core, 5% of them with 4 GPUs
(kept for GPU tasks), three zones, 1% DRAINING, 1,000 ports each.  The
50,000 tasks come from 500 jobs of 100 identical tasks: half batch (best
fit), half service (least loaded); 10% of jobs at most one instance per
host, 10% pinned to a zone, 2% GPU tasks, 0-2 dynamic ports.  On 5,000
hosts the tasks ask for about 90% of the cpu of the UP hosts without GPUs;
a `.busy` 50,000-host run starts with every host 80-95% used, and an
`.oversubscribed` run asks for more than fits.  Each batch is one
`Placer.place` call on a placer that keeps its index across batches, as
the placement daemon does; building the index is reported on its own.
"""

from __future__ import annotations

import gc
import random
import time

from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.host import HostOffer
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import PortRange, Resources
from peloton.core.placement.report import PlacementReport
from peloton.core.placement.request import GangRequest, PlacementNeeds, Strategy, TaskRequest
from peloton.core.placement.stack import Placer
from peloton.core.states import HostState
from tests.bench.common import percentile, report

ZONES = ("a", "b", "c")


class TimedPlacer(Placer):
    """A placer that adds up the time spent building reason reports."""

    report_s = 0.0
    reports = 0

    def explain(self, req: TaskRequest) -> PlacementReport:
        t0 = time.perf_counter()
        try:
            return super().explain(req)
        finally:
            self.report_s += time.perf_counter() - t0
            self.reports += 1


def make_hosts(n: int, seed: int = 1, busy: bool = False) -> list[HostOffer]:
    """A mixed cluster of `n` hosts; `busy` hosts have only 5-20% of their capacity free."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        cores = rng.choice([16, 32, 48, 64])
        gpu = 4.0 if rng.random() < 0.05 else 0.0
        cap = Resources(cpu=cores, mem_mb=cores * 4096.0, disk_mb=500_000.0, gpu=gpu)
        state = HostState.DRAINING if rng.random() < 0.01 else HostState.UP
        free = cap.scale(rng.uniform(0.05, 0.2)) if busy else cap
        out.append(HostOffer(f"host-{i:05d}", f"agent-{i:05d}", cap, free,
                             ports=(PortRange(31000, 31999),),
                             labels=(Label("zone", ZONES[i % 3]), Label("rack", f"r{i // 40}")),
                             state=state))
    return out


def make_gangs(n_tasks: int, seed: int = 2) -> list[GangRequest]:
    """`n_tasks` single-task gangs from jobs of 100 identical tasks, jobs interleaved."""
    rng = random.Random(seed)
    jobs = []
    for j in range(n_tasks // 100):
        job_id = f"job-{j:04d}"
        constraint = None
        roll = rng.random()
        if roll < 0.10:
            constraint = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN,
                                         Label("job", job_id), 1)
        elif roll < 0.20:
            constraint = LabelConstraint(LabelKind.HOST, Condition.EQUAL,
                                         Label("zone", rng.choice(ZONES)), 1)
        gpu = 1.0 if rng.random() < 0.02 else 0.0
        cpu = rng.choice([1.0, 2.0, 2.0, 4.0, 8.0])
        res = Resources(cpu=cpu, mem_mb=cpu * rng.choice([1024.0, 2048.0, 4096.0]),
                        disk_mb=1024.0, gpu=gpu)
        strategy = Strategy.PACK if j % 2 == 0 else Strategy.SPREAD
        needs = PlacementNeeds(res, rng.randint(0, 2), False, constraint, strategy)
        jobs.append((job_id, needs, (Label("job", job_id),)))
    gangs = []
    for i in range(n_tasks):
        job_id, needs, labels = jobs[i % len(jobs)]
        gangs.append(GangRequest.single(TaskRequest(TaskId(job_id, i // len(jobs)), needs,
                                                    labels)))
    return gangs


def run(n_hosts: int, target_rate: float, n_tasks: int = 50_000, tag: str = "",
        busy: bool = False) -> None:
    hosts = make_hosts(n_hosts, busy=busy)
    gangs = make_gangs(n_tasks)
    gc.collect()
    t0 = time.perf_counter()
    placer = TimedPlacer(hosts)
    build_ms = (time.perf_counter() - t0) * 1000
    latencies = []
    placed = unplaced = 0
    example = ""
    start = time.perf_counter()
    for b in range(0, len(gangs), 100):
        t1 = time.perf_counter()
        plan = placer.place(gangs[b:b + 100])
        latencies.append((time.perf_counter() - t1) * 1000)
        placed += len(plan.placed)
        unplaced += len(plan.unplaced)
        if plan.unplaced and not example:
            example = str(plan.unplaced[0].report)
    elapsed = time.perf_counter() - start
    asked = sum(g.tasks[0].needs.resources.cpu for g in gangs)
    usable = sum(h.available.cpu for h in hosts if h.state is HostState.UP and not h.has_gpu)
    tag = f"placement.{n_hosts // 1000}k_hosts{tag}"
    report(f"{tag}.tasks_per_s", len(gangs) / elapsed, "tasks/s", f">={target_rate:g}",
           f"{n_tasks:,} single-task gangs in batches of 100 asking {asked / usable:.0%} of free "
           f"cpu on UP non-GPU hosts; {placed:,} placed, {unplaced:,} unplaced (each with a reason report)")
    limits = ""
    if placer.reports:
        limits = (f"; {placer.reports} reason reports took {placer.report_s / elapsed:.0%} of the "
                  f"time ({placer.report_s / placer.reports * 1000:.1f} ms each): the tail is "
                  "batches where several needs fail for the first time")
    report(f"{tag}.batch_p99_ms", percentile(latencies, 99), "ms", "<=50",
           f"per place() call of 100 tasks; max {max(latencies):.1f} ms{limits}")
    report(f"{tag}.index_build_ms", build_ms, "ms", "",
           f"HostIndex from {n_hosts:,} offers ({placer.index.class_count()} host classes)")
    if example:
        print(f"# example report: {example}")


def full_cluster() -> None:
    """A cluster with no room: every task needs a full report over every host."""
    hosts = make_hosts(5_000)
    placer = Placer(hosts)
    huge = PlacementNeeds(Resources(cpu=128.0, mem_mb=1024.0))
    gangs = [GangRequest.single(TaskRequest(TaskId("huge", i), huge)) for i in range(100)]
    t0 = time.perf_counter()
    plan = placer.place(gangs)
    ms = (time.perf_counter() - t0) * 1000
    assert not plan.placed and plan.unplaced[0].report.hosts_fit == 0
    report("placement.5k_hosts.unplaceable_batch_ms", ms, "ms", "<=50",
           "100 identical tasks that fit nowhere: one full report, reused for the rest")
    print(f"# example report: {plan.unplaced[0].report}")


if __name__ == "__main__":
    run(5_000, 5_000)
    run(50_000, 1_000)
    # A busy big cluster: every host 80-95% used, so fits are scarce and fragmented.
    run(50_000, 1_000, tag=".busy", busy=True)
    # More than fits: the tail of the run is tasks that fail, each with a report.
    run(5_000, 5_000, 70_000, ".oversubscribed")
    full_cluster()
