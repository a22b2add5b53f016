"""Contract: a fence per job partition (peloton/storage/partition_fences.py), on every backend.

Two members that both believe they own a partition cannot both write its jobs: the store
refuses the one whose claim is older, in the write's own transaction.
"""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import Unavailable
from peloton.core.partitions import fence_name, partition_of
from peloton.core.states import JobState
from peloton.storage import Store
from peloton.storage.leader_store import FencedOut
from peloton.storage.partition_fences import PartitionFences, PartitionNotHeld
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
