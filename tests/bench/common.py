"""Helpers shared by benchmark modules: reporting, timing, sizes and CPU accounting.

`BENCH_SCALE` picks the sizes every module runs at: unset, the sizes `make bench` uses
(the whole suite within its 15-minute budget); `smoke`, tiny sizes that only prove the
code still runs and prints its lines (tests/integration/test_bench_smoke.py runs every
module so in `make test`); `full`, Peloton's largest shapes where a module has them (the
1,000,000-task cluster and restart), which may take longer than the suite's budget.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SCALE = os.environ.get("BENCH_SCALE", "")
SMOKE = SCALE == "smoke"
FULL = SCALE == "full"


def scaled(default: T, *, smoke: T, full: T | None = None) -> T:
    """The size for this run's BENCH_SCALE (`full` falls back to the default)."""
    if SMOKE:
        return smoke
    if FULL and full is not None:
        return full
    return default


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process so far (this one by default; children's
    CPU is not included): what `scheduler CPU per task` divides."""
    if pid is None:
        return time.process_time()
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    """The machine's 1-minute load average, for the notes of wall-clock figures."""
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def report(name: str, value: float, unit: str, target: str = "", note: str = "") -> None:
    """Print one `BENCH` line for tests/bench/run.py to collect.

    `target` is `>=N` or `<=N`; `note` is free text (what limits the number, sizes).
    """
    parts = [f"BENCH {name} {value:.6g} {unit}"]
    if target:
        parts.append(f"target={target}")
    if note:
        parts.append(f"note={note}")
    print(" ".join(parts), flush=True)


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile of `samples` (pct in 0..100)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def rss_mb() -> float:
    """Peak resident set size of this process in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def until(check: Callable[[], object], timeout: float, what: str,
          interval: float = 0.05) -> float:
    """Poll `check` until it is truthy; the monotonic time it first was (RuntimeError
    after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
