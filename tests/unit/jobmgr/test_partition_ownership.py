"""A job manager drives only the jobs of the partitions it owns (ownership.py), deterministically.

The scene: a lone job manager (every partition) creates two jobs in different partitions
and runs them; then a job manager built over the same store and fakes, holding only the
first job's partition, takes over, as a member of an all-active cluster would after a
restart.  It must recover, evaluate and apply events only for its own job, never kill
the other job's runs as orphans, pick the other partition up on `acquire_partition`
(with the run that ended meanwhile restarted exactly once) and let its own go on
`release_partition`.  Members of an all-active cluster write through their partitions'
fences, and share one resource manager whose placements and victims each takes only for
its own jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import gevent
import gevent.event
import pytest

from peloton.core.model.ids import RunId, TaskId, new_id
from peloton.core.model.sched import Victim, VictimReason
from peloton.core.partitions import fence_name
from peloton.core.ports import HostManagerPort
from peloton.core.states import JobState, TaskState
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.ownership import Ownership
from peloton.storage import Store
from peloton.storage.leader_store import FencedOut
from peloton.storage.partition_fences import PartitionFences, PartitionNotHeld
from tests.harness.partition_ids import job_in
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState
COUNT = 4


def take_over(h: Harness, held: set[int]) -> JobManager:
    """A job manager over the same store and fakes holding only `held`, now the harness's."""
    jm = JobManager(cast(Store, h.conflicts), h.rm, cast(HostManagerPort, h.hosts), h.config,
                    clock=h.clock,
                    ownership=Ownership(COUNT, held))
    h.jm = jm
    jm.recovery.recover()
    return jm


def run_of(h: Harness, job_id: str, instance: int) -> str:
    return str(RunId(job_id, instance, h.store.get_task_runtime(job_id, instance).run_id))


def launches(h: Harness, job_id: str, instance: int) -> list[str]:
    runs = [RunId.parse(spec.run_id) for _, spec in h.hosts.launches]
    return [str(r) for r in runs if (r.job_id, r.instance) == (job_id, instance)]


def test_a_lone_job_manager_owns_every_partition() -> None:
    lone = Ownership(COUNT)
    assert lone.everything and lone.held == frozenset(range(COUNT))
    assert all(lone.owns(new_id()) for _ in range(20))
    some = Ownership(COUNT, {1})
    assert not some.everything
    assert some.owns(job_in(1, COUNT)) and not some.owns(job_in(2, COUNT))
    with pytest.raises(ValueError):
        Ownership(COUNT, {COUNT})


def test_a_member_drives_only_its_partitions_and_takes_one_over(h: Harness) -> None:
    mine, theirs = job_in(0, COUNT), job_in(1, COUNT)
    for job_id in (mine, theirs):
        h.jm.jobs.create(job_spec(2), job_id)
    h.settle(5)
    assert h.states(mine) == h.states(theirs) == [S.RUNNING, S.RUNNING]
    h.hosts.killed.clear()

    jm = take_over(h, {0})
    assert mine in jm.cache and theirs not in jm.cache  # recovery loaded only its own
    before = list(h.hosts.launches)

    # A run of a job it owns that the task is not on is an orphan and is killed; one of
    # another member's job is left to that member (its owner kills it, once).
    stray_mine, stray_theirs = str(RunId(mine, 0, 7)), str(RunId(theirs, 0, 7))
    h.hosts.emit(stray_theirs, S.RUNNING, "host-0")
    h.hosts.emit(stray_mine, S.RUNNING, "host-0")
    h.settle(1)
    assert h.hosts.killed == [stray_mine]

    # Its own task's failure is applied and the task restarted on a new run.
    h.hosts.finish(run_of(h, mine, 0), S.FAILED)
    h.settle(60)
    assert h.states(mine) == [S.RUNNING, S.RUNNING]
    assert h.store.get_task_runtime(mine, 0).run_id == 2

    # A key of a job it does not own does nothing, even if something schedules it.
    jm.queue.enqueue_job(theirs)
    h.run_due()
    assert theirs not in jm.cache
    assert h.hosts.launches == [*before, (h.store.get_task_runtime(mine, 0).host,
                                          h.hosts.launches[-1][1])]  # only mine's new run

    # Taking the other partition over: recovered (its runs handed back, none launched
    # again), then driven: a failure restarts the task exactly once.
    ended = run_of(h, theirs, 0)
    assert jm.acquire_partition(1) == 1
    assert theirs in jm.cache
    h.settle(5)
    assert launches(h, theirs, 0) == [ended] and len(launches(h, theirs, 1)) == 1
    h.hosts.finish(ended, S.FAILED)
    h.settle(60)
    assert h.states(theirs) == [S.RUNNING, S.RUNNING]
    assert launches(h, theirs, 0) == [ended, str(RunId(theirs, 0, 2))]  # no doubled run

    # Releasing its first partition: the job leaves the cache and the queue, stays active
    # in storage for the next owner, and its events are no longer applied here.
    h.hosts.killed.clear()
    assert jm.release_partition(0) == 1
    assert mine not in jm.cache and not jm.queue.jobs.is_tracked(mine)
    assert mine in h.store.get_active_jobs()
    h.hosts.finish(run_of(h, mine, 1), S.FAILED)
    h.settle(60)
    assert h.store.get_task_runtime(mine, 1).state is S.RUNNING and h.hosts.killed == []
    assert jm.ownership.held == frozenset({1})


