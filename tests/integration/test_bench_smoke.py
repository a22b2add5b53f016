"""Benchmarks cannot rot unnoticed: each module that has a tiny scale runs at it here.

`make bench` is not part of `make test`; this runs the benchmark code paths (with
`BENCH_SCALE=smoke`) and checks they print their numbers, never how fast they are.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.run import parse

REPO = Path(__file__).resolve().parents[2]
#: Modules with a smoke scale, and a line each must print.
SMOKE_MODULES = {
    # The failover part needs ZooKeeper (BENCH_SKIP without it); the restart always runs.
    "bench_recovery": ("recovery.jobmgr_restart_s", "recovery.jobmgr_restart_rss_mb"),
    # Needs ZooKeeper and Java, as the zookeeper-marked tests do (about a minute).
    "bench_member_failover": ("member_failover.sigterm.resume_s",
                              "member_failover.kill9.resume_s",
                              "member_failover.kill9.others_failed"),
    "bench_scaling": ("scaling.placement_us_per_task.exponent", "scaling.entitlement_ms.exponent",
                      "scaling.admission_us_per_task.exponent", "scaling.cluster_s.exponent"),
}

#: Counts a smoke run must report as 0: correctness, not speed.  A member's failover loses
#: no write to the other partitions and no probe job's end, and runs no task twice.
MUST_BE_ZERO = {
    "bench_member_failover": tuple(f"member_failover.{how}.{what}"
                                   for how in ("sigterm", "kill9")
                                   for what in ("others_failed", "probe_jobs_not_succeeded_once")),
}


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(SMOKE_MODULES))
def test_benchmark_runs_at_smoke_scale(module: str) -> None:
    done = subprocess.run([sys.executable, "-m", f"tests.bench.{module}"], cwd=REPO,
                          env={**os.environ, "BENCH_SCALE": "smoke"}, capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    got = {r.name: r.value for r in parse(module, done.stdout)}
    for name in SMOKE_MODULES[module]:
        assert name in got, f"{module} did not report {name}: {sorted(got)}"
        assert math.isfinite(got[name])
    for name in MUST_BE_ZERO.get(module, ()):
        assert got.get(name) == 0, f"{module}: {name} = {got.get(name)}\n{done.stdout[-3000:]}"
