"""The arithmetic of the report: step functions, time-weighted means, percentiles.

- A series of samples (t_i, v_i) is a right-continuous step function: v_i holds on
  [t_i, t_{i+1}); before the first sample the value is 0; after the last, the last
  value holds.  Its mean over [a, b] is the integral over [a, b] divided by b - a
  (the value at a when a == b).
- Percentiles use the nearest-rank method: the p-th percentile of n sorted values
  is the value at rank ceil(p / 100 * n) (1-based), so it is always one of the
  values (p50 of 10, 20, 30, 40 is 20; p90 is 40), and a hand computation agrees.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from peloton.core.model.resources import Resources


class StepSeries:
    """A step function built from samples in non-decreasing time order."""

    def __init__(self, times: Sequence[float], values: Sequence[float]) -> None:
        if len(times) != len(values):
            raise ValueError("times and values differ in length")
        if any(b < a for a, b in itertools.pairwise(times)):
            raise ValueError("sample times must not decrease")
        self.times = list(times)
        self.values = list(values)
        # prefix[i]: integral from times[0] to times[i]
        self.prefix = [0.0]
        for i in range(1, len(self.times)):
            self.prefix.append(self.prefix[-1] + self.values[i - 1] * (self.times[i] - self.times[i - 1]))

    def value_at(self, t: float) -> float:
        """The value at time `t` (0 before the first sample)."""
        i = bisect.bisect_right(self.times, t) - 1
        return self.values[i] if i >= 0 else 0.0

    def _cumulative(self, t: float) -> float:
        """Integral from -inf (value 0) to `t`."""
        i = bisect.bisect_right(self.times, t) - 1
        if i < 0:
            return 0.0
        return self.prefix[i] + self.values[i] * (t - self.times[i])

    def integral(self, start: float, end: float) -> float:
        """The integral over [start, end]."""
        return self._cumulative(end) - self._cumulative(start)

    def mean(self, start: float, end: float) -> float:
        """Time-weighted mean over [start, end] (the value at `start` when the interval is empty)."""
        if end <= start:
            return self.value_at(start)
        return self.integral(start, end) / (end - start)

    def peak(self, start: float, end: float) -> float:
        """Largest value taken on [start, end] (0 without samples)."""
        best = self.value_at(start)
        lo = bisect.bisect_right(self.times, start)
        hi = bisect.bisect_right(self.times, end)
        for v in self.values[lo:hi]:
            best = max(best, v)
        return best


@dataclass(frozen=True, slots=True)
class Amounts:
    """A mean, an integral or a ratio of resources: plain floats per kind.

    Not `Resources`, which holds exact scheduler amounts (thousandths of a unit): a
    time-weighted mean such as 4/3 cpu must not be rounded to 1.333.
    """

    cpu: float = 0.0
    mem_mb: float = 0.0
    disk_mb: float = 0.0
    gpu: float = 0.0


class ResourceSeries:
    """Four step series, one per resource kind, over the same sample times."""

    def __init__(self, times: Sequence[float], values: Sequence[Resources]) -> None:
        self.kinds = (StepSeries(times, [v.cpu for v in values]),
                      StepSeries(times, [v.mem_mb for v in values]),
                      StepSeries(times, [v.disk_mb for v in values]),
                      StepSeries(times, [v.gpu for v in values]))

    def mean(self, start: float, end: float) -> Amounts:
        """Time-weighted mean of every kind over [start, end]."""
        cpu, mem, disk, gpu = (s.mean(start, end) for s in self.kinds)
        return Amounts(cpu=cpu, mem_mb=mem, disk_mb=disk, gpu=gpu)

    def integral(self, start: float, end: float) -> Amounts:
        """Resource-seconds of every kind over [start, end]."""
        cpu, mem, disk, gpu = (s.integral(start, end) for s in self.kinds)
        return Amounts(cpu=cpu, mem_mb=mem, disk_mb=disk, gpu=gpu)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of `values` (any order; ValueError when empty or p outside (0, 100])."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < p <= 100:
        raise ValueError(f"percentile {p} outside (0, 100]")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered) - 1e-9))
    return ordered[rank - 1]


def bucket_edges(end: float, count: int) -> list[tuple[float, float]]:
    """`count` equal intervals covering [0, end] (one empty interval when end is 0)."""
    if count < 1:
        raise ValueError("at least one bucket")
    if end <= 0:
        return [(0.0, 0.0)]
    width = end / count
    return [(i * width, end if i == count - 1 else (i + 1) * width) for i in range(count)]


def ratio(used: float, capacity: float) -> float:
    """used / capacity, 0 when there is no capacity."""
    return used / capacity if capacity > 0 else 0.0
