"""The member directory (peloton/common/member_directory.py): partition owners and member
addresses kept in memory by ZooKeeper watches, over a fake ZooKeeper (fake_zk.py) whose
watch deliveries a test can hold back."""

from __future__ import annotations

from typing import Any

import pytest

from peloton.common.leader import LeaderId
from peloton.common.member_directory import MemberDirectory
from peloton.core.errors import Unavailable
from peloton.core.partitions import partition_of
from tests.unit.common.fake_zk import FakeZk

COUNT = 8
MEMBERS = "/peloton/jobmanager/members"
PARTITIONS = "/peloton/jobmanager/partitions"
ME = "jm-me:5392"


def job_in(partition: int) -> str:
    """A job id of `partition`."""
    return next(j for i in range(10_000) if partition_of(j := f"job-{i}", COUNT) == partition)


def join(zk: FakeZk, member_id: str, port: int) -> None:
    zk.create(f"{MEMBERS}/{member_id}", LeaderId(member_id, "127.0.0.1", 1, port).to_json())


def claim(zk: FakeZk, partition: int, member_id: str) -> None:
    zk.create(f"{PARTITIONS}/{partition}", member_id.encode())


@pytest.fixture
def zk() -> FakeZk:
    zk = FakeZk()
    zk.ensure_path(MEMBERS)
    zk.ensure_path(PARTITIONS)
    join(zk, ME, 5000)
    join(zk, "jm-a:5392", 5001)
    join(zk, "jm-b:5392", 5002)
    for p in range(COUNT):
        claim(zk, p, [ME, "jm-a:5392", "jm-b:5392"][p % 3])
    return zk


@pytest.fixture
def directory(zk: FakeZk) -> Any:
    d = MemberDirectory(zk, MEMBERS, PARTITIONS, COUNT, ME)
    d.start()
    yield d
    d.stop()


def test_lookups_are_answered_from_memory_once_watched(zk: FakeZk, directory: Any) -> None:
    gets = zk.gets
    for _ in range(3):
        assert directory.address_of(job_in(1)) == "127.0.0.1:5001"
        assert directory.address_of(job_in(2)) == "127.0.0.1:5002"
    assert zk.gets == gets and directory.reads == 0
    assert directory.members() == {ME: "127.0.0.1:5000", "jm-a:5392": "127.0.0.1:5001",
                                   "jm-b:5392": "127.0.0.1:5002"}


def test_a_partition_held_here_or_by_no_one_has_no_one_to_forward_to(
        zk: FakeZk, directory: Any) -> None:
    assert directory.address_of(job_in(0)) is None  # held by this member
    zk.delete(f"{PARTITIONS}/1")  # between owners
    assert directory.owner(1) is None and directory.address_of(job_in(1)) is None
    claim(zk, 1, "jm-b:5392")  # its next owner claims it
    assert directory.address_of(job_in(1)) == "127.0.0.1:5002"


def test_watch_events_follow_members_leaving_joining_and_moving(
        zk: FakeZk, directory: Any) -> None:
    zk.delete(f"{MEMBERS}/jm-a:5392")  # left; its partition node not yet deleted
    assert directory.member("jm-a:5392") is None and directory.address_of(job_in(1)) is None
    assert "jm-a:5392" not in directory.members()
    join(zk, "jm-a:5392", 6001)  # the same member id back, at another address
    assert directory.address_of(job_in(1)) == "127.0.0.1:6001"
    join(zk, "jm-c:5392", 5003)  # a joiner takes a partition
    zk.delete(f"{PARTITIONS}/4")
    claim(zk, 4, "jm-c:5392")
    assert directory.address_of(job_in(4)) == "127.0.0.1:5003"
    gets = zk.gets
    assert directory.address_of(job_in(4)) == "127.0.0.1:5003"
    assert zk.gets == gets  # all of it from the watches


def test_a_stale_entry_is_corrected_by_a_fresh_lookup(zk: FakeZk, directory: Any) -> None:
    job = job_in(1)
    assert directory.address_of(job) == "127.0.0.1:5001"
    zk.hold()  # watch deliveries run behind: the cache goes stale
    zk.delete(f"{PARTITIONS}/1")
    claim(zk, 1, "jm-b:5392")
    assert directory.address_of(job) == "127.0.0.1:5001"  # stale, as a cache may be
    assert directory.address_of(job, fresh=True) == "127.0.0.1:5002"  # what the forwarder asks
    assert directory.address_of(job) == "127.0.0.1:5002"  # kept: no event came meanwhile
    zk.deliver()  # the late events agree
    assert directory.address_of(job) == "127.0.0.1:5002"