def member(h: Harness, name: str) -> JobManager:
    """A job manager of an all-active cluster over the harness's store and fakes, holding
    nothing yet; it writes every job through its partition's fence."""
    return JobManager(h.store, h.rm, cast(HostManagerPort, h.hosts), h.config, clock=h.clock,
                      fences=PartitionFences(h.store, name, count=COUNT), member=name)


def test_two_members_that_both_believe_they_own_a_partition_cannot_both_write(
        h: Harness) -> None:
    jid = job_in(0, COUNT)
    h.jm.jobs.create(job_spec(2), jid)
    h.settle(5)
    assert h.states(jid) == [S.RUNNING, S.RUNNING]
    runs = [run_of(h, jid, i) for i in range(2)]
    a, b = member(h, "a"), member(h, "b")
    assert a.acquire_partition(0, epoch=10) == 1
    assert b.acquire_partition(0, epoch=20) == 1  # b took it over; a has not been told
    assert a.ownership.owns(jid) and b.ownership.owns(jid)
    before = h.store.get_job_runtime(jid)

    with pytest.raises(FencedOut):  # a's stop is refused by the store itself
        a.jobs.stop(jid)
    assert h.store.get_job_runtime(jid) == before
    # a applies the status stream as it believes it should: the round is refused (its loop
    # would retry it until a is told it lost the partition), and nothing of it lands.
    h.hosts.finish(runs[0], S.FAILED)
    with pytest.raises(FencedOut):
        a.run_due()
    assert h.store.get_task_runtime(jid, 0).state is S.RUNNING and h.hosts.killed == []

    # b, the owner, applies the event (within the restart throttle, so no new run yet) and
    # the stop; the job ends with the running run killed once and nothing relaunched.
    h.jm = b
    h.settle(1)
    assert h.store.get_task_runtime(jid, 0).state is S.FAILED
    b.jobs.stop(jid)
    h.settle(60)
    assert h.states(jid) == [S.FAILED, S.KILLED]
    assert h.hosts.killed == [runs[1]]
    assert launches(h, jid, 0) == [runs[0]] and launches(h, jid, 1) == [runs[1]]
    with pytest.raises(FencedOut):  # and a stale claim cannot take it back
        a.acquire_partition(0, epoch=15)


def test_a_member_with_no_partition_writes_no_job(h: Harness) -> None:
    jid = job_in(3, COUNT)
    h.jm.jobs.create(job_spec(1), jid)
    h.settle(5)
    idle = member(h, "idle")
    idle.recovery.recover()
    assert len(idle.cache) == 0
    with pytest.raises(PartitionNotHeld):  # the write belongs to the owner: forward it
        idle.jobs.stop(jid)
    assert h.store.get_job_runtime(jid).goal_state is not JobState.KILLED


def step_all(*members: JobManager) -> None:
    """Run every member's due work, in turn, until a whole round finds nothing to do."""
    for _ in range(200):
        if not sum(m.run_due() + m.evictor.evict_once() for m in members):
            return
    raise AssertionError("the members still had work after 200 rounds")


