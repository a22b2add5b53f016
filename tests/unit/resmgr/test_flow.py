"""The task flow between the daemons: dequeue -> set_placements -> get_placements -> events."""

from __future__ import annotations

import gevent

from peloton.core.model.sched import PlacedTask, Placement, PlacementFailure, PlacementGang
from peloton.core.states import TaskState
from peloton.resmgr.app import ResourceManager
from peloton.storage import Store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import (
    FakeClock,
    make_pool,
    make_rm,
    singles,
    state_of,
    tasks,
)

S = TaskState


def placed(g: PlacementGang, host: str = "host-0") -> Placement:
    """A placement of a whole gang on one host."""
    return Placement(host, f"agent-{host}", tuple(
        PlacedTask(t.task_id, run, (31000 + i,))
        for i, (t, run) in enumerate(zip(g.gang.tasks, g.run_ids, strict=True))))


def failed(g: PlacementGang, reason: str) -> list[PlacementFailure]:
    """Every task of a gang failed with `reason`."""
    return [PlacementFailure(t.task_id, run, reason)
            for t, run in zip(g.gang.tasks, g.run_ids, strict=True)]


def test_states_from_enqueue_to_success(rm: ResourceManager, hostmgr: FakeHostManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 8))
    (task,) = tasks(1)
    rm.enqueue_gangs(pool, [[task]])
    assert state_of(rm, task) is S.PENDING
    rm.loops.admit_once()
    assert state_of(rm, task) is S.READY
    (gang,) = rm.dequeue_gangs(10, 0)
    assert gang.pool_id == pool and gang.run_ids == (1,)
    assert state_of(rm, task) is S.PLACING
    assert rm.dequeue_gangs(10, 0) == []
    rm.set_placements([placed(gang, "host-2")], [])
    assert state_of(rm, task) is S.PLACED
    (placement,) = rm.get_placements(10, 0)
    assert placement.hostname == "host-2" and placement.tasks[0].ports == (31000,)
    assert state_of(rm, task) is S.LAUNCHING
    assert rm.get_placements(10, 0) == []
    run = str(task.task_id.run(1))
    hostmgr.emit(run, S.RUNNING, "host-2")
    rm.loops.events_once(0)
    assert state_of(rm, task) is S.RUNNING
    assert rm.pools.get(pool).allocation.cpu == 1
    hostmgr.emit(run, S.SUCCEEDED, "host-2")
    rm.loops.events_once(0)
    assert state_of(rm, task) is None
    assert rm.pools.get(pool).allocation.cpu == 0
    assert hostmgr.acked["resmgr"] == len(hostmgr.events)


def test_get_placements_honours_the_limit(rm: ResourceManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 8))
    rm.enqueue_gangs(pool, [tasks(5)])
    rm.loops.admit_once()
    (gang,) = rm.dequeue_gangs(10, 0)
    rm.set_placements([placed(gang)], [])
    first = rm.get_placements(3, 0)
    second = rm.get_placements(3, 0)
    assert [len(p.tasks) for p in first + second] == [3, 2]
    ids = [t.task_id for p in first + second for t in p.tasks]
    assert ids == [t.task_id for t in gang.gang.tasks]


def test_dequeue_limit_takes_whole_gangs(rm: ResourceManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 16))
    rm.enqueue_gangs(pool, [tasks(3), tasks(3), tasks(3)])
    rm.loops.admit_once()
    assert [len(g.run_ids) for g in rm.dequeue_gangs(4, 0)] == [3]
    assert [len(g.run_ids) for g in rm.dequeue_gangs(2, 0)] == [3]  # at least one gang
    assert [len(g.run_ids) for g in rm.dequeue_gangs(9, 0)] == [3]


def test_stale_placements_and_events_are_ignored(rm: ResourceManager,
                                                 hostmgr: FakeHostManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 8))
    ts = tasks(2)
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    gangs = rm.dequeue_gangs(10, 0)
    rm.kill_tasks([ts[0].task_id])
    rm.set_placements([placed(g) for g in gangs], [])
    assert [t.task_id for p in rm.get_placements(10, 0) for t in p.tasks] == [ts[1].task_id]
    # An event about another run of a tracked task changes nothing.
    hostmgr.emit(str(ts[1].task_id.run(7)), S.FAILED, "host-0")
    hostmgr.emit("not-a-run-id", S.FAILED, "host-0")
    rm.loops.events_once(0)
    assert state_of(rm, ts[1]) is S.LAUNCHING
    assert rm.pools.get(pool).allocation.cpu == 1