def test_forget_makes_the_next_lookup_read_zookeeper(zk: FakeZk, directory: Any) -> None:
    job = job_in(2)
    directory.address_of(job)
    directory.forget(job)
    reads = directory.reads
    assert directory.address_of(job) == "127.0.0.1:5002"
    assert directory.reads == reads + 2  # the partition node and the member node
    assert directory.address_of(job) == "127.0.0.1:5002"
    assert directory.reads == reads + 2  # and cached again


def test_a_slow_direct_read_never_overwrites_a_newer_watch_event(
        zk: FakeZk, directory: Any) -> None:
    # The direct read returns jm-a; while it is in flight the partition moves to jm-b and
    # the watch delivers that: the cache must keep jm-b.
    def move() -> None:
        zk.delete(f"{PARTITIONS}/1")
        claim(zk, 1, "jm-b:5392")

    zk.during_next_get = move
    assert directory.owner(1, fresh=True) == "jm-a:5392"  # what ZooKeeper said when read
    assert directory.owner(1) == "jm-b:5392"


def test_nothing_is_cached_without_a_watch(zk: FakeZk) -> None:
    d = MemberDirectory(zk, MEMBERS, PARTITIONS, COUNT, ME)
    assert d.address_of(job_in(1)) == "127.0.0.1:5001"  # not started: ZooKeeper is read
    zk.delete(f"{PARTITIONS}/1")
    claim(zk, 1, "jm-b:5392")
    assert d.address_of(job_in(1)) == "127.0.0.1:5002"  # and nothing stale was kept
    assert d.hits == 0 and d.reads == 4


def test_stop_ends_every_watch(zk: FakeZk) -> None:
    d = MemberDirectory(zk, MEMBERS, PARTITIONS, COUNT, ME)
    d.start()
    assert zk.watches() == 1 + 3 + COUNT  # members/, each member, each partition
    d.stop()
    for p in range(COUNT):  # each watch ends at its next event
        zk.delete(f"{PARTITIONS}/{p}")
    for m in (ME, "jm-a:5392", "jm-b:5392"):
        zk.delete(f"{MEMBERS}/{m}")
    assert zk.watches() == 0
    join(zk, "jm-a:5392", 5001)
    claim(zk, 1, "jm-a:5392")
    assert d.address_of(job_in(1)) == "127.0.0.1:5001" and d.hits == 0


def test_an_unreadable_member_node_is_not_live_and_breaks_nothing(
        zk: FakeZk, directory: Any) -> None:
    zk.create(f"{MEMBERS}/jm-a:5392", b"not json")
    assert directory.address_of(job_in(1)) is None
    join(zk, "jm-a:5392", 5001)
    assert directory.address_of(job_in(1)) == "127.0.0.1:5001"


def test_zookeeper_unreachable_is_unavailable_only_when_it_must_be_read(
        zk: FakeZk, directory: Any) -> None:
    zk.unreachable = True
    assert directory.address_of(job_in(1)) == "127.0.0.1:5001"  # from memory
    with pytest.raises(Unavailable, match="ZooKeeper"):
        directory.address_of(job_in(1), fresh=True)


def test_listeners_hear_of_a_partition_changing_hands(zk: FakeZk, directory: Any) -> None:
    # (A Watch of one job follows its owner on these: servicers/watch_fanin.py.)
    heard: list[str | None] = []
    directory.add_listener(lambda: heard.append(directory.owner(1)))
    zk.delete(f"{PARTITIONS}/1")  # its owner released it
    claim(zk, 1, "jm-b:5392")  # its next owner claimed it
    assert heard == [None, "jm-b:5392"]


def test_a_claim_names_its_epoch_and_a_same_holders_new_claim_is_a_change(
        zk: FakeZk, directory: Any) -> None:
    # A one-job Watch tells "the partition stayed with b" from "it left b and came back"
    # by the claim's epoch (the node's czxid), so a re-claim must be heard and differ.
    first = directory.claim(1)
    assert first is not None and first.holder == "jm-a:5392"
    assert first.epoch == zk.get(f"{PARTITIONS}/1")[1].czxid
    heard: list[Any] = []
    directory.add_listener(lambda: heard.append(directory.claim(1)))
    zk.delete(f"{PARTITIONS}/1")
    claim(zk, 1, "jm-a:5392")  # the same member claims it again: a new node, a new epoch
    again = directory.claim(1)
    assert heard == [None, again]
    assert again.holder == first.holder and again.epoch > first.epoch
    assert directory.claim(1, fresh=True) == again  # read from ZooKeeper: the same claim
    assert directory.owner(1) == "jm-a:5392"