def test_two_members_launch_and_preempt_only_their_own_jobs(h: Harness) -> None:
    # One resource manager serves both members: before placements were asked for by
    # partition, whichever member polled first took every placement and killed the other
    # member's as stale (it does not cache that job), so the job never ran.
    a, b = member(h, "a"), member(h, "b")
    for p in (0, 1):
        a.acquire_partition(p, epoch=10)
    for p in (2, 3):
        b.acquire_partition(p, epoch=10)
    ours, theirs = job_in(0, COUNT), job_in(2, COUNT)
    a.jobs.create(job_spec(2), ours)
    b.jobs.create(job_spec(2), theirs)
    with pytest.raises(PartitionNotHeld):  # a job is created by its partition's owner
        a.jobs.create(job_spec(1), job_in(3, COUNT))
    h.rm.auto_place = False
    b.engines.run_due()
    a.engines.run_due()  # both jobs' tasks are queued in the one resource manager
    h.rm.auto_place = True
    a.placement.launch_once(0.0)  # a polls first: it must take (place) only its own
    assert [RunId.parse(s.run_id).job_id for _, s in h.hosts.launches] == [ours, ours]
    step_all(a, b)
    assert h.states(ours) == h.states(theirs) == [S.RUNNING, S.RUNNING]
    assert h.rm.killed == [] and h.hosts.killed == []
    for job_id in (ours, theirs):
        assert [len(launches(h, job_id, i)) for i in range(2)] == [1, 1]  # each run once
    # Each member read every status event under its own name and acknowledged them all
    # (the other member's too: it applies only its own).
    head = len(h.hosts.events)
    assert {c: o for c, o in h.hosts.acked.items() if c.startswith("jobmgr@")} == {
        "jobmgr@a": head, "jobmgr@b": head}

    # A preemption victim goes to its job's owner: a leaves b's victim in the resource
    # manager, b takes it and moves its run.
    victim = Victim(TaskId(theirs, 1), 1, VictimReason.PREEMPTED, "host-0")
    h.rm.victims = [victim]
    assert a.evictor.evict_once() == 0 and h.rm.victims == [victim]
    assert b.evictor.evict_once() == 1 and h.rm.victims == []
    step_all(a, b)
    assert h.hosts.killed == [str(RunId(theirs, 1, 1))]
    assert launches(h, theirs, 1) == [str(RunId(theirs, 1, 1)), str(RunId(theirs, 1, 2))]
    assert h.store.get_task_runtime(theirs, 1).state is S.RUNNING


def test_a_partition_is_released_only_after_a_launch_round_that_asked_for_it(
        h: Harness) -> None:
    # The round's long poll asked for partition 0's placements; had the release not waited,
    # the new owner could queue a run that this poll then took and dropped.
    a = member(h, "a")
    a.acquire_partition(0, epoch=10)
    h.rm.auto_place = False  # nothing to place: the poll waits its whole timeout
    round_ = gevent.spawn(a.placement.launch_once, 0.3)
    gevent.sleep(0.05)
    assert not round_.dead
    a.release_partition(0)
    assert round_.dead  # the release returned only once the round had ended
    assert a.placement.quiesce(0.0)


