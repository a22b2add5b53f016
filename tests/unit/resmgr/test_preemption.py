"""Preemption inside the resource manager: sustained over-allocation -> victims -> room."""

from __future__ import annotations

from peloton.core.model.sched import VictimReason
from peloton.core.states import TaskState
from peloton.storage import Store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import (
    FakeClock,
    make_pool,
    make_rm,
    place_all,
    run_all,
    singles,
    state_of,
    tasks,
)

S = TaskState


def test_preempting_elastic_work_makes_room_in_a_reserved_pool(
        store: Store, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, sustained_over_allocation_count=3, retry_delay=0.1)
    shared = make_pool(rm, "shared", cpu=(2, 16))
    reserved = make_pool(rm, "reserved", cpu=(8, 8))
    keep = tasks(2, preemptible=False, priority=0)
    elastic = tasks(14, priority=1)
    rm.enqueue_gangs(shared, singles(keep + elastic))
    clock.advance(1)
    run_all(rm, hostmgr)
    assert rm.pools.get(shared).allocation.cpu == 16

    critical = tasks(8, preemptible=False)
    rm.enqueue_gangs(reserved, singles(critical))
    clock.advance(1)
    rm.loops.admit_once()
    assert rm.pools.get(reserved).entitlement.cpu == 8
    place_all(rm, hostmgr)  # the cluster is full: nothing of the reserved pool fits yet
    assert {state_of(rm, t) for t in critical} == {S.READY}

    for _ in range(2):  # over, but not for long enough
        rm.loops.preempt_once()
        assert rm.take_victims(100) == []
    rm.loops.preempt_once()
    victims = rm.take_victims(100)
    assert rm.take_victims(100) == []  # each victim is handed out once
    assert len(victims) == 8
    assert all(v.reason is VictimReason.PREEMPTED and v.hostname for v in victims)
    by_id = {t.task_id: t for t in keep + elastic}
    assert all(by_id[v.task_id].preemptible for v in victims)  # never the non-preemptible
    assert all(state_of(rm, by_id[v.task_id]) is S.PREEMPTING for v in victims)

    # The job manager kills them; their allocation comes back with the KILLED events.
    hostmgr.kill([str(v.task_id.run(v.run_id)) for v in victims])
    rm.loops.events_once(0)
    assert rm.pools.get(shared).allocation.cpu == 8
    clock.advance(5)
    place_all(rm, hostmgr)
    assert {state_of(rm, t) for t in critical} == {S.PLACED}
    assert rm.pools.get(reserved).allocation.cpu == 8


def test_victims_that_have_not_started_are_requeued_locally(
        store: Store, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, sustained_over_allocation_count=1)
    a = make_pool(rm, "a", cpu=(0, 16))
    b = make_pool(rm, "b", cpu=(0, 16))
    queued = tasks(16)
    rm.enqueue_gangs(a, singles(queued))
    clock.advance(1)
    rm.loops.admit_once()
    rm.enqueue_gangs(b, singles(tasks(16)))
    clock.advance(1)
    rm.loops.admit_once()
    rm.loops.preempt_once()
    assert rm.take_victims(100) == []  # nothing was running: nothing for the job manager
    view = rm.pools.get(a)
    assert view.allocation.cpu == 8 and view.demand.cpu == 8
    back = [t for t in queued if state_of(rm, t) is S.PENDING]
    assert len(back) == 8
    assert "preempted before it started" in rm.pending_reasons([back[0].task_id])[back[0].task_id]


def test_no_preemption_when_disabled(store: Store, hostmgr: FakeHostManager,
                                     clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, preemption_enabled=False,
                 sustained_over_allocation_count=1)
    a = make_pool(rm, "a", cpu=(0, 16))
    b = make_pool(rm, "b", cpu=(0, 16))
    rm.enqueue_gangs(a, singles(tasks(16)))
    clock.advance(1)
    run_all(rm, hostmgr)
    rm.enqueue_gangs(b, singles(tasks(4)))
    clock.advance(1)
    rm.loops.admit_once()
    rm.loops.preempt_once()
    assert rm.take_victims(100) == []
    assert rm.pools.get(a).allocation.cpu == 16
