"""Revocable tasks on slack: admitted up to the pool's slack limit, preempted first.

Peloton's rules (resmgr/entitlement/revocable.go, preemption/preemptor.go):
revocable tasks take their cpu from the cluster's slack (the revocable cpu
hosts offer) and their memory, disk and gpu from what the pool's
entitlement leaves after non-revocable work, capped by the slack limit
(20% of the reservation unless set).  When non-revocable work needs that
room, the slack entitlement shrinks and the preemptor picks revocable tasks
to free it; non-revocable tasks of the pool are not touched.
"""

from __future__ import annotations

from peloton.core.model.sched import VictimReason
from peloton.core.states import TaskState
from peloton.storage import Store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import (
    FakeClock,
    make_pool,
    make_rm,
    run_all,
    singles,
    state_of,
    tasks,
)

S = TaskState


def slack_cluster() -> FakeHostManager:
    """Two 4-cpu, 1000 MB hosts, each offering 4 revocable cpus."""
    fake = FakeHostManager()
    for i in range(2):
        fake.add_host(f"host-{i}", cpu=4, mem=1000, slack_cpu=4)
    return fake


def test_revocable_tasks_run_on_slack_up_to_the_slack_limit(store: Store,
                                                           clock: FakeClock) -> None:
    hosts = slack_cluster()
    rm = make_rm(store, hosts, clock)
    # Memory reservation 1000 MB: the slack limit (20%) lets revocable tasks hold 200 MB.
    pool = make_pool(rm, "batch", cpu=(8, 8), mem=(1000, 2000))
    revocable = tasks(5, cpu=1, mem=100, revocable=True)
    rm.enqueue_gangs(pool, singles(revocable))
    rm.refresh_capacity()
    run_all(rm, hosts)
    running = [t for t in revocable if state_of(rm, t) is S.RUNNING]
    assert len(running) == 2                         # 2 x 100 MB = the slack limit
    view = rm.pools.get(pool)
    assert view.slack_allocation.cpu == 2 and view.slack_allocation.mem_mb == 200
    assert view.allocation.cpu == 0                  # none of the pool's regular cpu is used
    assert sum(len(hosts.runs(f"host-{i}")) for i in range(2)) == 2


def test_without_slack_revocable_tasks_wait(store: Store, clock: FakeClock) -> None:
    hosts = FakeHostManager()
    hosts.add_host("host-0", cpu=4, mem=1000)
    rm = make_rm(store, hosts, clock)
    pool = make_pool(rm, "batch", cpu=(4, 4), mem=(1000, 1000))
    (task,) = tasks(1, cpu=1, mem=10, revocable=True)
    rm.enqueue_gangs(pool, [[task]])
    rm.refresh_capacity()
    run_all(rm, hosts)
    assert state_of(rm, task) is S.PENDING


def test_revocable_tasks_are_preempted_first_when_regular_work_needs_the_room(
        store: Store, clock: FakeClock) -> None:
    hosts = slack_cluster()
    rm = make_rm(store, hosts, clock, sustained_over_allocation_count=2)
    pool = make_pool(rm, "mixed", cpu=(8, 8), mem=(1000, 1000))
    regular = tasks(2, cpu=1, mem=300)
    revocable = tasks(2, cpu=1, mem=100, revocable=True)
    rm.enqueue_gangs(pool, singles(regular + revocable))
    clock.advance(1)
    rm.refresh_capacity()
    run_all(rm, hosts)
    assert {state_of(rm, t) for t in regular + revocable} == {S.RUNNING}

    # More regular work: 1000 MB of regular memory wanted, so nothing is left for slack.
    more = tasks(2, cpu=1, mem=200)
    rm.enqueue_gangs(pool, singles(more))
    clock.advance(1)
    rm.refresh_capacity()
    rm.loops.admit_once()
    victims = []
    for _ in range(3):
        rm.loops.preempt_once()
        victims += rm.take_victims(100)
    revocable_ids = {t.task_id for t in revocable}
    assert {v.task_id for v in victims} == revocable_ids   # the revocable ones, and only they
    assert all(v.reason is VictimReason.PREEMPTED for v in victims)
    assert all(state_of(rm, t) is S.RUNNING for t in regular)
