"""Scaling curves: how placement, entitlement, admission and a whole simulated cluster grow.

Each family is measured at three or more sizes, a decade or so apart, and reported as one
BENCH line per size plus the growth exponent between the smallest and the largest size
(the slope on a log-log plot: 1.0 is linear, about 1.1 is n log n at these sizes, 2.0 is
quadratic). A PNG with the four curves goes to docs/images/scaling.png.

- placement: 20,000 single-task gangs (batches of 100, the placement daemon's shape) onto
  1k, 10k and 100k hosts, time per task;
- entitlement: one full entitlement cycle of a 10-ary pool tree 2, 3 and 4 levels deep
  (111, 1,111 and 11,111 pools);
- admission: enqueue and admit 10k, 100k and 1M tasks over 100 leaf pools, time per task;
- cluster: `peloton up` on simulated hosts (the full daemon stack in this process), jobs of
  N one-second half-cpu tasks on N/25 one-cpu hosts (about 13 waves whatever N), from
  create to SUCCEEDED, for N = 2k, 10k, 50k: seconds against the ideal.

`BENCH_SCALE=smoke` runs every family at tiny sizes (the test suite does, so this code
cannot rot unnoticed).
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

# The cluster family runs `peloton up` in this process, which needs gevent from the start.
setup()

import gc  # noqa: E402
import importlib  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

from tests.bench.common import report  # noqa: E402

SMOKE = os.environ.get("BENCH_SCALE") == "smoke"
#: Tasks per one-cpu simulated host: half-cpu tasks run two at a time, so about
#: WAVES_RATIO / 2 one-second waves whatever the size.
WAVES_RATIO = 2 if SMOKE else 25
IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "scaling.png"

#: family -> the sizes it is measured at.
SIZES: dict[str, tuple[int, ...]] = {
    "placement_hosts": (100, 300, 1000) if SMOKE else (1_000, 10_000, 100_000),
    "entitlement_levels": (1, 2) if SMOKE else (2, 3, 4),
    "admission_tasks": (1_000, 3_000, 10_000) if SMOKE else (10_000, 100_000, 1_000_000),
    "cluster_tasks": (100, 200) if SMOKE else (2_000, 10_000, 50_000),
}


def placement_point(hosts: int) -> float:
    """Microseconds per task placed onto `hosts` hosts (20k tasks, batches of 100)."""
    from peloton.core.placement.stack import Placer
    from tests.bench.bench_placement import make_gangs, make_hosts

    tasks = 2_000 if SMOKE else 20_000
    offers = make_hosts(hosts)
    gangs = make_gangs(tasks)
    gc.collect()
    placer = Placer(offers)
    t0 = time.perf_counter()
    for b in range(0, len(gangs), 100):
        placer.place(gangs[b:b + 100])
    return (time.perf_counter() - t0) / tasks * 1e6


def entitlement_point(levels: int) -> tuple[float, float]:
    """(pools, median milliseconds of one entitlement cycle) for a tree `levels` deep."""
    from peloton.core.respool.entitlement import compute_entitlements
    from tests.bench.bench_entitlement import CAPACITY, SLACK, build

    tree = build(levels)
    compute_entitlements(tree, CAPACITY, SLACK)
    samples = []
    for _ in range(3 if SMOKE else 7):
        t0 = time.perf_counter()
        compute_entitlements(tree, CAPACITY, SLACK)
        samples.append((time.perf_counter() - t0) * 1000)
    return float(len(tree)), statistics.median(samples)


def admission_point(tasks: int) -> float:
    """Microseconds per task to enqueue and admit `tasks` tasks over 100 leaf pools."""
    from peloton.core.respool.tracker import TaskTracker
    from tests.bench.bench_admission import build_tree, make_gangs

    tree, leaves = build_tree()
    tracker = TaskTracker(tree)
    gangs = make_gangs(tasks, max(10, tasks // 200))
    gc.collect()
    t0 = time.perf_counter()
    for i, gang in enumerate(gangs):
        tracker.enqueue(leaves[i % len(leaves)], gang)
    admitted = tracker.admit(limit_per_pool=10**9)
    elapsed = time.perf_counter() - t0
    count = sum(len(g) for g in gangs)
    if sum(len(g) for g in admitted) != count:
        raise AssertionError("admission left tasks behind with unlimited pools")
    return elapsed / count * 1e6


def cluster_point(tasks: int, base: Path) -> tuple[float, float]:
    """(seconds from create to SUCCEEDED, ideal seconds) for `tasks` half-cpu 1 s tasks."""
    from tests.bench.bench_cluster import job_config, make_pool, start, wait_state

    hosts = max(2, tasks // WAVES_RATIO)
    cluster, client = start(base / f"sim-{tasks}", f"sim:{hosts}:1.0:1", agents=0)
    try:
        pool = make_pool(client, hosts)
        t0 = time.perf_counter()
        job_id = client.create_job(job_config(pool, tasks, 0.5, "sleep 1")).jobId.value
        state = wait_state(client, job_id, {"SUCCEEDED", "FAILED", "KILLED"}, 300)
        total = time.perf_counter() - t0
        if state != "SUCCEEDED":
            raise AssertionError(f"the {tasks}-task job ended {state}")
        return total, float(math.ceil(tasks / (hosts * 2)))
    finally:
        client.close()
        cluster.stop()


def exponent(points: list[tuple[float, float]]) -> float:
    """Slope of log(cost) over log(size) between the first and the last point."""
    (x0, y0), (x1, y1) = points[0], points[-1]
    return math.log(y1 / y0) / math.log(x1 / x0) if y0 > 0 and y1 > 0 and x1 != x0 else 0.0


def plot(curves: dict[str, tuple[str, str, list[tuple[float, float]]]]) -> None:
    """One PNG, a log-log panel per family (skipped with a note if matplotlib is missing)."""
    try:
        importlib.import_module("matplotlib").use("Agg")
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        print("BENCH_SKIP scaling.plot matplotlib is not installed", flush=True)
        return
    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.6))
    for ax, (title, (xlabel, ylabel, pts)) in zip(axes, curves.items(), strict=True):
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        ax.loglog(xs, ys, "o-")
        ax.set_title(f"{title} (exponent {exponent(pts):.2f})", fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    IMAGE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMAGE, dpi=90, metadata={"Software": None})
    plt.close(fig)
    print(f"# wrote {IMAGE}")


def measure(family: str, sizes: tuple[int, ...], point: Callable[[int], tuple[float, float]],
            unit: str, what: str, slope: str) -> list[tuple[float, float]]:
    """Run `point` at every size, report each and the exponent; returns (size, cost) pairs."""
    pts = []
    for size in sizes:
        x, y = point(size)
        pts.append((x, y))
        report(f"scaling.{family}.{int(x)}", y, unit, note=what)
    report(f"scaling.{family}.exponent", exponent(pts), "slope",
           note=f"log-log slope of {unit} from {int(pts[0][0]):,} to {int(pts[-1][0]):,}: {slope}")
    return pts


def main() -> None:
    curves: dict[str, tuple[str, str, list[tuple[float, float]]]] = {}
    pts = measure("placement_us_per_task", SIZES["placement_hosts"],
                  lambda n: (float(n), placement_point(n)), "us/task",
                  "20,000 single-task gangs in batches of 100 onto this many hosts",
                  "0 = a task costs the same on any cluster size, 1 = linear in hosts")
    curves["placement"] = ("hosts", "µs per task", pts)
    pts = measure("entitlement_ms", SIZES["entitlement_levels"],
                  entitlement_point,
                  "ms", "one entitlement cycle of a 10-ary pool tree with this many pools",
                  "1 = linear in pools")
    curves["entitlement"] = ("pools", "ms per cycle", pts)
    pts = measure("admission_us_per_task", SIZES["admission_tasks"],
                  lambda n: (float(n), admission_point(n)), "us/task",
                  "enqueue + admit this many tasks over 100 leaf pools",
                  "0 = constant per task (linear in all), 1 = quadratic")
    curves["admission"] = ("tasks", "µs per task", pts)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        base = Path(tmp)
        pts = []
        for n in SIZES["cluster_tasks"]:
            total, ideal = cluster_point(n, base)
            pts.append((float(n), total))
            report(f"scaling.cluster_s.{n}", total, "s",
                   note=f"{n:,} x 1 s half-cpu tasks on {max(2, n // WAVES_RATIO):,} simulated one-cpu "
                        f"hosts, full daemon stack: {total / ideal:.2f} x the ideal {ideal:.0f} s")
        # The ideal is about the same at every size, so the slope shows the scheduler's
        # per-task cost rising above the fixed waves.
        report("scaling.cluster_s.exponent", exponent(pts), "slope",
               note="log-log slope of total seconds; 0 = the ideal's constant waves")
    curves["simulated cluster"] = ("tasks", f"seconds (ideal ≈ {WAVES_RATIO // 2})", pts)
    if not SMOKE:
        plot(curves)


if __name__ == "__main__":
    main()