def test_failures_keep_their_reason_and_follow_the_backoff_cycle(
        store: Store, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, retry_delay=1.0, retry_delay_max=10.0)
    pool = make_pool(rm, "a", cpu=(0, 8))
    (task,) = tasks(1)
    rm.enqueue_gangs(pool, [[task]])
    rm.loops.admit_once()
    for attempt in (1, 2):
        (gang,) = rm.dequeue_gangs(10, 0)
        rm.set_placements([], failed(gang, f"0 of 4 hosts fit (try {attempt})"))
        assert state_of(rm, task) is S.READY
        reason = rm.pending_reasons([task.task_id])[task.task_id]
        assert reason.endswith(f"last placement attempt: 0 of 4 hosts fit (try {attempt})")
        assert rm.dequeue_gangs(10, 0) == []  # waits out the retry delay
        clock.advance(2.0 ** (attempt - 1) - 0.01)
        assert rm.dequeue_gangs(10, 0) == []
        clock.advance(0.02)
    (gang,) = rm.dequeue_gangs(10, 0)
    rm.set_placements([], failed(gang, "still no room"))
    # The end of a cycle of 3: back to PENDING, allocation freed, admitted again.
    assert state_of(rm, task) is S.PENDING
    assert rm.pools.get(pool).allocation.cpu == 0
    assert "still no room" in rm.pending_reasons([task.task_id])[task.task_id]
    rm.loops.admit_once()
    assert state_of(rm, task) is S.READY
    (gang,) = rm.dequeue_gangs(10, 0)
    rm.set_placements([placed(gang)], [])
    assert task.task_id not in rm.book.reasons


def test_a_failed_gang_is_retried_whole(store: Store, hostmgr: FakeHostManager,
                                        clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, retry_delay=0.0)
    pool = make_pool(rm, "a", cpu=(0, 8))
    gang_tasks = tasks(3)
    rm.enqueue_gangs(pool, [gang_tasks])
    rm.loops.admit_once()
    for _ in range(4):  # past the end of a cycle: a gang stays READY, never split
        (gang,) = rm.dequeue_gangs(10, 0)
        assert len(gang.run_ids) == 3
        rm.set_placements([], failed(gang, "no room"))
        assert {state_of(rm, t) for t in gang_tasks} == {S.READY}


def test_blocking_dequeue_wakes_on_admission(store: Store, hostmgr: FakeHostManager,
                                             clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock)
    pool = make_pool(rm, "a", cpu=(0, 8))
    rm.loops.start()
    try:
        waiter = gevent.spawn(rm.dequeue_gangs, 10, 10.0)
        gevent.sleep(0.01)
        rm.enqueue_gangs(pool, singles(tasks(2)))
        with gevent.Timeout(5):
            gangs = waiter.get()
        assert sum(len(g.run_ids) for g in gangs) >= 1
        placer = gevent.spawn(rm.get_placements, 10, 10.0)
        gevent.sleep(0.01)
        rm.set_placements([placed(g) for g in gangs], [])
        with gevent.Timeout(5):
            assert placer.get()
    finally:
        rm.loops.stop()


def test_kill_frees_queued_and_admitted_tasks(rm: ResourceManager) -> None:
    pool = make_pool(rm, "a", cpu=(0, 2))
    ts = tasks(4)
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    rm.kill_tasks([t.task_id for t in ts[:3]])
    rm.kill_tasks([t.task_id for t in ts[:3]])  # idempotent
    view = rm.pools.get(pool)
    assert view.allocation.cpu == 0 and view.demand.cpu == 1
    rm.loops.admit_once()
    assert [g.gang.tasks[0].task_id for g in rm.dequeue_gangs(10, 0)] == [ts[3].task_id]
