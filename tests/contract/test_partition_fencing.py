"""Contract: a fence per job partition (peloton/storage/partition_fences.py), on every backend.

Two members that both believe they own a partition cannot both write its jobs: the store
refuses the one whose claim is older, in the write's own transaction.
"""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import InvalidArgument, Unavailable
from peloton.core.partitions import fence_name, partition_of
from peloton.core.states import JobState, TaskState
from peloton.storage import RuntimeWrite, Store
from peloton.storage.leader_store import FencedOut
from peloton.storage.partition_fences import NotRoutable, PartitionFences, PartitionNotHeld
from tests.contract import factories as f

COUNT = 8


def _job_in(partition: int) -> str:
    while True:
        jid = f.job_id()
        if partition_of(jid, COUNT) == partition:
            return jid


def _other_partition(partition: int) -> int:
    return (partition + 1) % COUNT


def test_two_members_that_both_believe_they_own_a_partition_cannot_both_write(
        store: Store) -> None:
    jid = f.job_id()
    p = partition_of(jid, COUNT)
    a = PartitionFences(store, "a:5392", count=COUNT)
    b = PartitionFences(store, "b:5392", count=COUNT)
    a.claim(p, 100)
    runtime = a.for_job(jid).create_job(jid, f.job_spec(), f.job_runtime())
    b.claim(p, 200)  # b took the partition over; a has not noticed yet
    assert p in a.held and p in b.held  # both believe they own it
    with pytest.raises(FencedOut) as refused:
        a.for_job(jid).update_job_runtime(jid, dataclasses.replace(runtime, message="from a"))
    assert isinstance(refused.value, Unavailable)  # callers treat it as ownership lost
    stored = b.for_job(jid).update_job_runtime(
        jid, dataclasses.replace(runtime, state=JobState.RUNNING, message="from b"))
    assert store.get_job_runtime(jid) == stored
    assert store.get_job_runtime(jid).message == "from b"
    with pytest.raises(FencedOut):  # a's stale view of ZooKeeper cannot take it back
        a.claim(p, 100)
    assert store.leader_epoch(fence_name(p)) == 200


def test_a_term_knows_the_epoch_it_took_over_from(store: Store) -> None:
    # What a Watch following a job's owners checks (watch_claims.py): the claim before.
    p, q = 1, 2
    a, b = PartitionFences(store, "a", count=COUNT), PartitionFences(store, "b", count=COUNT)
    assert a.claim(p, 100).after is None  # the first claim ever
    assert b.claim(p, 200).after == 100
    a.claim(q, 150)
    assert b.claim_many({p: 300, q: 310}) == []
    terms = b.term(p), b.term(q)
    assert [t.after if t is not None else "none" for t in terms] == [200, 150]


def test_a_stale_claim_holds_nothing(store: Store) -> None:
    jid = f.job_id()
    p = partition_of(jid, COUNT)
    PartitionFences(store, "new", count=COUNT).claim(p, 300)
    stale = PartitionFences(store, "old", count=COUNT)
    with pytest.raises(FencedOut):
        stale.claim(p, 250)
    assert stale.held == frozenset()
    with pytest.raises(PartitionNotHeld):
        stale.for_job(jid)


def test_a_member_claims_a_leavers_partitions_at_once_and_holds_those_not_refused(
        store: Store) -> None:
    jobs = {p: _job_in(p) for p in (1, 2, 3)}
    leaver = PartitionFences(store, "leaver", count=COUNT)
    for p in jobs:
        leaver.claim(p, 100 + p)
    PartitionFences(store, "newer", count=COUNT).claim(2, 500)  # took 2 first
    heir = PartitionFences(store, "heir", count=COUNT)
    assert heir.claim_many({1: 201, 2: 202, 3: 203}) == [2]
    assert heir.held == frozenset({1, 3})
    for p in (1, 3):
        heir.for_job(jobs[p]).create_job(jobs[p], f.job_spec(), f.job_runtime())
        with pytest.raises(FencedOut):  # the leaver's terms are over in the store
            leaver.for_job(jobs[p]).create_job(_job_in(p), f.job_spec(), f.job_runtime())
    with pytest.raises(PartitionNotHeld):
        heir.for_job(jobs[2])
    with pytest.raises(ValueError):
        heir.claim_many({COUNT: 1})


