"""The remote-volume cache's eviction rule (peloton/agent/remote_lru.py), as a table."""

from __future__ import annotations

import pytest

from peloton.agent.remote_lru import CacheEntry, EvictionPlan, evictable, plan_evictions


def e(name: str, size: int, last_used: float, users: int = 0) -> CacheEntry:
    return CacheEntry(name, size, last_used, users)


@pytest.mark.parametrize(("users", "may"), [(0, True), (1, False), (3, False)])
def test_only_an_entry_no_run_holds_may_be_evicted(users: int, may: bool) -> None:
    assert evictable(e("a", 10, 1.0, users)) is may


CASES = [
    # (what the cache holds, budget, incoming bytes) -> the plan
    pytest.param([], 100, 50, EvictionPlan((), 0), id="empty cache, fits"),
    pytest.param([], 100, 150, EvictionPlan((), 50), id="empty cache, the new entry alone is too big"),
    pytest.param([e("a", 40, 1), e("b", 40, 2)], 100, 20, EvictionPlan((), 0),
                 id="fits exactly: nothing goes"),
    pytest.param([e("a", 40, 2), e("b", 40, 1)], 100, 30, EvictionPlan(("b",), 0),
                 id="the least recently used goes first"),
    pytest.param([e("a", 40, 1), e("b", 40, 2), e("c", 10, 3)], 100, 70,
                 EvictionPlan(("a", "b"), 0), id="as many as it takes, oldest first"),
    pytest.param([e("a", 40, 1, users=1), e("b", 40, 2)], 100, 30, EvictionPlan(("b",), 0),
                 id="a held entry is skipped, even when oldest"),
    pytest.param([e("a", 40, 1, users=1), e("b", 40, 2, users=2)], 100, 30,
                 EvictionPlan((), 10), id="all held: nothing goes, over budget"),
    pytest.param([e("a", 40, 1, users=1), e("b", 10, 2)], 50, 30, EvictionPlan(("b",), 20),
                 id="every unheld entry goes, still over budget"),
    pytest.param([e("b", 40, 1), e("a", 40, 1)], 50, 0, EvictionPlan(("a",), 0),
                 id="ties broken by name"),
    pytest.param([e("a", 40, 1), e("b", 40, 2)], 50, 0, EvictionPlan(("a",), 0),
                 id="nothing incoming: back within a lowered budget"),
    pytest.param([e("a", 40, 1), e("b", 40, 2)], 0, 0, EvictionPlan(("a", "b"), 0),
                 id="a zero budget keeps only what is held"),
]


@pytest.mark.parametrize(("entries", "budget", "incoming", "plan"), CASES)
def test_the_plan(entries: list[CacheEntry], budget: int, incoming: int, plan: EvictionPlan) -> None:
    assert plan_evictions(entries, budget, incoming) == plan
