"""Cron and the cluster-wide chores among all-active members, deterministically.

Two members of an all-active cluster (`member`) share the harness's store and fakes; a
cron job belongs to the partition of its name, its runs' job ids are drawn in that
partition, and only the partition's holder advances it, under the partition's fence.
The scene moves the partition between the members mid-way, in each way a handover
happens (a graceful release, a member that still believes it holds the partition, a
member gone between claiming a run and creating it), ticking both members' cron loops
every minute as their loops would: every due time must start exactly one run, created
by one member, with each of its tasks launched once.

Then the other writes of no job id: the cluster-wide chores (pod-event expiry) are run
by the holder of partition 0 alone (a holder whose claim a newer one superseded is
refused), and a volume is driven by its job's owner alone.
"""

from __future__ import annotations

from typing import cast

import pytest

from peloton.core.cron.model import CollisionPolicy, CronJob, run_job_id, schedule_partition
from peloton.core.errors import Unavailable
from peloton.core.model.ids import RunId, new_id
from peloton.core.model.job import JobSpec
from peloton.core.model.storage_records import VolumeInfo, VolumeState
from peloton.core.partitions import CHORE_PARTITION, partition_of
from peloton.core.ports import HostManagerPort
from peloton.core.states import JobType
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.cron import FunctionActions
from peloton.jobmgr.ownership import Ownership
from peloton.storage.history_store import DEFAULT_POD_EVENT_TTL
from peloton.storage.partition_fences import PartitionFences, PartitionNotHeld
from tests.unit.jobmgr.harness import Harness, job_spec

COUNT = 4
MINUTE_MS = 60_000
#: Two minutes of grace: a due time missed while the partition moved is still run.
GRACE_MS = 2 * MINUTE_MS


#: (member, run job id) of every cron run a member created, in order.
Created = list[tuple[str, str]]


def member(h: Harness, name: str, created: Created | None = None) -> JobManager:
    """A member over the harness's store and fakes, holding nothing yet, whose cron
    creates are appended to `created` once they succeed."""
    jm = JobManager(h.store, h.rm, cast(HostManagerPort, h.hosts), h.config, clock=h.clock,
                    fences=PartitionFences(h.store, name, count=COUNT), member=name)
    jm.cron.grace_ms = GRACE_MS
    real = jm.cron.actions
    out: Created = [] if created is None else created

    def create(spec: JobSpec, job_id: str) -> object:
        result = real.create(spec, job_id)
        out.append((name, job_id))
        return result

    jm.cron.actions = FunctionActions(create=create, stop=real.stop, runtime=real.runtime)
    return jm


def name_in(partition: int) -> str:
    return next(n for n in (f"www/prod/nightly-{i}" for i in range(1000))
                if schedule_partition(n, COUNT) == partition)


def settle(*members: JobManager) -> None:
    """Run the members' due work until a whole round finds none."""
    for _ in range(200):
        if not sum(m.run_due() for m in members):
            return
    raise AssertionError("the members still had work after 200 rounds")


def test_each_due_time_runs_once_while_the_partition_moves(h: Harness) -> None:
    created: Created = []
    a, b = member(h, "a", created), member(h, "b", created)
    for p in range(COUNT):
        a.acquire_partition(p, epoch=10)
    name = name_in(1)
    start_ms = int(h.clock.wall() * 1000)
    a.store.create_cron_job(CronJob(
        name, "* * * * *", CollisionPolicy.RUN_OVERLAP, job_spec(2, JobType.BATCH),
        created_ms=start_ms, last_due_ms=start_ms))
    due = [start_ms + k * MINUTE_MS for k in range(1, 6)]
    runs = [run_job_id(name, str(d), COUNT) for d in due]
    assert {partition_of(r, COUNT) for r in runs} == {1}  # the schedule's own partition

    def minute(*ticking: JobManager) -> None:
        h.advance(60)
        for m in ticking:
            m.cron.tick()

    # 1. a holds everything: b, holding nothing, never looks at the schedule.
    minute(b, a)
    minute(a, b)
    settle(a)
    assert created == [("a", runs[0]), ("a", runs[1])]

    # 2. A graceful move, within the minute of a due time a recorded: b does not fire it
    # again (it has watched since before it), and fires the next one.
    a.release_partition(1)
    b.acquire_partition(1, epoch=20)
    a.cron.tick()
    b.cron.tick()
    assert len(created) == 2
    minute(a, b)
    settle(b)
    assert created[2:] == [("b", runs[2])]

    # 3. a takes the partition back while b still believes it holds it (not told yet):
    # b's claim of the next due time is refused by the store, a's goes through.
    a.acquire_partition(1, epoch=30)
    assert b.ownership.owns_schedule(name) and a.ownership.owns_schedule(name)
    minute(b, a)
    settle(a)
    assert created[3:] == [("a", runs[3])]
    b.release_partition(1)  # b is told at last

    # 4. a claims a due time but is gone before its run is created (the create fails
    # here); b, the next holder, finishes the claim: the same run, created once.
    def unavailable(spec: JobSpec, job_id: str) -> object:
        raise Unavailable("the member's process died")

    working = a.cron.actions
    a.cron.actions = FunctionActions(create=unavailable, stop=working.stop,
                                     runtime=working.runtime)
    minute(a)
    assert h.store.get_cron_job(name).pending is not None
    a.release_partition(1)
    b.acquire_partition(1, epoch=40)
    a.cron.actions = working
    b.cron.tick()
    a.cron.tick()
    settle(b)
    assert created[4:] == [("b", runs[4])]

    # Every due time ran exactly once, by one member, each task launched once; nothing
    # else was created, and the schedule records the last due time.
    assert [r for _, r in created] == runs
    assert sorted(h.store.get_active_jobs()) == sorted(runs)
    launched = [RunId.parse(spec.run_id) for _, spec in h.hosts.launches]
    assert sorted((r.job_id, r.instance) for r in launched) == sorted(
        (r, i) for r in runs for i in range(2))
    stored = h.store.get_cron_job(name)
    assert stored.last_due_ms == due[-1] and stored.pending is None
    assert stored.last_run_job_id == runs[-1]


