"""The slack an agent offers: fixed revocable cpus plus the unused part of regular runs."""

from __future__ import annotations

import os

from peloton.agent.slack import SlackEstimator, process_tree_cpu_seconds


class FakeUsage:
    """Runs and their cpu seconds, driven by the test."""

    def __init__(self) -> None:
        self.now = 0.0
        self.runs: list[tuple[str, float, int]] = []
        self.seconds: dict[int, float | None] = {}

    def estimator(self, fixed: float, from_usage: bool = True) -> SlackEstimator:
        return SlackEstimator(fixed, from_usage=from_usage, runs=lambda: self.runs,
                              cpu_seconds=lambda pid: self.seconds.get(pid),
                              clock=lambda: self.now)


def test_fixed_slack_is_offered_as_it_is() -> None:
    fake = FakeUsage()
    assert fake.estimator(2.0, from_usage=False).estimate() == 2.0
    assert fake.estimator(0.0, from_usage=False).estimate() == 0.0
    assert fake.estimator(-1.0, from_usage=False).estimate() == 0.0


def test_unused_cpu_of_regular_runs_becomes_slack() -> None:
    fake = FakeUsage()
    est = fake.estimator(0.5)
    fake.runs = [("busy", 1.0, 11), ("idle", 2.0, 12)]
    fake.seconds = {11: 0.0, 12: 0.0}
    assert est.estimate() == 0.5          # first sample: nothing measured yet
    fake.now, fake.seconds = 10.0, {11: 10.0, 12: 2.5}   # busy uses 1 cpu, idle 0.25
    assert est.estimate() == 0.5 + 1.7    # 0.5 fixed + (1 - 1) + (2 - 0.25), down to 0.1
    fake.now, fake.seconds = 20.0, {11: 25.0, 12: 2.5}   # over its share: counts as 0
    assert est.estimate() == 0.5 + 2.0
    fake.runs = [("busy", 1.0, 11)]       # idle ended: its slack goes with it
    fake.now, fake.seconds = 30.0, {11: 25.0}
    assert est.estimate() == 0.5 + 1.0
    fake.seconds = {}                     # a process that is gone adds nothing
    fake.now = 40.0
    assert est.estimate() == 0.5


def test_own_process_tree_is_measured() -> None:
    used = process_tree_cpu_seconds(os.getpid())
    assert used is not None and used > 0
    assert process_tree_cpu_seconds(2 ** 22 + 12345) is None
