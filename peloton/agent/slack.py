"""The slack (revocable) cpu an agent offers.

Peloton takes revocable resources from Mesos, whose agents advertise them
through a resource estimator: a fixed amount (`--oversubscribed_resources`)
or an estimate of what running tasks were allocated but do not use.
Peloton's host manager sums the agents' revocable cpu into the cluster's
slack capacity, the resource manager lends it to revocable tasks up to each
pool's slack limit, and takes it back by preempting revocable tasks first
when it shrinks.  An agent here does what those estimators do:

* `revocable_cpus` (the `--revocable-cpus` option): offered always, on top
  of the agent's regular cpus, like Mesos' fixed estimator;
* with `--slack-from-usage`, also the unused part of non-revocable
  allocations: for each running non-revocable run, the cpu it was given
  minus the cpu its processes used over the last interval (never below
  zero).  Runs are measured from their second sample on, so a run that just
  started adds nothing yet (the estimate errs low).

The total is rounded down to a tenth of a cpu, so small fluctuations do not
re-announce the host on every heartbeat.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import psutil

#: Slack is offered in steps of 1/STEPS_PER_CPU cpus (a tenth).
STEPS_PER_CPU = 10

#: (run id, cpu given, pid of the task's process) of the running non-revocable runs.
Runs = Callable[[], Sequence[tuple[str, float, int]]]


def process_tree_cpu_seconds(pid: int) -> float | None:
    """User + system cpu seconds used so far by `pid` and its descendants (None if gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue  # exited between the listing and the read
        total += t.user + t.system
    return total


class SlackEstimator:
    """What `estimate()` returns is the slack cpu to offer now (see the module docstring)."""

    def __init__(self, fixed: float, *, from_usage: bool, runs: Runs,
                 cpu_seconds: Callable[[int], float | None] = process_tree_cpu_seconds,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fixed = max(0.0, fixed)
        self.from_usage = from_usage
        self._runs = runs
        self._cpu_seconds = cpu_seconds
        self._clock = clock
        #: run id -> (time, cpu seconds) of its previous sample.
        self._samples: dict[str, tuple[float, float]] = {}

    def estimate(self) -> float:
        """Fixed slack plus, if enabled, the unused cpu of running non-revocable runs."""
        unused = self._unused() if self.from_usage else 0.0
        return math.floor((self.fixed + unused) * STEPS_PER_CPU + 1e-9) / STEPS_PER_CPU

    def _unused(self) -> float:
        now = self._clock()
        total = 0.0
        seen: dict[str, tuple[float, float]] = {}
        for run_id, given, pid in self._runs():
            used_so_far = self._cpu_seconds(pid)
            if used_so_far is None:
                continue
            seen[run_id] = (now, used_so_far)
            prev = self._samples.get(run_id)
            if prev is None or now <= prev[0]:
                continue
            rate = (used_so_far - prev[1]) / (now - prev[0])
            total += max(0.0, given - rate)
        self._samples = seen
        return total