def test_only_the_schedules_owner_starts_a_run_by_hand(h: Harness) -> None:
    created: Created = []
    a, b = member(h, "a", created), member(h, "b", created)
    a.acquire_partition(2, epoch=10)
    b.acquire_partition(3, epoch=10)
    name = name_in(2)
    now = int(h.clock.wall() * 1000)
    a.store.create_cron_job(CronJob(name, "0 0 1 1 *", CollisionPolicy.RUN_OVERLAP,
                                    job_spec(1, JobType.BATCH), created_ms=now,
                                    last_due_ms=now))
    with pytest.raises(PartitionNotHeld):  # the call belongs to the owner (retryable)
        b.cron.start_now(name)
    with pytest.raises(PartitionNotHeld):  # and b cannot schedule into a's partition
        b.store.update_cron_job(h.store.get_cron_job(name))
    run = a.cron.start_now(name)
    assert partition_of(run, COUNT) == 2 and created == [("a", run)]


def test_the_holder_of_partition_zero_runs_the_chores() -> None:
    lone = Ownership(COUNT)
    assert lone.runs_chores  # a lone job manager holds partition 0
    others = Ownership(COUNT, set(range(COUNT)) - {CHORE_PARTITION})
    assert not others.runs_chores
    holder = Ownership(COUNT, {CHORE_PARTITION})
    before = (holder.runs_chores, others.runs_chores)
    holder.release(CHORE_PARTITION)
    others.acquire(CHORE_PARTITION)
    after = (holder.runs_chores, others.runs_chores)
    assert before == (True, False) and after == (False, True)  # it moved with the partition


def test_pod_events_are_expired_by_the_holder_of_partition_zero_only(h: Harness) -> None:
    jid = h.create(job_spec(1, JobType.BATCH))
    h.settle(5)
    assert h.store.get_pod_events(jid, 0)
    a, b = member(h, "a"), member(h, "b")
    for p in range(COUNT):
        (a if p == CHORE_PARTITION else b).acquire_partition(p, epoch=10)
    h.advance(DEFAULT_POD_EVENT_TTL + 1)
    assert b.chores.run_once() == 0  # not its chore: the store is not even asked
    assert h.store.get_pod_events(jid, 0)
    # a is superseded as holder of partition 0 without being told: refused by the store.
    PartitionFences(h.store, "c", count=COUNT).claim(CHORE_PARTITION, 20)
    assert a.chores.run_once() == 0
    assert h.store.get_pod_events(jid, 0)
    a.release_partition(CHORE_PARTITION)
    b.acquire_partition(CHORE_PARTITION, epoch=30)
    assert b.chores.run_once() > 0 and h.store.get_pod_events(jid, 0) == []


def test_a_volume_is_driven_by_its_jobs_owner_only(h: Harness) -> None:
    # Volumes of gone jobs in two partitions: each member removes and deletes only its
    # own job's (before, every member walked every volume and its writes were refused).
    a, b = member(h, "a"), member(h, "b")
    for p in range(COUNT):
        (a if p in (0, 1) else b).acquire_partition(p, epoch=10)
    ours, theirs = (next(j for j in iter(new_id, None) if partition_of(j, COUNT) == p)
                    for p in (1, 2))
    for vid, jid in (("v-ours", ours), ("v-theirs", theirs)):
        h.store.create_volume(VolumeInfo(vid, jid, 0, "host-0", VolumeState.CREATED,
                                         VolumeState.CREATED, "/data", 20))
    assert a.volumes.reconcile_once() == 2  # goal DELETED, then removed from its host
    assert h.hosts.destroyed == [("host-0", "v-ours")]
    assert [v.volume_id for v in h.store.get_volumes()] == ["v-theirs"]
    assert b.volumes.reconcile_once() == 2
    assert h.hosts.destroyed == [("host-0", "v-ours"), ("host-0", "v-theirs")]
    assert h.store.get_volumes() == []
