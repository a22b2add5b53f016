"""Helpers shared by benchmark modules: reporting, timing, sizes and CPU accounting.

`BENCH_SCALE` picks the sizes every module runs at: unset, the sizes `make bench` uses
(the whole suite within its 15-minute budget); `smoke`, tiny sizes that only prove the
code still runs and prints its lines (tests/integration/test_bench_smoke.py runs every
module so in `make test`); `full`, Peloton's largest shapes where a module has them (the
1,000,000-task cluster and restart), which may take longer than the suite's budget.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import resource
import time
from collections.abc import Callable
from typing import TypeVar

import orjson

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


@dataclasses.dataclass(frozen=True, slots=True)
class _ProbeRecord:
    job_id: str
    instance: int
    run: int
    state: str
    host: str
    revision: int = 0


def cpu_probe_us(rounds: int = 5, steps: int = 20_000) -> float:
    """How fast this machine runs the daemons' kind of Python now: microseconds a step of a
    fixed mix (parse a run id, copy a frozen record with one field changed, encode it as
    JSON, hash its job id, put it in and take it out of a dict), the best of `rounds`.

    The same code's CPU per task moves by up to 40 % between runs of the scale shape on
    this virtual machine; a probe taken beside a run tells a slower machine from a slower
    change. Lower is faster."""
    base = _ProbeRecord("2f1c9a4e-0000-4000-8000-000000000001", 0, 1, "RUNNING", "host-1")
    best = float("inf")
    for _ in range(rounds):
        book: dict[tuple[str, int], _ProbeRecord] = {}
        t0 = time.perf_counter()
        for i in range(steps):
            job_id, instance, run = f"{base.job_id}-{i}-3".rsplit("-", 2)
            rec = dataclasses.replace(base, instance=int(instance), run=int(run), revision=i)
            orjson.dumps(rec)
            hashlib.blake2b(job_id.encode(), digest_size=8).digest()
            book[(job_id, rec.instance)] = rec
            book.pop((job_id, i - 1), None)
        best = min(best, (time.perf_counter() - t0) / steps * 1e6)
    return best


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


def skipped_without_zookeeper(name: str) -> bool:
    """True, after printing `name`'s BENCH_SKIP line, if the ZooKeeper jars or Java that
    `peloton up --jobmgrs` needs are missing (the benchmarks of all-active job managers)."""
    import shutil  # the lookups only these benchmarks make

    from peloton.cluster.processes import ZOOKEEPER_JARS

    missing = [str(j) for j in ZOOKEEPER_JARS if not j.exists()]
    if not missing and shutil.which("java") is not None:
        return False
    print(f"BENCH_SKIP {name} `peloton up --jobmgrs` needs ZooKeeper and Java "
          f"(missing: {', '.join(missing) or 'java'})", flush=True)
    return True
