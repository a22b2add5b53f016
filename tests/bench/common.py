"""Helpers shared by benchmark modules: reporting and timing."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable


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
