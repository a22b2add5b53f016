"""Resource manager + placement engine benchmark: admission alone, then the whole loop.

Run as `python -m tests.bench.bench_resmgr`.

1. *admission*: 50,000 single-task gangs enqueued in one pool, then
   admitted (PENDING -> READY) and dequeued (READY -> PLACING); the
   resource manager's own cost per task, no placement.
2. *loop*: 900 one-cpu fake hosts, one job of 18,000 one-cpu tasks that
   each run 1 s, through the real ResourceManager and PlacementEngine
   greenlets and a stand-in job manager that launches placements on the
   fake host manager (which reports RUNNING at launch) and ends each run
   after its second.  Reports sustained launches/s and total time against
   the ideal (18,000 / 900 x 1 s = 20 s); issue 5's benchmark (b) targets
   >= 1,000 launches/s and <= 1.2x the ideal, but 900 one-second slots
   cap launches at 900/s, so the ratio to the ideal is the number to read.
   A second run with 0.1 s tasks (ceiling 9,000/s) shows what the loop
   itself sustains.  The fake host manager's own work (offers, bookings)
   is inside the measured time.
"""

from __future__ import annotations

import tempfile
import time
from collections import deque
from pathlib import Path

import gevent

from peloton.core.model.ids import TaskId
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import TaskSpec
from peloton.core.placement.request import PlacementNeeds, TaskRequest
from peloton.core.respool.records import RmTask
from peloton.placement.app import PlacementEngine
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.config import ResourceManagerConfig
from peloton.storage import StoreOptions, open_store
from tests.bench.common import report
from tests.fakes.hostmgr import FakeHostManager

JOB = "6d1b7c0e-0000-4000-8000-00000000beef"
BIG = 1e9


def pool_config() -> ResourcePoolConfig:
    res = tuple(ResourceConfig(k, 0, BIG) for k in (ResourceKind.CPU, ResourceKind.MEMORY,
                                                     ResourceKind.DISK))
    return ResourcePoolConfig(name="bench", parent_id="root", resources=res)


def make_tasks(n: int) -> list[RmTask]:
    needs = PlacementNeeds(Resources(1.0, 64, 64))
    return [RmTask(TaskRequest(TaskId(JOB, i), needs)) for i in range(n)]


def bench_admission(workdir: Path, n: int = 50_000) -> None:
    store = open_store(f"sqlite:///{workdir / 'a.db'}", StoreOptions(bootstrap=True))
    fake = FakeHostManager()
    fake.add_host("big", cpu=BIG, mem=BIG, disk=BIG)
    rm = ResourceManager(store, fake, ResourceManagerConfig(admit_per_pool=n))
    rm.load()
    pool = rm.pools.create(pool_config())
    gangs = [[t] for t in make_tasks(n)]
    t0 = time.perf_counter()
    rm.enqueue_gangs(pool, gangs)
    t1 = time.perf_counter()
    admitted = rm.loops.admit_once()
    t2 = time.perf_counter()
    taken = sum(len(g.run_ids) for g in rm.dequeue_gangs(n, 0))
    t3 = time.perf_counter()
    assert admitted == n == taken, (admitted, taken)
    report("resmgr.enqueue.tasks_per_s", n / (t1 - t0), "tasks/s", note=f"{n} single-task gangs")
    report("resmgr.admit.tasks_per_s", n / (t2 - t1), "tasks/s")
    report("resmgr.dequeue.tasks_per_s", n / (t3 - t2), "tasks/s")
    store.close()


def bench_loop(workdir: Path, hosts: int = 900, n: int = 18_000, duration: float = 1.0) -> None:
    store = open_store(f"sqlite:///{workdir / f'loop-{duration:g}.db'}", StoreOptions(bootstrap=True))
    fake = FakeHostManager()
    for i in range(hosts):
        fake.add_host(f"host-{i:04d}", cpu=1, mem=1024, disk=10_000)
    rm = ResourceManager(store, fake, ResourceManagerConfig(poll_timeout=0.05))
    engine = PlacementEngine(rm, fake)
    rm.start()
    engine.start()
    pool = rm.pools.create(pool_config())
    spec = TaskSpec(resources=Resources(1.0, 64, 64))
    running: deque[tuple[float, str]] = deque()
    launched = 0

    def launcher() -> None:
        nonlocal launched
        while True:
            for p in rm.get_placements(2000, 0.05):
                specs = [LaunchSpec(str(t.task_id.run(t.run_id)), spec) for t in p.tasks]
                fake.launch(p.hostname, specs)
                now = time.monotonic()
                running.extend((now + duration, s.run_id) for s in specs)
                launched += len(specs)

    def finisher() -> None:
        while True:
            now = time.monotonic()
            while running and running[0][0] <= now:
                fake.finish(running.popleft()[1])
            gevent.sleep(0.005)

    workers = [gevent.spawn(launcher), gevent.spawn(finisher)]
    t0 = time.monotonic()
    rm.enqueue_gangs(pool, [[t] for t in make_tasks(n)])
    with gevent.Timeout(600):
        while launched < n or running:
            gevent.sleep(0.05)
    total = time.monotonic() - t0
    gevent.killall(workers)
    engine.stop()
    rm.stop()
    store.close()
    ideal = n / hosts * duration
    name = f"resmgr.loop.{duration:g}s_tasks"
    ceiling = hosts / duration
    report(f"{name}.launches_per_s", n / total, "launches/s",
           target=">=1000" if duration >= 1 else "",
           note=f"{n} 1-cpu tasks on {hosts} 1-cpu fake hosts; ceiling {ceiling:.0f}/s")
    # The issue's <= 1.2x target is for one-second tasks; the short-task case is a stress
    # reading of the loop's fixed per-round latency, so it carries no target.
    report(f"{name}.total_vs_ideal", total / ideal, "x",
           target="<=1.2" if duration >= 1 else "",
           note=f"{total:.1f}s vs ideal {ideal:.1f}s")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bench_admission(Path(tmp))
        bench_loop(Path(tmp))
        # Short tasks lift the hosts' ceiling (9,000/s): what the loop itself sustains.
        bench_loop(Path(tmp), duration=0.1)


if __name__ == "__main__":
    main()