def test_partitions_are_fenced_independently(store: Store) -> None:
    p = 3
    mine, theirs = _job_in(p), _job_in(_other_partition(p))
    a = PartitionFences(store, "a", count=COUNT)
    b = PartitionFences(store, "b", count=COUNT)
    a.claim(p, 10)
    a.claim(_other_partition(p), 10)
    b.claim(_other_partition(p), 20)  # b takes the other partition only
    a.for_job(mine).create_job(mine, f.job_spec(), f.job_runtime())  # p is still a's
    with pytest.raises(FencedOut):
        a.for_job(theirs).create_job(theirs, f.job_spec(), f.job_runtime())
    b.for_job(theirs).create_job(theirs, f.job_spec(), f.job_runtime())
    with pytest.raises(PartitionNotHeld):  # b never claimed p: it must forward, not write
        b.for_job(mine)
    assert store.leader_epoch("jobmgr") is None  # the leader role is not a partition


def test_an_ended_term_writes_nothing_even_after_the_member_takes_the_partition_back(
        store: Store) -> None:
    jid = f.job_id()
    p = partition_of(jid, COUNT)
    a = PartitionFences(store, "a", count=COUNT)
    first = a.claim(p, 10)
    a.release(p)  # handed over: the store still holds a's epoch, the process refuses
    with pytest.raises(FencedOut):
        first.store.create_job(jid, f.job_spec(), f.job_runtime())
    second = a.claim(p, 40)
    with pytest.raises(FencedOut):  # an object of the old term still holds the old view
        first.store.create_job(jid, f.job_spec(), f.job_runtime())
    second.store.create_job(jid, f.job_spec(), f.job_runtime())
    assert second.owns(jid) and not second.owns(_job_in(_other_partition(p)))
    assert store.get_job_runtime(jid).state == JobState.PENDING


def test_a_member_that_is_not_live_writes_nothing(store: Store) -> None:
    jid = f.job_id()
    live = [True]
    a = PartitionFences(store, "a", count=COUNT, live=lambda: live[0])
    view = a.claim(partition_of(jid, COUNT), 7).store  # what the term's objects hold
    live[0] = False  # its ZooKeeper connection was suspended
    assert a.held == frozenset()
    with pytest.raises(PartitionNotHeld):
        a.for_job(jid)
    with pytest.raises(FencedOut):
        view.create_job(jid, f.job_spec(), f.job_runtime())
    live[0] = True
    view.create_job(jid, f.job_spec(), f.job_runtime())  # connection back, claim still newest


def test_solo_claims_count_up_per_partition(store: Store) -> None:
    a = PartitionFences(store, "solo", count=COUNT)
    first = a.claim(0, None).epoch
    assert a.claim(0, None).epoch == first + 1
    assert a.claim(1, None).epoch == 1
    assert a.held == frozenset({0, 1})
    a.release_all()
    assert a.held == frozenset()


# -- the partition-routed store: every write of a job through its partition's fence ---------

def test_routed_writes_go_through_their_jobs_partition(store: Store) -> None:
    mine, theirs = _job_in(2), _job_in(5)
    a = PartitionFences(store, "a", count=COUNT)
    b = PartitionFences(store, "b", count=COUNT)
    a.claim(2, 10)
    a.claim(5, 10)
    routed = a.routed()
    routed.create_job(mine, f.job_spec(), f.job_runtime())
    routed.create_job(theirs, f.job_spec(), f.job_runtime())
    b.claim(5, 20)  # b takes partition 5 over; a still believes it holds it
    with pytest.raises(FencedOut):
        routed.add_active_job(theirs)
    routed.add_active_job(mine)  # partition 2 is still a's
    a.release(5)
    with pytest.raises(PartitionNotHeld):
        routed.add_active_job(theirs)
    b.routed().add_active_job(theirs)
    assert set(store.get_active_jobs()) == {mine, theirs}
    assert routed.get_job_runtime(theirs).state is JobState.PENDING  # reads pass


