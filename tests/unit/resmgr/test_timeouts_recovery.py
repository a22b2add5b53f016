"""State timeouts (PLACING, LAUNCHING, PREEMPTING) and recovery after a restart."""

from __future__ import annotations

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.states import TaskState
from peloton.resmgr.transitions import expire
from peloton.storage import Store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import (
    FakeClock,
    make_pool,
    make_rm,
    place_all,
    pool_config,
    run_all,
    singles,
    state_of,
    tasks,
)

S = TaskState


def test_placing_times_out_with_growing_backoff(store: Store, hostmgr: FakeHostManager,
                                                clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, placing_timeout=10.0, placement_retry_backoff=5.0,
                 retry_delay=0.0)
    pool = make_pool(rm, "a", cpu=(0, 8))
    (task,) = tasks(1)
    rm.enqueue_gangs(pool, [[task]])
    rm.loops.admit_once()
    for attempt in (1, 2):
        assert rm.dequeue_gangs(10, 0)  # the engine takes it and never answers
        limit = 10.0 + 5.0 * attempt
        clock.advance(limit - 0.1)
        rm.loops.admit_once()
        assert state_of(rm, task) is S.PLACING
        clock.advance(0.2)
        rm.loops.admit_once()
        assert state_of(rm, task) is S.READY
        assert "did not answer" in rm.pending_reasons([task.task_id])[task.task_id]
    assert rm.dequeue_gangs(10, 0)
    clock.advance(10.1)  # third attempt: the cycle ends, back to PENDING
    assert expire(rm.book, clock.monotonic()) == 1
    assert state_of(rm, task) is S.PENDING
    assert rm.pools.get(pool).allocation.cpu == 0


def test_launching_times_out_back_to_ready(store: Store, hostmgr: FakeHostManager,
                                           clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, launching_timeout=30.0)
    pool = make_pool(rm, "a", cpu=(0, 8))
    (task,) = tasks(1)
    rm.enqueue_gangs(pool, [[task]])
    rm.loops.admit_once()
    place_all(rm, hostmgr)
    assert rm.get_placements(10, 0)
    clock.advance(31)
    rm.loops.admit_once()
    assert state_of(rm, task) is S.READY
    assert rm.pools.get(pool).allocation.cpu == 1  # still admitted: it goes to placement again
    assert [g.gang.tasks[0].task_id for g in rm.dequeue_gangs(10, 0)] == [task.task_id]
    # It did start after all: the late RUNNING event wins over the second placement.
    hostmgr.emit(str(task.task_id.run(1)), S.RUNNING, "host-1")
    rm.loops.events_once(0)
    assert state_of(rm, task) is S.RUNNING


def test_preempting_times_out_back_to_running(store: Store, hostmgr: FakeHostManager,
                                              clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock, preempting_timeout=60.0,
                 sustained_over_allocation_count=1)
    pool = make_pool(rm, "a", cpu=(0, 4))
    ts = tasks(4)
    rm.enqueue_gangs(pool, singles(ts))
    run_all(rm, hostmgr)
    rm.pools.update(pool, pool_config("a", cpu=(0, 3)))
    rm.loops.preempt_once()
    (victim,) = rm.take_victims(10)
    assert state_of(rm, next(t for t in ts if t.task_id == victim.task_id)) is S.PREEMPTING
    clock.advance(61)
    rm.loops.admit_once()
    assert {state_of(rm, t) for t in ts} == {S.RUNNING}


def test_recovery_after_a_restart(store: Store, hostmgr: FakeHostManager,
                                  clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock)
    pool = make_pool(rm, "a", cpu=(0, 4))
    running, launched, queued = tasks(2), tasks(1), tasks(3)
    # A new resource manager over the same store: pools are back, tasks are not.
    rm2 = make_rm(store, hostmgr, clock)
    assert rm2.pools.get(pool).allocation.cpu == 0
    for t in running:
        rm2.recover_task(pool, t, S.RUNNING, "host-1")
    rm2.recover_task(pool, launched[0], S.STARTING, "host-2")
    rm2.recover_task(pool, running[0], S.RUNNING, "host-1")  # idempotent
    rm2.enqueue_gangs(pool, singles(queued))
    assert rm2.pools.get(pool).allocation.cpu == 3
    assert state_of(rm2, launched[0]) is S.LAUNCHED
    assert rm2.loops.admit_once() == 1  # only one more fits in the limit of 4
    with pytest.raises(InvalidArgument):
        rm2.recover_task(pool, tasks(1)[0], S.PENDING)
    # Events keep flowing to recovered runs: a terminal one frees the allocation.
    hostmgr.emit(str(running[1].task_id.run(1)), S.SUCCEEDED, "host-1")
    hostmgr.emit(str(launched[0].task_id.run(1)), S.RUNNING, "host-2")
    rm2.loops.events_once(0)
    assert state_of(rm2, running[1]) is None
    assert state_of(rm2, launched[0]) is S.RUNNING
    assert rm2.pools.get(pool).allocation.cpu == 3
    # A newer run recovered replaces the old one; an older one is ignored.
    newer = tasks(1, job=running[0].task_id.job_id, run=2)[0]
    rm2.recover_task(pool, newer, S.RUNNING, "host-3")
    rm2.recover_task(pool, running[0], S.RUNNING, "host-1")
    assert rm2.book.tracker.get(newer.task_id).task.run_id == 2  # type: ignore[union-attr]
    assert rm2.pools.get(pool).allocation.cpu == 3
    assert rm.pools.get(pool).allocation.cpu == 0  # the old instance is untouched
