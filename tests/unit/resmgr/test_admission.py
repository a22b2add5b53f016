"""Enqueue and admission: entitlement bounds, gangs all or nothing, refusals, reasons."""

from __future__ import annotations

import random

import pytest

from peloton.api.convert.v0_respool import respool_info_to_v0
from peloton.core.model.resources import ZERO
from peloton.core.states import TaskState
from peloton.resmgr.app import ResourceManager
from peloton.storage import Store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import (
    FakeClock,
    launch_all,
    make_pool,
    make_rm,
    place_all,
    run_all,
    singles,
    state_of,
    tasks,
)

S = TaskState


def allocated_within_entitlement(rm: ResourceManager) -> bool:
    """Every leaf's non-slack allocation is within its non-slack entitlement."""
    for leaf in rm.book.tracker.tree.leaves():
        for k in range(4):
            used = leaf.alloc_total[k] - leaf.alloc_slack[k]
            if used > leaf.non_slack_entitlement[k]:
                return False
    return True


def test_elastic_pool_admits_up_to_its_limit(rm: ResourceManager,
                                             hostmgr: FakeHostManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 6))
    ts = tasks(10)
    assert rm.enqueue_gangs(pool, singles(ts)) == []
    assert rm.loops.admit_once() == 6
    assert [state_of(rm, t) for t in ts] == [S.READY] * 6 + [S.PENDING] * 4
    assert allocated_within_entitlement(rm)
    view = rm.pools.get(pool)
    assert view.allocation.cpu == 6 and view.demand.cpu == 4
    # Finishing two running tasks makes room for two more, and no more.
    place_all(rm, hostmgr)
    runs = launch_all(rm, hostmgr)
    rm.loops.events_once(0)
    for run in runs[:2]:
        hostmgr.finish(run)
    rm.loops.events_once(0)
    assert rm.loops.admit_once() == 2
    assert allocated_within_entitlement(rm)
    assert sum(state_of(rm, t) is S.PENDING for t in ts) == 2


def test_allocation_is_exactly_zero_after_tenths_of_a_cpu_end(
        rm: ResourceManager, hostmgr: FakeHostManager) -> None:
    # In floats, ten 0.1-cpu tasks admitted and finished left 2.7755575615628914e-17.
    pool = make_pool(rm, "a", cpu=(0, 8), mem=(0, 1000))
    ts = tasks(10, cpu=0.1, mem=0.1) + tasks(3, cpu=0.7, mem=0.3)
    rm.enqueue_gangs(pool, singles(ts))
    runs = run_all(rm, hostmgr)
    view = rm.pools.get(pool)
    assert view.allocation.cpu == 3.1 and view.allocation.mem_mb == 1.9   # exact sums
    for run in runs:
        hostmgr.finish(run)
    rm.loops.events_once(0)
    view = rm.pools.get(pool)
    assert view.allocation == ZERO and view.demand == ZERO
    info = respool_info_to_v0(pool, view.config, path=view.path, allocation=view.allocation,
                              slack=view.slack_allocation)
    assert [(u.kind, u.allocation, u.slack) for u in info.usage] == [
        ("cpu", 0.0, 0.0), ("memory", 0.0, 0.0), ("disk", 0.0, 0.0), ("gpu", 0.0, 0.0)]
    assert rm.book.tracker.tree.root.alloc_total == [0, 0, 0, 0]


def test_static_reservation_is_held_even_when_idle(rm: ResourceManager) -> None:
    make_pool(rm, "reserved", cpu=(12, 12), static=True)
    elastic = make_pool(rm, "elastic", cpu=(0, 16))
    rm.enqueue_gangs(elastic, singles(tasks(16)))
    rm.refresh_capacity()
    assert rm.loops.admit_once() == 4  # 16-cpu cluster, 12 held by the static pool
    assert allocated_within_entitlement(rm)


def test_demand_moves_entitlement_between_pools(store: Store, hostmgr: FakeHostManager,
                                                clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, entitlement_min_interval=0.5)
    a = make_pool(rm, "a", cpu=(0, 16))
    b = make_pool(rm, "b", cpu=(0, 16))
    rm.enqueue_gangs(a, singles(tasks(16)))
    clock.advance(1)
    rm.loops.admit_once()  # new demand: entitlement recomputed before admission
    assert rm.pools.get(a).allocation.cpu == 16
    rm.enqueue_gangs(b, singles(tasks(16)))
    clock.advance(1)
    rm.loops.admit_once()
    # b is now entitled to half and admits that much; a is over and keeps what it
    # has until the preemptor takes it back.
    assert rm.pools.get(b).entitlement.cpu == pytest.approx(8)
    assert rm.pools.get(a).entitlement.cpu == pytest.approx(8)
    assert rm.pools.get(b).allocation.cpu == 8
    assert rm.pools.get(a).allocation.cpu == 16


def test_randomised_admission_never_exceeds_entitlement(rm: ResourceManager,
                                                        hostmgr: FakeHostManager,
                                                        clock: FakeClock) -> None:
    rng = random.Random(7)
    pools = [make_pool(rm, f"p{i}", cpu=(rng.choice([0, 2, 4]), rng.choice([4, 8, 16])))
             for i in range(3)]
    running: list[str] = []
    for _ in range(40):
        pool = rng.choice(pools)
        rm.enqueue_gangs(pool, singles(tasks(rng.randint(1, 5), cpu=rng.choice([0.5, 1, 2]))))
        clock.advance(0.3)
        if rng.random() < 0.3:
            rm.refresh_capacity()
        rm.loops.admit_once()
        assert allocated_within_entitlement(rm)
        place_all(rm, hostmgr)
        running.extend(launch_all(rm, hostmgr))
        rm.loops.events_once(0)
        for run in rng.sample(running, k=min(len(running), rng.randint(0, 3))):
            running.remove(run)
            hostmgr.finish(run)
        rm.loops.events_once(0)


