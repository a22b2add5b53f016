"""Properties of job partitions and their rendezvous assignment (peloton/core/partitions.py)."""

from __future__ import annotations

import random
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.partitions import (
    DEFAULT_PARTITIONS,
    Assignment,
    Move,
    PartitionSet,
    assign,
    fence_name,
    handover,
    moves,
    partition_of,
)

member_ids = st.text(alphabet="abcdefghij0123456789:.-", min_size=1, max_size=12)
memberships = st.sets(member_ids, min_size=1, max_size=12)
counts = st.integers(min_value=1, max_value=128)


@given(memberships, counts)
def test_every_partition_has_exactly_one_live_owner(members: set[str], count: int) -> None:
    a = assign(members, count)
    assert a.count == count
    assert all(owner in members for owner in a.owners)
    owned = [a.owned_by(m) for m in members]
    assert sum(len(s) for s in owned) == count  # no partition owned twice, none unowned
    assert frozenset().union(*owned) == frozenset(range(count))


@given(memberships, counts, st.randoms(use_true_random=False))
def test_the_assignment_does_not_depend_on_the_order_members_are_seen(
        members: set[str], count: int, rnd: random.Random) -> None:
    order = sorted(members)
    rnd.shuffle(order)
    assert assign(order, count) == assign(sorted(members), count)
    assert assign(order + order, count) == assign(members, count)  # duplicates are one member


@given(memberships, member_ids, counts)
def test_a_joiner_takes_partitions_only_for_itself(members: set[str], joiner: str,
                                                   count: int) -> None:
    before, after = assign(members, count), assign(members | {joiner}, count)
    for move in moves(before, after):
        assert move.target == joiner  # nothing moves between members that stayed
    if joiner not in members:
        assert {m.partition for m in moves(before, after)} == after.owned_by(joiner)


@given(memberships, counts)
def test_a_leaver_gives_up_only_its_own_partitions(members: set[str], count: int) -> None:
    leaver = sorted(members)[0]
    rest = members - {leaver}
    before, after = assign(members, count), assign(rest, count)
    moved = moves(before, after)
    assert {m.partition for m in moved} == before.owned_by(leaver)
    assert all(m.source == leaver for m in moved)
    assert all(m.target in rest if rest else m.target is None for m in moved)


@given(memberships, counts)
def test_a_member_that_leaves_and_comes_back_gets_the_same_partitions(members: set[str],
                                                                      count: int) -> None:
    leaver = sorted(members)[-1]
    a = assign(members, count)
    assert assign((members - {leaver}) | {leaver}, count) == a


@given(memberships, counts, memberships)
def test_handover_releases_what_is_no_longer_assigned_and_acquires_the_rest(
        members: set[str], count: int, others: set[str]) -> None:
    member = sorted(members)[0]
    held = assign(others | {member}, count).owned_by(member)  # what it held under another view
    now = assign(members, count)
    plan = handover(member, held, now)
    assert (held - plan.release) | plan.acquire == now.owned_by(member)
    assert not plan.release & plan.acquire
    assert plan.release <= held


@given(st.uuids().map(str), counts)
def test_a_job_is_always_in_the_same_partition(job_id: str, count: int) -> None:
    p = partition_of(job_id, count)
    assert 0 <= p < count
    assert partition_of(job_id.upper(), count) == p  # UUID text in either case


def test_partitions_are_stable_across_processes() -> None:
    # Python's hash() is salted per process: a partition must not be.
    ids = [str(uuid.UUID(int=i * 7919)) for i in range(20)]
    code = ("import sys; from peloton.core.partitions import partition_of, assign; "
            "ids = sys.argv[1:]; print([partition_of(i) for i in ids], "
            "assign(['a:1', 'b:2', 'c:3']).owners)")
    runs = {subprocess.run([sys.executable, "-c", code, *ids], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": seed},
                           cwd=Path(__file__).resolve().parents[3]).stdout
            for seed in ("1", "2")}
    assert len(runs) == 1
    assert runs.pop().startswith(str([partition_of(i) for i in ids]))


def test_jobs_spread_over_every_partition() -> None:
    ids = [str(uuid.UUID(int=i * 104729 + 17)) for i in range(DEFAULT_PARTITIONS * 50)]
    sizes = [0] * DEFAULT_PARTITIONS
    for job_id in ids:
        sizes[partition_of(job_id)] += 1
    assert min(sizes) > 20 and max(sizes) < 90  # 50 expected each


def test_partitions_spread_over_members() -> None:
    a = assign([f"jobmgr-{i}:5392" for i in range(4)])
    assert all(8 <= len(a.owned_by(f"jobmgr-{i}:5392")) <= 26 for i in range(4))  # 16 expected


def test_no_members_own_nothing_and_a_lone_member_owns_everything() -> None:
    assert assign([], 4) == Assignment((None,) * 4)
    assert assign(["solo"], 4).owned_by("solo") == frozenset(range(4))
    assert moves(assign([], 4), assign(["solo"], 4)) == tuple(Move(p, None, "solo")
                                                              for p in range(4))
    assert assign(["solo"], 4).owner_of_job("any-job") == "solo"


def test_bad_counts_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        partition_of("job", 0)
    with pytest.raises(InvalidArgument):
        assign(["a"], 0)
    with pytest.raises(InvalidArgument):
        moves(assign(["a"], 2), assign(["a"], 3))


def test_fence_names_are_per_partition() -> None:
    assert fence_name(7) == "jobmgr/partition/7"
    assert len({fence_name(p) for p in range(DEFAULT_PARTITIONS)}) == DEFAULT_PARTITIONS


@given(st.sets(st.integers(min_value=0, max_value=15)), st.lists(st.uuids(), max_size=20))
def test_a_partition_set_covers_exactly_the_jobs_of_its_partitions(
        held: set[int], jobs: list[uuid.UUID]) -> None:
    some = PartitionSet(16, frozenset(held))
    for job in map(str, jobs):
        assert some.covers(job) is (partition_of(job, 16) in held)
        assert some.covers(job.upper()) is some.covers(job)


def test_a_partition_set_names_partitions_of_its_count_only() -> None:
    with pytest.raises(InvalidArgument):
        PartitionSet(4, frozenset({4}))
    with pytest.raises(InvalidArgument):
        PartitionSet(0, frozenset())
