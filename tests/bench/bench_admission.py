"""Admission benchmark: enqueue + admit throughput, and memory for a million pending tasks.

Run as `python -m tests.bench.bench_admission` (make bench does).  Shapes:
a pool tree of 10 x 10 leaves; jobs of identical tasks share one needs value
(as the job manager sends them); priorities 0-2; 90% single-task gangs and
10% gangs of 5.  Throughput counts each task once for its two transitions
(enqueue -> PENDING, admission -> READY), so the figure is conservative.
"""

from __future__ import annotations

import gc
import random
import time

from peloton.core.model.ids import TaskId
from peloton.core.model.resources import KINDS, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.core.placement.request import PlacementNeeds, TaskRequest
from peloton.core.respool.records import RmTask
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from tests.bench.common import report, rss_mb

BIG = 1e12


def build_tree() -> tuple[PoolTree, list[str]]:
    """10 org pools x 10 leaves, limits high enough that entitlement never blocks."""
    tree = PoolTree()
    leaves = []
    unlimited = tuple(ResourceConfig(k, 0.0, BIG, 1.0) for k in KINDS)
    for i in range(10):
        tree.create(f"org{i}", ResourcePoolConfig(f"org{i}", "root", unlimited))
        for j in range(10):
            node = tree.create(f"org{i}-{j}", ResourcePoolConfig(f"team{j}", f"org{i}",
                                                                   unlimited))
            node.entitlement = [int(BIG) * 1000] * 4
            node.non_slack_entitlement = [int(BIG) * 1000] * 4
            leaves.append(node.pool_id)
    return tree, leaves


def make_gangs(n_tasks: int, n_jobs: int, seed: int = 7) -> list[list[RmTask]]:
    """Gangs of tasks; tasks of one job share their needs and resources values."""
    rng = random.Random(seed)
    jobs = []
    for j in range(n_jobs):
        res = Resources(cpu=rng.choice([0.5, 1.0, 2.0]), mem_mb=rng.choice([512.0, 2048.0]),
                        disk_mb=1024.0)
        jobs.append((f"job-{j:06d}", PlacementNeeds(res), rng.randint(0, 2)))
    gangs: list[list[RmTask]] = []
    inst = 0
    while inst < n_tasks:
        job_id, needs, prio = jobs[rng.randrange(n_jobs)]
        size = 5 if rng.random() < 0.1 else 1
        gangs.append([RmTask(TaskRequest(TaskId(job_id, inst + k), needs), priority=prio)
                      for k in range(size)])
        inst += size
    return gangs


def throughput() -> None:
    tree, leaves = build_tree()
    tracker = TaskTracker(tree)
    gangs = make_gangs(200_000, 1_000)
    n_tasks = sum(len(g) for g in gangs)
    gc.collect()
    t0 = time.perf_counter()
    for i, g in enumerate(gangs):
        tracker.enqueue(leaves[i % 100], g)
    t1 = time.perf_counter()
    admitted = tracker.admit(limit_per_pool=10**9)
    t2 = time.perf_counter()
    assert sum(len(g) for g in admitted) == n_tasks
    report("admission.enqueue_admit_tasks_per_s", n_tasks / (t2 - t0), "tasks/s",
           ">=100000", f"{n_tasks:,} tasks in {len(gangs):,} gangs over 100 leaf pools; "
           "each task = enqueue (PENDING) + admission (READY)")
    report("admission.enqueue_tasks_per_s", n_tasks / (t1 - t0), "tasks/s")
    report("admission.admit_tasks_per_s", n_tasks / (t2 - t1), "tasks/s")


def memory() -> None:
    base = rss_mb()
    tree, leaves = build_tree()
    tracker = TaskTracker(tree)
    n = 1_000_000
    rng = random.Random(3)
    needs = [PlacementNeeds(Resources(cpu=rng.choice([0.5, 1.0, 2.0]), mem_mb=1024.0))
             for _ in range(1_000)]
    t0 = time.perf_counter()
    for i in range(n):
        job = i // 1000
        tracker.enqueue(leaves[job % 100], [RmTask(TaskRequest(TaskId(f"job-{job:06d}", i % 1000),
                                                               needs[job]), priority=job % 3)])
    elapsed = time.perf_counter() - t0
    gc.collect()
    peak = rss_mb()
    assert len(tracker) == n
    report("admission.rss_1m_pending_mb", peak, "MB", "<=1536",
           f"peak RSS of the process holding 1,000,000 queued single-task gangs "
           f"(interpreter + imports {base:.0f} MB; built in {elapsed:.1f} s)")


if __name__ == "__main__":
    memory()  # first, so the peak RSS it reports is not another measurement's leftovers
    throughput()
