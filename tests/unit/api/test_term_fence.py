"""A job manager term's calls to the resource and host managers are fenced by its epoch.

A leader paused and resumed kept calling its peers for the 45 ms before it stepped down
(it killed runs of the new leader's job and took its placement).  The peers now refuse a
call stamped with an epoch older than one they have heard from (term_fence.py).  Members
of an all-active job manager cluster stamp every partition they hold, each fenced on its
own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import gevent
import pytest

from peloton.api.convert.lease_offers import LeaseDecoder
from peloton.api.grpc_server import GrpcServer
from peloton.api.ports_grpc.channel import StaticTarget
from peloton.api.ports_grpc.hostmgr_client import GrpcHostManager
from peloton.api.ports_grpc.hostmgr_servicer import serve_host_manager
from peloton.api.ports_grpc.resmgr_client import GrpcResourceManager
from peloton.api.ports_grpc.resmgr_servicer import serve_resource_manager
from peloton.api.ports_grpc.term_fence import (
    EPOCH_KEY,
    PARTITIONS_KEY,
    EpochWatermark,
    StaleTerm,
    TermFenceInterceptor,
    parse,
    parse_partitions,
    stamp_partitions,
    stamped,
    stamped_by_partition,
    still_current,
    term_epoch,
)
from peloton.core.errors import FailedPrecondition
from peloton.core.model.ids import TaskId
from peloton.core.model.sched import PlacedTask, Placement
from peloton.core.partitions import PartitionSet, fence_name
from peloton.hostmgr.events import EventLog
from peloton.jobmgr.app import JobManager
from peloton.storage import Store, StoreOptions, open_store
from peloton.storage.partition_fences import PartitionFences
from tests.fakes.hostmgr import FakeHostManager
from tests.fakes.resmgr import FakeResourceManager
from tests.harness.partition_ids import job_in


# -- the check --------------------------------------------------------------------------------
def test_an_older_epoch_is_refused_once_a_newer_one_has_called() -> None:
    marks = EpochWatermark()
    marks.admit("jobmgr", 5)
    marks.admit("jobmgr", 5)  # the same term again
    marks.admit("jobmgr", 9)  # a new leader
    with pytest.raises(StaleTerm, match="epoch 5 is over"):
        marks.admit("jobmgr", 5)
    marks.admit("placement", 1)  # roles are fenced apart
    assert marks.newest("jobmgr") == 9


def test_the_stored_epoch_fences_a_term_the_peer_never_heard_from() -> None:
    reads: list[str] = []

    def stored(role: str) -> int | None:
        reads.append(role)
        return 7

    marks = EpochWatermark(stored)
    with pytest.raises(StaleTerm):
        marks.admit("jobmgr", 6)  # a peer that restarted still knows 7 is newer
    marks.admit("jobmgr", 7)
    marks.admit("jobmgr", 8)
    assert reads == ["jobmgr"]  # read once, when the role was first heard of


def test_a_store_that_cannot_be_read_fences_on_what_calls_say() -> None:
    def down(role: str) -> int | None:
        raise OSError("store down")

    marks = EpochWatermark(down)
    marks.admit("jobmgr", 3)
    with pytest.raises(StaleTerm):
        marks.admit("jobmgr", 2)


@pytest.mark.parametrize("value", ["jobmgr", "jobmgr:", "jobmgr:x", ":4", "jobmgr:-1"])
def test_an_unreadable_stamp_is_refused(value: str) -> None:
    with pytest.raises(StaleTerm):
        parse(value)


def test_a_stopped_term_keeps_stamping_its_last_epoch() -> None:
    current: list[int | None] = [None]
    epoch = term_epoch(lambda: current[0])
    assert epoch() is None  # never led: no stamp
    current[0] = 12
    assert epoch() == 12
    current[0] = None  # the term stopped; a call left over is still term 12's
    assert epoch() == 12


class _RawRecorder:
    """A channel that keeps the metadata of each raw call and answers no bytes."""

    def __init__(self) -> None:
        self.sent: list[tuple[tuple[str, str], ...]] = []

    def call_raw(self, method: str, request: object, *, wait: float = 0.0,
                 metadata: tuple[tuple[str, str], ...] = ()) -> bytes:
        self.sent.append(tuple(metadata))
        return b""


def test_raw_calls_are_stamped_as_decoded_calls_are() -> None:
    """A client reading a reply's bytes itself (the placement engine's leases) through a
    stamped view still says which term, or which partitions, call."""
    by_term, by_partition = _RawRecorder(), _RawRecorder()
    client = GrpcHostManager.__new__(GrpcHostManager)
    client._leases = LeaseDecoder()
    client.channel = by_term  # type: ignore[assignment]
    assert stamped(client, "jobmgr", lambda: 7).acquire_hosts(3).offers == ()
    client.channel = by_partition  # type: ignore[assignment]
    stamped_by_partition(client, lambda: {5: 2}).acquire_hosts(3)
    assert by_term.sent == [((EPOCH_KEY, "jobmgr:7"),)]
    assert by_partition.sent == [(stamp_partitions({5: 2}),)]


# -- over the wire ------------------------------------------------------------------------------
@pytest.fixture
def peers() -> Iterator[tuple[FakeResourceManager, FakeHostManager, GrpcResourceManager,
                              GrpcHostManager]]:
    hosts = FakeHostManager()
    hosts.add_host("host-0", cpu=4)
    rm = FakeResourceManager(hosts)
    servers = []
    clients: list[GrpcResourceManager | GrpcHostManager] = []
    for real in (rm, hosts):
        server = GrpcServer("127.0.0.1:0",
                            interceptors=[TermFenceInterceptor(EpochWatermark())])
        target = StaticTarget([f"127.0.0.1:{server.port}"])
        if real is hosts:
            # No test here reads the event stream: an empty log stands in for it.
            serve_host_manager(server, hosts, EventLog(100, ("resmgr",), lambda trimmed: None))
            clients.append(GrpcHostManager(target, caller="test", timeout=5.0))
        else:
            serve_resource_manager(server, rm)
            clients.append(GrpcResourceManager(target, caller="test", timeout=5.0))
        server.start()
        servers.append(server)
    grm, ghm = clients
    assert isinstance(grm, GrpcResourceManager) and isinstance(ghm, GrpcHostManager)
    yield rm, hosts, grm, ghm
    for client in clients:
        client.close()
    for server in servers:
        server.stop(0)


def test_a_paused_leader_can_neither_kill_nor_take_placements_after_a_new_one_called(
        peers: tuple[FakeResourceManager, FakeHostManager, GrpcResourceManager,
                     GrpcHostManager]) -> None:
    rm, hosts, grm, ghm = peers
    old_rm, old_hm = stamped(grm, "jobmgr", lambda: 5), stamped(ghm, "jobmgr", lambda: 5)
    new_rm, new_hm = stamped(grm, "jobmgr", lambda: 9), stamped(ghm, "jobmgr", lambda: 9)
    old_rm.kill_tasks([TaskId("job-a", 0)])  # the old term, while it still leads: fine
    new_hm.reconcile([])  # the new leader's recovery reaches both peers
    new_rm.kill_tasks([])
    with pytest.raises(FailedPrecondition, match="epoch 5 is over"):
        old_hm.kill(["job-b-1-1"])
    with pytest.raises(FailedPrecondition):
        old_rm.get_placements(10, 0.0)
    with pytest.raises(FailedPrecondition):
        old_rm.kill_tasks([TaskId("job-b", 1)])
    assert rm.killed == [TaskId("job-a", 0)] and hosts.killed == []
    grm.kill_tasks([TaskId("job-c", 0)])  # an unstamped caller (placement, tools): not fenced
    assert rm.killed[-1] == TaskId("job-c", 0)
    assert EPOCH_KEY == "peloton-leader-epoch"


# -- all-active job managers: one watermark per partition ----------------------------------------
def test_partition_stamps_round_trip_and_unreadable_ones_are_refused() -> None:
    key, value = stamp_partitions({3: 40, 0: 7})
    assert key == PARTITIONS_KEY and value == "0:7,3:40"
    assert parse_partitions(value) == {fence_name(0): 7, fence_name(3): 40}
    for bad in ("", "0", "0:", "x:1", "0:1,", "1:-2"):
        with pytest.raises(StaleTerm):
            parse_partitions(bad)


def test_a_call_is_refused_if_any_partition_it_names_is_stale() -> None:
    marks = EpochWatermark()
    marks.admit_all({fence_name(0): 10, fence_name(1): 11})  # member a
    marks.admit_all({fence_name(2): 12})  # member b: other partitions never fence a
    marks.admit_all({fence_name(0): 10, fence_name(1): 11})
    marks.admit_all({fence_name(0): 20})  # b took partition 0 over; a has not been told
    with pytest.raises(StaleTerm, match="epoch 10 is over"):
        marks.admit_all({fence_name(0): 10, fence_name(1): 11, fence_name(3): 30})
    assert marks.newest(fence_name(3)) is None  # a refused call records nothing
    marks.admit_all({fence_name(1): 11})  # a let partition 0 go: its calls pass again


@pytest.fixture
def store() -> Iterator[Store]:
    s = open_store("sqlite://", StoreOptions(bootstrap=True))
    yield s
    s.close()


def partition_peers(store: Store) -> tuple[FakeResourceManager, GrpcServer, GrpcResourceManager]:
    """A fake resource manager behind the term fence, its watermark reading `store` (as a
    daemon's is), and an unstamped client of it."""
    rm = FakeResourceManager(FakeHostManager())
    server = GrpcServer("127.0.0.1:0", interceptors=[
        TermFenceInterceptor(EpochWatermark(store.leader_epoch))])
    serve_resource_manager(server, rm)
    server.start()
    return rm, server, GrpcResourceManager(StaticTarget([f"127.0.0.1:{server.port}"]),
                                           caller="test", timeout=5.0)


def test_a_paused_owner_of_a_moved_partition_is_refused_by_the_peers(store: Store) -> None:
    a = PartitionFences(store, "a", count=4)
    b = PartitionFences(store, "b", count=4)
    a.claim(0, 10)
    a.claim(1, 11)
    b.claim(2, 12)
    rm, server, client = partition_peers(store)
    try:
        via_a = stamped_by_partition(client, a.epochs)
        via_b = stamped_by_partition(client, b.epochs)
        via_a.kill_tasks([TaskId("job-a", 0)])
        via_b.kill_tasks([TaskId("job-b", 0)])  # members of other partitions coexist
        via_a.kill_tasks([TaskId("job-a", 1)])

        b.claim(0, 20)  # partition 0 moves to b while a is paused
        via_b.kill_tasks([TaskId("job-b", 1)])
        with pytest.raises(FailedPrecondition, match="epoch 10 is over"):
            via_a.kill_tasks([TaskId("job-c", 0)])
        with pytest.raises(FailedPrecondition):
            via_a.get_placements(10, 0.0, PartitionSet(4, frozenset({0, 1})))
        assert TaskId("job-c", 0) not in rm.killed

        a.release(0)  # a finds out and lets partition 0 go: its other calls pass again
        via_a.kill_tasks([TaskId("job-a", 2)])
        assert rm.killed[-1] == TaskId("job-a", 2)
    finally:
        client.close()
        server.stop(0)

    # A peer that starts over has heard from no one: it still refuses a's stale epoch,
    # from the epoch b claimed in the store.
    rm, server, client = partition_peers(store)
    try:
        with pytest.raises(FailedPrecondition, match="epoch 10 is over"):
            stamped_by_partition(client, lambda: {0: 10}).kill_tasks([TaskId("job-c", 1)])
        assert rm.killed == []
    finally:
        client.close()
        server.stop(0)


def test_a_poll_of_a_partition_that_moved_ends_and_leaves_the_new_owners_placement(
        store: Store) -> None:
    # a's long poll for partition 0 was admitted with epoch 10; while it waits, b takes the
    # partition over (its first call moves the epoch), queues a run and gets it placed.
    # The poll must not take b's placement: a would drop it as no longer its own.
    a = PartitionFences(store, "a", count=4)
    b = PartitionFences(store, "b", count=4)
    a.claim(0, 10)
    rm = FakeResourceManager(FakeHostManager(), auto_place=False)
    watermark = EpochWatermark(store.leader_epoch)
    server = GrpcServer("127.0.0.1:0", interceptors=[TermFenceInterceptor(watermark)])
    serve_resource_manager(server, rm, watermark)
    server.start()
    client = GrpcResourceManager(StaticTarget([f"127.0.0.1:{server.port}"]), caller="test",
                                 timeout=60.0)
    try:
        via_a = stamped_by_partition(client, a.epochs)
        via_b = stamped_by_partition(client, b.epochs)
        asked = PartitionSet(4, frozenset({0}))
        started = time.monotonic()
        poll = gevent.spawn(via_a.get_placements, 10, 30.0, asked)
        deadline = time.monotonic() + 30
        while watermark.newest(fence_name(0)) != 10:  # the poll was admitted
            assert time.monotonic() < deadline
            gevent.sleep(0.01)
        b.claim(0, 20)
        via_b.kill_tasks([TaskId(job_in(0, 4), 0)])  # the new owner's first call
        theirs = Placement("host-1", "agent-1", (PlacedTask(TaskId(job_in(0, 4), 0), 1),))
        rm.ready.append(theirs)
        assert poll.get(timeout=30) == []
        assert time.monotonic() - started < 29  # ended by the move, not by its timeout
        assert via_b.get_placements(10, 0.0, asked) == [theirs]
    finally:
        client.close()
        server.stop(0)


def test_an_unstamped_call_is_never_cut_short() -> None:
    assert still_current(EpochWatermark(), [("other", "x")]) is None
    marks = EpochWatermark()
    current = still_current(marks, [stamp_partitions({0: 10, 1: 11})])
    assert current is not None and current()
    marks.admit_all({fence_name(0): 10, fence_name(1): 11})
    assert current()
    marks.admit(fence_name(1), 12)
    assert not current()


def test_a_member_acquiring_a_partition_tells_the_peers_its_epoch_at_once(
        peers: tuple[FakeResourceManager, FakeHostManager, GrpcResourceManager,
                     GrpcHostManager], store: Store) -> None:
    # Partition 0 has no job, so the new owner's recovery calls no peer about it: were it
    # not announced, the peers would still admit the old owner's calls naming it.
    rm, hosts, grm, ghm = peers

    def member(name: str) -> JobManager:
        fences = PartitionFences(store, name, count=4)
        return JobManager(store, stamped_by_partition(grm, fences.epochs),
                          stamped_by_partition(ghm, fences.epochs), fences=fences,
                          member=name)

    a, b = member("a"), member("b")
    a.acquire_partition(0, epoch=10)
    a.resmgr.kill_tasks([TaskId("job-a", 0)])
    b.acquire_partition(0, epoch=20)  # a, paused, has not been told
    with pytest.raises(FailedPrecondition, match="epoch 10 is over"):
        a.resmgr.kill_tasks([TaskId("job-a", 1)])
    with pytest.raises(FailedPrecondition, match="epoch 10 is over"):
        a.hostmgr.kill(["job-a-1-1"])
    assert rm.killed == [TaskId("job-a", 0)] and hosts.killed == []