def test_with_fenced_polls_a_release_waits_for_a_round_launching_not_for_its_poll(
        h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    # A member's resource manager ends a poll whose partitions moved (term_fence.py), so a
    # leaving member does not wait out its poll; a round past its poll, launching, is still
    # waited for: its launch must reach the host before the new owner reconciles the run.
    a = JobManager(h.store, h.rm, cast(HostManagerPort, h.hosts), h.config, clock=h.clock,
                   fences=PartitionFences(h.store, "a", count=COUNT), member="a",
                   fenced_polls=True)
    a.acquire_partition(0, epoch=10)
    h.rm.auto_place = False  # nothing to place: the poll waits its whole timeout
    polling = gevent.spawn(a.placement.launch_once, 30.0)
    gevent.sleep(0)  # a yield: the greenlet just spawned runs until it blocks
    a.release_partition(0)  # returns at once: nothing written or launched is in flight
    assert not polling.dead
    assert "still running" not in caplog.text  # not waited for in vain either
    polling.kill()

    a.acquire_partition(1, epoch=11)
    h.rm.auto_place = True
    jid = job_in(1, COUNT)
    a.jobs.create(job_spec(1), jid)
    launching, go_on = gevent.event.Event(), gevent.event.Event()
    launch_hosts = h.hosts.launch_hosts

    def slow_launch(launches: Any) -> Any:
        launching.set()
        go_on.wait(30)
        return launch_hosts(launches)

    h.hosts.launch_hosts = slow_launch  # type: ignore[method-assign]
    deadline = time.monotonic() + 30
    while not h.rm.queued:  # the job's run is queued in the resource manager
        assert time.monotonic() < deadline
        a.engines.run_due()
        gevent.sleep(0.01)
    gevent.spawn(a.placement.launch_once, 0.0)  # placed at once, then launched
    assert launching.wait(30)
    release = gevent.spawn(a.release_partition, 1)
    gevent.sleep(0)  # a yield: the greenlet just spawned runs until it blocks
    assert not release.dead  # waiting for the round that is launching
    go_on.set()
    release.get(timeout=30)
    assert launches(h, jid, 0) == [run_of(h, jid, 0)]


def test_releasing_many_partitions_waits_for_a_stuck_round_only_once(h: Harness) -> None:
    a = member(h, "a")
    for p in range(COUNT):
        a.acquire_partition(p, epoch=10)
    h.rm.auto_place = False
    round_ = gevent.spawn(a.placement.launch_once, 0.5)  # "stuck" for the whole test
    gevent.sleep(0)  # a yield: the greenlet just spawned runs until it blocks
    assert not a.placement.quiesce(0.1)  # waited for, in vain
    assert not a.placement.quiesce(5.0)  # the same round: not waited for again
    assert not round_.dead
    round_.join(2)
    assert a.placement.quiesce(0.0)


def test_partitions_released_together_wait_once_for_a_launch_round(h: Harness) -> None:
    """A leaving member's partitions go in one release: every job of them leaves the cache
    and the queue, the others stay, and the launch round in flight is waited for once."""
    jobs = {p: job_in(p, COUNT) for p in range(COUNT)}
    for job_id in jobs.values():
        h.jm.jobs.create(job_spec(1), job_id)
    h.settle(5)
    jm = take_over(h, set(range(COUNT)) - {3})
    waits: list[float] = []
    quiesce = jm.placement.quiesce

    def counted(timeout: float) -> bool:
        waits.append(timeout)
        return quiesce(timeout)

    jm.placement.quiesce = counted  # type: ignore[method-assign]
    assert jm.release_partitions([0, 1, 2]) == 3
    assert len(waits) == 1
    assert not any(jobs[p] in jm.cache or jm.queue.jobs.is_tracked(jobs[p]) for p in (0, 1, 2))
    assert jm.ownership.held == frozenset() and jm.ownership.holds_none()
    assert all(jobs[p] in h.store.get_active_jobs() for p in range(COUNT))


def test_partitions_taken_over_at_once_are_claimed_and_recovered_in_one_pass(
        h: Harness) -> None:
    # A member that died held partitions 0, 1 and 2; the taker gets them in one call.
    jobs = {p: job_in(p, COUNT) for p in (0, 1, 2)}
    for jid in jobs.values():
        h.jm.jobs.create(job_spec(1), jid)
    h.settle(5)
    runs = {p: run_of(h, jid, 0) for p, jid in jobs.items()}
    newer = member(h, "newer")
    newer.acquire_partition(2, epoch=50)  # partition 2 already has a newer owner in the store
    taker = member(h, "taker")
    passes: list[int] = []
    recover = taker.recovery.recover

    def counted(only: Callable[[str], bool] | None = None,
                listed: list[str] | None = None) -> int:
        passes.append(1)
        return recover(only, listed)

    taker.recovery.recover = counted  # type: ignore[method-assign]  # a spy on this one instance

    refused = taker.acquire_partitions({0: 20, 1: 20, 2: 20})

    assert refused == [2]  # not taken: nothing of it loaded, its fence not touched
    assert jobs[0] in taker.cache and jobs[1] in taker.cache and jobs[2] not in taker.cache
    assert passes == [1]  # one recovery pass for both partitions taken
    assert taker.ownership.held == frozenset({0, 1})
    assert h.store.leader_epoch(fence_name(2)) == 50
    h.jm = taker
    h.settle(5)
    for p in (0, 1):  # handed back, not launched again
        assert launches(h, jobs[p], 0) == [runs[p]]
