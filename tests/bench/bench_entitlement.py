"""Entitlement benchmark: one full cycle over 1,111 and 11,111 pools, 4 resource kinds.

Run as `python -m tests.bench.bench_entitlement`.  Trees are complete
10-ary trees (3 and 4 levels below the root) with random reservations
(children sum below the parent), limits, shares and STATIC/ELASTIC types
on every kind; every leaf has regular and revocable demand and some
allocation, kept in the tree the way admission keeps it.  The cycle cost
does not depend on how many tasks the demand came from.  The number is the
median of several cycles (compute only; `apply` is reported separately).
"""

from __future__ import annotations

import random
import statistics
import time

from peloton.core.model.resources import KINDS, Resources
from peloton.core.model.respool import ReservationType, ResourceConfig, ResourcePoolConfig
from peloton.core.respool.entitlement import compute_entitlements
from peloton.core.respool.tree import PoolTree
from tests.bench.common import report

CAPACITY = Resources(cpu=100_000, mem_mb=400_000_000, disk_mb=4_000_000_000, gpu=2_000)
SLACK = Resources(cpu=10_000)


def build(levels: int, seed: int = 11) -> PoolTree:
    """A 10-ary tree `levels` deep with demand and allocation on its leaves."""
    rng = random.Random(seed)
    tree = PoolTree()
    base = [CAPACITY.get(k) for k in KINDS]
    frontier: list[tuple[str, list[float], list[float]]] = [("root", base, [x * 3 for x in base])]
    for _ in range(levels):
        nxt = []
        for parent, p_res, p_lim in frontier:
            weights = [rng.uniform(0.5, 1.5) for _ in range(10)]
            total = sum(weights)
            for k, w in enumerate(weights):
                res = [r * w / total * rng.uniform(0.5, 0.99) for r in p_res]
                lim = [min(pl, r * rng.uniform(1.0, 4.0)) for r, pl in zip(res, p_lim,
                                                                               strict=True)]
                cfgs = tuple(ResourceConfig(kind, res[i], lim[i], rng.choice([1.0, 1.0, 2.0, 0.5]),
                                            ReservationType.STATIC if rng.random() < 0.05
                                            else ReservationType.ELASTIC)
                             for i, kind in enumerate(KINDS))
                pool_id = f"{parent}/{k}"
                tree.create(pool_id, ResourcePoolConfig(f"p{k}", parent, cfgs))
                nxt.append((pool_id, res, lim))
        frontier = nxt
    for leaf in tree.leaves():
        limit = leaf.limit
        leaf.add_demand(Resources(*(x * rng.uniform(0, 0.8) for x in limit)), False, 1)
        leaf.add_demand(Resources(*(x * rng.uniform(0, 0.1) for x in limit)), True, 1)
        leaf.add_allocation(Resources(*(x * rng.uniform(0, 0.3) for x in limit)), revocable=False,
                            preemptible=True, controller=False, sign=1)
    return tree


def measure(levels: int, target_ms: float, runs: int) -> None:
    tree = build(levels)
    n = len(tree)
    compute_entitlements(tree, CAPACITY, SLACK)  # warm-up
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        table = compute_entitlements(tree, CAPACITY, SLACK)
        samples.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    table.apply(tree)
    apply_ms = (time.perf_counter() - t0) * 1000
    # A sanity check the benchmark cannot pass by computing nothing.
    top = sum(table.get(c.pool_id).total.cpu for c in tree.root.children)
    assert 0 < top <= CAPACITY.cpu + 1e-6
    report(f"entitlement.{n}_pools_ms", statistics.median(samples), "ms", f"<={target_ms:g}",
           f"median of {runs} cycles, 4 kinds, 10-ary tree; max {max(samples):.1f} ms")
    report(f"entitlement.{n}_pools_apply_ms", apply_ms, "ms")


if __name__ == "__main__":
    measure(3, 10, 21)
    measure(4, 100, 9)
