"""The status stream read by partition (all-active job manager members): a poll naming
partitions gets only their jobs' events, passes over the others (its position moves past
them, so acknowledging it lets the log trim), and a poll naming none gets everything.
Each test runs directly and over gRPC (the `wire` fixture)."""

from __future__ import annotations

from collections.abc import Callable

import gevent
import pytest

from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.ports_grpc.hostmgr_servicer import MAX_POLL_PARTITIONS, poll_partitions
from peloton.core.errors import InvalidArgument
from peloton.core.partitions import PartitionSet
from peloton.core.states import TaskState
from peloton.hostmgr import events as events_module
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.config import HostManagerConfig
from tests.harness.fake_host_backend import FakeBackend
from tests.harness.partition_ids import job_in

S = TaskState
COUNT = 4
CONFIG = HostManagerConfig(consumers=("jobmgr", "resmgr"), recovery_grace=0.0)


def held(*partitions: int) -> PartitionSet:
    return PartitionSet(COUNT, frozenset(partitions))


A, B = job_in(0, COUNT), job_in(1, COUNT)


def run(job_id: str, instance: int) -> str:
    return f"{job_id}-{instance}-1"


def test_each_member_reads_only_its_partitions_and_acknowledges_past_the_others(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm(CONFIG)
    a, b, resmgr = hm.subscribe("jobmgr@a"), hm.subscribe("jobmgr@b"), hm.subscribe("resmgr")
    updates = [backend.report(run(job, i), S.RUNNING, "h1")
               for i, job in enumerate([A, B, B, A, B])]
    mine = a.poll(10, 0, held(0, 2))
    assert [(e.offset, e.run_id) for e in mine] == [(1, run(A, 0)), (4, run(A, 3))]
    assert (a.position, a.head) == (5, 5)  # past b's last event too
    theirs = b.poll(10, 0, held(1, 3))
    assert [e.offset for e in theirs] == [2, 3, 5]
    everything = resmgr.poll(10, 0)  # no partitions named: every event
    assert [e.offset for e in everything] == [1, 2, 3, 4, 5]
    resmgr.acknowledge(5)
    b.acknowledge(b.position)
    hm.settle()
    assert backend.acked == []  # a has not acknowledged yet
    a.acknowledge(a.position)  # the events it passed over, unread, with its own
    hm.settle()
    assert backend.acked == updates  # trimmed: every consumer is past every event


def test_a_poll_that_passes_everything_over_still_moves_on_and_lets_the_log_trim(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm(HostManagerConfig(consumers=("jobmgr",), recovery_grace=0.0))
    idle = hm.subscribe("jobmgr@idle")  # holds no partition (between claims)
    updates = [backend.report(run(B, i), S.RUNNING, "h1") for i in range(3)]
    assert idle.poll(10, 0, held()) == []
    assert (idle.position, idle.head) == (3, 3)
    idle.acknowledge(idle.position)
    hm.settle()
    assert backend.acked == updates
    assert idle.poll(10, 0, held()) == [] and idle.position == 3  # nothing new


def test_every_partition_named_or_none_is_every_event(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm(CONFIG)
    for i, job in enumerate([A, B, A]):
        backend.report(run(job, i), S.RUNNING, "h1")
    whole, unfiltered = hm.subscribe("jobmgr@a"), hm.subscribe("resmgr")
    assert whole.poll(10, 0, held(0, 1, 2, 3)) == unfiltered.poll(10, 0)
    assert whole.position == unfiltered.position == 3


def test_a_long_poll_waits_past_other_partitions_events_for_its_own(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    hm = make_hm(CONFIG)
    a = hm.subscribe("jobmgr@a")
    assert a.poll(10, 0, held(0)) == []

    def produce() -> None:
        backend.report(run(B, 0), S.RUNNING, "h1")  # b's: passed over, a keeps waiting
        gevent.sleep(0.01)
        backend.report(run(B, 1), S.RUNNING, "h1")
        gevent.sleep(0.01)
        backend.report(run(A, 2), S.RUNNING, "h1")

    producer = gevent.spawn_later(0.01, produce)
    events = a.poll(10, 10.0, held(0))
    producer.join(5)
    assert [e.run_id for e in events] == [run(A, 2)]
    assert a.position == 3
    # With only other partitions' events before the timeout: empty, but moved past them.
    backend.report(run(B, 3), S.RUNNING, "h1")
    assert a.poll(10, 0.05, held(0)) == [] and a.position == 4


def test_a_limit_counts_returned_events_and_a_scan_stops_at_scan_limit(
        make_hm: Callable[..., HostManager], backend: FakeBackend,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_module, "SCAN_LIMIT", 4)
    hm = make_hm(CONFIG)
    a = hm.subscribe("jobmgr@a")
    for i, job in enumerate([A, B, A, A, B, B, B, B, B, A]):
        backend.report(run(job, i), S.RUNNING, "h1")
    first = a.poll(2, 0, held(0))
    assert [e.offset for e in first] == [1, 3] and (a.position, a.head) == (3, 10)
    second = a.poll(10, 0, held(0))  # looks at 4 events (4..7) and stops, behind
    assert [e.offset for e in second] == [4] and (a.position, a.head) == (7, 10)
    third = a.poll(10, 0, held(0))
    assert [e.offset for e in third] == [10] and (a.position, a.head) == (10, 10)


def test_rewind_reads_the_last_poll_again_with_other_partitions(
        make_hm: Callable[..., HostManager], backend: FakeBackend) -> None:
    # What a member does when it took a partition over while its poll waited.
    hm = make_hm(CONFIG)
    a = hm.subscribe("jobmgr@a")
    for i, job in enumerate([A, B, A]):
        backend.report(run(job, i), S.RUNNING, "h1")
    assert [e.offset for e in a.poll(10, 0, held(0))] == [1, 3]
    a.rewind()
    assert [e.offset for e in a.poll(10, 0)] == [1, 2, 3]


def test_a_poll_naming_too_many_partitions_is_refused() -> None:
    def request(count: int, partitions: list[int]) -> pb.PollEventsRequest:
        req = pb.PollEventsRequest(consumer="jobmgr@a")
        req.partitions.count = count
        req.partitions.held.extend(partitions)
        return req

    assert poll_partitions(pb.PollEventsRequest(consumer="resmgr")) is None  # unset: all
    assert poll_partitions(request(COUNT, [0, 2])) == held(0, 2)
    for bad in (request(MAX_POLL_PARTITIONS + 1, [0]), request(2, [0, 1, 1]),
                request(COUNT, [COUNT])):
        with pytest.raises(InvalidArgument):
            poll_partitions(bad)
