"""Preemption: sustained over-allocation, victim ranking and greedy selection."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.resources import Resources
from peloton.core.preemption import (
    OverAllocation,
    OverAllocationCounter,
    VictimAction,
    rank_victims,
    select_victims,
)
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState as S
from tests.unit.core.factories import pool_config, rm_task, units


@dataclass
class T:
    name: str
    state: S
    priority: int = 0
    start_time: float = 0.0
    resources: Resources = Resources(cpu=1)
    preemptible: bool = True
    revocable: bool = False


def test_ranking_state_then_priority_then_newest() -> None:
    tasks = [T("run-old", S.RUNNING, 0, 10), T("run-new", S.RUNNING, 0, 20),
             T("run-hi", S.RUNNING, 5, 30), T("placing", S.PLACING, 9),
             T("ready", S.READY, 9), T("launching", S.LAUNCHING), T("np", S.READY,
                                                                    preemptible=False)]
    assert [t.name for t in rank_victims(tasks)] == ["ready", "placing", "run-new", "run-old",
                                                     "run-hi"]


def test_greedy_skips_useless_victims_and_splits_slack() -> None:
    tasks = [T("gpu", S.READY, resources=Resources(gpu=1)),
             T("a", S.RUNNING, 0, 5, Resources(cpu=2)), T("b", S.RUNNING, 0, 1, Resources(cpu=2)),
             T("rev", S.RUNNING, 0, 1, Resources(cpu=1, mem_mb=100), revocable=True),
             T("np", S.READY, resources=Resources(cpu=10), preemptible=False)]
    over = OverAllocation("p", Resources(cpu=3), Resources(mem_mb=50))
    got = [(t.name, a) for t, a in select_victims(over, tasks)]
    assert got == [("rev", VictimAction.REVOKE), ("a", VictimAction.REVOKE),
                   ("b", VictimAction.REVOKE)]
    over = OverAllocation("p", Resources(cpu=1, gpu=1), Resources())
    assert [(t.name, a) for t, a in select_victims(over, tasks)] == [
        ("gpu", VictimAction.REQUEUE), ("a", VictimAction.REVOKE)]


def test_counter_needs_sustained_over_allocation() -> None:
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(0, 100, 1)))
    node.non_slack_entitlement = units(10)
    tracker = TaskTracker(tree)
    tracker.recover("p", rm_task(12), S.RUNNING)
    counter = OverAllocationCounter(sustained_cycles=3)
    assert counter.observe([node]) == [] and counter.observe([node]) == []
    (over,) = counter.observe([node])
    assert over.non_slack_excess.cpu == 2 and over.slack_excess.is_zero()
    assert counter.observe([node]) == []  # the streak starts again after a report
    node.non_slack_entitlement = units(20)
    counter.observe([node])
    assert counter.counts == {}  # back under: the streak resets
    with pytest.raises(ValueError):
        OverAllocationCounter(0)


def test_tracker_records_are_candidates() -> None:
    tree = PoolTree()
    node = tree.create("p", pool_config("p", cpu=(0, 100, 1)))
    tracker = TaskTracker(tree)
    low = tracker.recover("p", rm_task(1, inst=0, priority=1), S.RUNNING, 5.0)
    tracker.recover("p", rm_task(1, inst=1, priority=2), S.RUNNING, 9.0)
    over = OverAllocation("p", Resources(cpu=1), Resources())
    ((victim, action),) = select_victims(over, node.active)
    assert victim is low and action is VictimAction.REVOKE


# -- properties ---------------------------------------------------------------------------------

_states = st.sampled_from([S.READY, S.PLACING, S.RUNNING, S.LAUNCHING, S.PENDING])
_tasks = st.lists(st.builds(
    T, name=st.just("t"), state=_states, priority=st.integers(0, 3),
    start_time=st.floats(0, 100), preemptible=st.booleans(), revocable=st.booleans(),
    resources=st.builds(Resources, st.integers(0, 4).map(float), st.integers(0, 4).map(float))),
    max_size=12)
_excess = st.builds(Resources, st.integers(0, 8).map(float), st.integers(0, 8).map(float))


@settings(max_examples=200, deadline=None)
@given(_tasks, _excess, _excess)
def test_victim_properties(tasks: list[T], non_slack: Resources, slack: Resources) -> None:
    got = select_victims(OverAllocation("p", non_slack, slack), tasks)
    victims = [t for t, _ in got]
    assert len({id(t) for t in victims}) == len(victims)           # nobody picked twice
    for t, action in got:
        assert t.preemptible and t.state in (S.READY, S.PLACING, S.RUNNING)
        assert action is (VictimAction.REVOKE if t.state is S.RUNNING else VictimAction.REQUEUE)
    # Each kind of victims follows the eviction ranking.
    order = {id(t): i for i, t in enumerate(rank_victims(tasks))}
    for revocable in (True, False):
        ranks = [order[id(t)] for t in victims if t.revocable is revocable]
        assert ranks == sorted(ranks)
    # The excess is covered whenever the eligible tasks together could cover it.
    for revocable, excess in ((True, slack), (False, non_slack)):
        eligible = [t for t in rank_victims(tasks) if t.revocable is revocable]
        freed = sum((t.resources for t in victims if t.revocable is revocable), Resources())
        could = sum((t.resources for t in eligible), Resources())
        if excess.fits_in(could):
            assert excess.fits_in(freed)
        # No victim is useless: each one freed something still needed when it was picked.
        assert all(not t.resources.is_zero() for t in victims if t.revocable is revocable)