def test_gangs_are_admitted_all_or_nothing(rm: ResourceManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 4))
    first = tasks(2)
    gang = tasks(3)
    rm.enqueue_gangs(pool, [*singles(first), gang])
    assert rm.loops.admit_once() == 2
    assert {state_of(rm, t) for t in gang} == {S.PENDING}
    rm.kill_tasks([first[0].task_id])
    assert rm.loops.admit_once() == 3
    out = [g for g in rm.dequeue_gangs(100, 0) if len(g.run_ids) == 3]
    assert len(out) == 1
    assert [t.task_id for t in out[0].gang.tasks] == [t.task_id for t in gang]


def test_enqueue_refusals_and_run_ids(rm: ResourceManager) -> None:
    org = make_pool(rm, "org", cpu=(0, 8))
    leaf = make_pool(rm, "leaf", org, cpu=(0, 8))
    ts = tasks(2)
    failures = rm.enqueue_gangs("nope", singles(ts))
    assert [f.task_id for f in failures] == [t.task_id for t in ts]
    assert "not found" in failures[0].reason
    assert "not a leaf" in rm.enqueue_gangs(org, singles(ts))[0].reason
    assert rm.enqueue_gangs(leaf, singles(ts)) == []
    assert rm.enqueue_gangs(leaf, singles(ts)) == []  # same run again: no effect
    assert rm.pools.get(leaf).demand.cpu == 2
    newer = tasks(1, job=ts[0].task_id.job_id, run=2)
    assert rm.enqueue_gangs(leaf, singles(newer)) == []  # replaces run 1
    assert rm.book.tracker.get(ts[0].task_id).task.run_id == 2  # type: ignore[union-attr]
    assert rm.pools.get(leaf).demand.cpu == 2
    older = tasks(1, job=ts[0].task_id.job_id, run=1)
    assert "older" in rm.enqueue_gangs(leaf, singles(older))[0].reason


def test_pending_reasons_name_the_admitter(rm: ResourceManager,
                                           hostmgr: FakeHostManager) -> None:
    a = make_pool(rm, "a", cpu=(1, 2))
    b = make_pool(rm, "b", cpu=(1, 4))
    pre = tasks(3)
    np = tasks(2, preemptible=False)
    rm.enqueue_gangs(a, singles(pre))
    rm.enqueue_gangs(b, singles(np))
    rm.loops.admit_once()
    reasons = rm.pending_reasons([t.task_id for t in pre + np])
    assert reasons[pre[0].task_id] == "admitted, waiting for placement"
    assert reasons[pre[2].task_id] == (
        "waiting for admission in pool /a (1st of 1 queued): the pool is at its entitlement: "
        "needs 1 cpu, 2 of its 2 cpu entitled in use")
    assert reasons[np[1].task_id] == (
        "waiting for admission in pool /b (1st of 1 queued): non-preemptible tasks run only "
        "within the pool's reservation: needs 1 cpu, 1 of its 1 cpu reserved in use")
    run_all(rm, hostmgr)
    assert pre[0].task_id not in rm.pending_reasons([pre[0].task_id])  # running: no reason


def test_the_readme_scenario_backfills_and_explains_in_rounded_numbers(
        rm: ResourceManager, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    """Issue 13: a 500-cpu job (pool limit 4, 16-cpu cluster) queued anyway, then a 3-cpu
    job and small ones: the small ones run, the big ones say why in words."""
    pool = make_pool(rm, "DefaultResPool", cpu=(1, 4))
    big, mid = tasks(1, 500), tasks(1, 17)
    small = tasks(5, 0.1)
    rm.enqueue_gangs(pool, singles(big + mid + small))
    rm.refresh_capacity()
    rm.loops.admit_once()
    assert [state_of(rm, t) for t in small] == [TaskState.READY] * 5
    reasons = rm.pending_reasons([big[0].task_id, mid[0].task_id])
    assert reasons[big[0].task_id] == (
        "waiting for admission in pool /DefaultResPool (1st of 2 queued): needs 500 cpu, more "
        "than the pool may use now (4 cpu; its limit is 4 cpu, the cluster has 16 cpu); it "
        "waits until the pool may use more")
    assert "e-" not in reasons[mid[0].task_id] and "0.5" not in reasons[mid[0].task_id]


def test_an_aged_gang_reserves_room_and_the_others_say_so(
        rm: ResourceManager, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    pool = make_pool(rm, "p", cpu=(4, 4))
    first = tasks(1, 3)
    rm.enqueue_gangs(pool, singles(first))
    rm.refresh_capacity()
    rm.loops.admit_once()
    big = tasks(1, 2)
    rm.enqueue_gangs(pool, singles(big))
    rm.loops.admit_once()                       # refused now (1 cpu free)
    clock.advance(rm.config.backfill_reserve_after + 1)
    small = tasks(1, 1)
    rm.enqueue_gangs(pool, singles(small))
    rm.loops.admit_once()
    assert state_of(rm, small[0]) is TaskState.PENDING   # 1 cpu free, kept for the big one
    why = rm.pending_reasons([big[0].task_id, small[0].task_id])
    assert "holds a reservation" in why[big[0].task_id]
    assert "room is kept for an older gang" in why[small[0].task_id]
    assert "needs 2 cpu" in why[small[0].task_id]