def test_routed_batches_stay_within_one_partition(store: Store) -> None:
    mine, other = _job_in(1), _job_in(3)
    a = PartitionFences(store, "a", count=COUNT)
    a.claim(1, 10)
    a.claim(3, 10)
    routed = a.routed()
    routed.create_task_runtimes(mine, {i: f.task_runtime() for i in range(2)})
    routed.create_task_runtimes(other, {0: f.task_runtime()})
    running = dataclasses.replace(f.task_runtime(TaskState.RUNNING), revision=1)
    result = routed.write_task_runtimes([RuntimeWrite(mine, i, running) for i in range(2)])
    assert result.ok and len(result.written) == 2
    with pytest.raises(InvalidArgument):  # one transaction checks one partition's fence
        routed.write_task_runtimes([RuntimeWrite(mine, 0, running), RuntimeWrite(other, 0, running)])
    assert store.get_task_runtime(other, 0).state is TaskState.PENDING
    assert routed.write_task_runtimes([]).ok  # nothing to write, nothing to fence
    PartitionFences(store, "b", count=COUNT).claim(1, 11)
    with pytest.raises(FencedOut):
        routed.write_task_runtimes([RuntimeWrite(mine, 0, dataclasses.replace(
            running, revision=2, message="stale"))])
    assert store.get_task_runtime(mine, 0).message != "stale"


def test_routed_workflow_writes_follow_their_jobs_partition(store: Store) -> None:
    jid = f.job_id()
    p = partition_of(jid, COUNT)
    a = PartitionFences(store, "a", count=COUNT)
    a.claim(p, 10)
    routed = a.routed()
    routed.create_job(jid, f.job_spec(), f.job_runtime())
    update = routed.create_update(f.update_info(jid))
    routed.add_workflow_event(f.workflow_event(update.update_id, None, 1.0))
    assert len(store.get_workflow_events(update.update_id)) == 1
    PartitionFences(store, "b", count=COUNT).claim(p, 30)
    with pytest.raises(FencedOut):
        routed.add_workflow_event(f.workflow_event(update.update_id, 0, 2.0))
    with pytest.raises(FencedOut):
        routed.update_update(dataclasses.replace(update, instances_total=9))
    assert len(store.get_workflow_events(update.update_id)) == 1


def test_cluster_wide_writes_are_refused_through_a_routed_store(store: Store) -> None:
    routed = PartitionFences(store, "a", count=COUNT).routed()
    with pytest.raises(NotRoutable):
        routed.create_resource_pool(f.pool("p-1"))
    with pytest.raises(NotRoutable):
        routed.put_host(f.host("h1"))
    assert store.get_resource_pools() == [] and store.get_hosts() == []


def test_cron_volume_and_chore_writes_are_fenced_by_their_owners_partition(
        store: Store) -> None:
    # A cron job by its name's partition, a volume delete by its job's, a chore by
    # partition 0's: the holder whose claim a newer one superseded is refused.
    name = next(n for n in (f"cron-{i}" for i in range(1000)) if partition_of(n, COUNT) == 2)
    jid = _job_in(2)
    store.create_volume(f.volume("v-1", jid))
    a, b = PartitionFences(store, "a", count=COUNT), PartitionFences(store, "b", count=COUNT)
    a.claim(2, 10)
    a.claim(0, 10)
    routed = a.routed()
    created = routed.create_cron_job(f.cron_job(name))
    with pytest.raises(PartitionNotHeld):
        b.routed().update_cron_job(created)
    b.claim(2, 20)
    b.claim(0, 20)
    with pytest.raises(FencedOut):
        routed.update_cron_job(created)
    with pytest.raises(FencedOut):
        routed.delete_volume("v-1")
    with pytest.raises(FencedOut):
        routed.expire_pod_events()
    assert store.get_cron_job(name).revision == created.revision
    assert [v.volume_id for v in store.get_volumes()] == ["v-1"]
    b.routed().update_cron_job(created)
    b.routed().delete_volume("v-1")
    b.routed().expire_pod_events()
    assert store.get_cron_job(name).revision == created.revision + 1 and store.get_volumes() == []
