"""A Watch through any member sees every member's changes (servicers/watch_fanin.py): the
receiving member merges the same Watch opened on every live member, over gRPC, following
members that join and leave.  Each member here is a gRPC server whose WatchService
publishes what the test puts in its queue."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import gevent.queue
import grpc
import pytest

from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.watch import watch_pb2
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as pb
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2_grpc as pb_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.api.service_registry import register
from peloton.core.errors import Conflict
from peloton.core.states import TaskState
from peloton.jobmgr.job_deps import Listeners
from peloton.jobmgr.servicers.forwarding import MemberForwarder
from peloton.jobmgr.servicers.watch import WatchPublisher, WatchServicer
from peloton.jobmgr.servicers.watch_fanin import LOCAL_KEY, WatchFanIn
from tests.contract import factories as f

DEADLINE = 10.0


class Publisher(pb_grpc.WatchServiceServicer):  # type: ignore[misc]
    """One member's own watch stream: a pod name put in `events` is published; "overflow"
    ends the stream as watch.py's overflow does, "cancel" as its Cancel does, "fail" with
    UNAVAILABLE."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: gevent.queue.Queue[str] = gevent.queue.Queue()
        self.opened: list[dict[str, str]] = []
        self.active = 0

    def Watch(self, request: Any, context: Any) -> Iterator[pb.WatchResponse]:
        self.opened.append(dict(context.invocation_metadata()))
        self.active += 1
        watch_id = f"task_{self.name}"
        try:
            yield pb.WatchResponse(watch_id=watch_id)
            while context.is_active():
                try:
                    event = self.events.get(timeout=0.05)
                except gevent.queue.Empty:
                    continue
                if event == "overflow":
                    raise Conflict(f"event overflow: {watch_id}")
                if event == "cancel":
                    context.abort(grpc.StatusCode.CANCELLED, f"watch cancelled: {watch_id}")
                if event == "fail":
                    context.abort(grpc.StatusCode.UNAVAILABLE, "connection dropped")
                yield pb.WatchResponse(watch_id=watch_id, pods=[pod_pb2.PodSummary(
                    pod_name=v1.PodName(value=event))])
        finally:
            self.active -= 1


class Member:
    """A member: its publisher behind a gRPC server whose forwarder fans a Watch in over
    `members` (a dict the test changes, as the member directory would)."""

    def __init__(self, name: str, members: dict[str, str]) -> None:
        self.name = name
        self.publisher = Publisher(name)
        self.server = GrpcServer("127.0.0.1:0")
        self.fan_in = WatchFanIn(lambda: dict(members), name, "", recheck=0.1)
        self.forwarder = MemberForwarder(lambda _job: True, _NoOwners(), lambda _u: None,
                                         watch_fan_in=self.fan_in)
        register(self.server, pb_grpc.add_WatchServiceServicer_to_server, self.publisher,
                 forward=self.forwarder)
        self.server.start()
        self.address = self.fan_in.my_address = f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.fan_in.close()
        self.server.stop(0)


class _NoOwners:
    def address_of(self, job_id: str, fresh: bool = False) -> str | None:
        return None

    def forget(self, job_id: str) -> None:
        pass


@pytest.fixture
def cluster() -> Iterator[tuple[dict[str, str], Callable[[str], Member]]]:
    members: dict[str, str] = {}
    started: list[Member] = []

    def start(name: str) -> Member:
        member = Member(name, members)
        members[name] = member.address
        started.append(member)
        for m in started:
            m.fan_in.wake()
        return member

    yield members, start
    for member in started:
        member.stop()


def until(probe: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        gevent.sleep(0.02)


def watch(member: Member) -> tuple[grpc.Channel, Any]:
    channel = grpc.insecure_channel(member.address)
    stream = pb_grpc.WatchServiceStub(channel).Watch(
        pb.WatchRequest(pod_filter=watch_pb2.PodFilter()), timeout=DEADLINE * 2)
    return channel, stream


def read_until(stream: Any, wanted: set[str], watch_id: str) -> None:
    seen: set[str] = set()
    for response in stream:
        assert response.watch_id == watch_id
        seen.update(p.pod_name.value for p in response.pods)
        if wanted <= seen:
            return


def test_a_watch_through_one_member_sees_every_members_changes(cluster: Any) -> None:
    _, start = cluster
    a, b = start("a"), start("b")
    channel, stream = watch(a)
    try:
        first = next(stream)
        assert first.watch_id == "task_a" and not first.pods  # the receiving member's id
        until(lambda: b.publisher.active == 1, "the fan-in to open b's stream")
        a.publisher.events.put("a-job-0")
        b.publisher.events.put("b-job-0")
        read_until(stream, {"a-job-0", "b-job-0"}, "task_a")
        # One level: each member was asked for its own changes once, and fanned out no more.
        assert [LOCAL_KEY in m for m in a.publisher.opened + b.publisher.opened] == [True, True]
    finally:
        channel.close()
    until(lambda: a.publisher.active == b.publisher.active == 0, "the members' streams to end")


def test_members_that_join_and_leave_are_followed(cluster: Any) -> None:
    members, start = cluster
    a, b = start("a"), start("b")
    channel, stream = watch(a)
    try:
        next(stream)
        until(lambda: b.publisher.active == 1, "b's stream")
        c = start("c")  # joins: the directory's listener wakes the merge
        until(lambda: c.publisher.active == 1, "the joiner's stream")
        c.publisher.events.put("c-job-0")
        read_until(stream, {"c-job-0"}, "task_a")
        del members["b"]  # leaves, then stops: its stream ends, and is not reopened
        b.stop()
        a.publisher.events.put("a-job-1")
        c.publisher.events.put("c-job-1")
        read_until(stream, {"a-job-1", "c-job-1"}, "task_a")
        assert len(b.publisher.opened) == 1
    finally:
        channel.close()


def test_a_live_members_stream_that_fails_is_reopened(cluster: Any) -> None:
    _, start = cluster
    a, b = start("a"), start("b")
    channel, stream = watch(a)
    try:
        next(stream)
        until(lambda: b.publisher.active == 1, "b's stream")
        b.publisher.events.put("fail")
        until(lambda: len(b.publisher.opened) == 2 and b.publisher.active == 1,
              "b's stream to be reopened")
        b.publisher.events.put("b-job-1")
        read_until(stream, {"b-job-1"}, "task_a")
    finally:
        channel.close()


def test_another_members_overflow_ends_the_watch_as_a_local_one_would(cluster: Any) -> None:
    _, start = cluster
    a, b = start("a"), start("b")
    channel, stream = watch(a)
    try:
        next(stream)
        until(lambda: b.publisher.active == 1, "b's stream")
        b.publisher.events.put("overflow")
        with pytest.raises(grpc.RpcError) as err:
            list(stream)
        assert err.value.code() is grpc.StatusCode.ABORTED
        assert err.value.details() == "event overflow: task_a"
    finally:
        channel.close()
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")


def test_cancel_on_the_receiving_member_ends_every_members_stream(cluster: Any) -> None:
    _, start = cluster
    a, b = start("a"), start("b")
    channel, stream = watch(a)
    try:
        next(stream)
        until(lambda: b.publisher.active == 1, "b's stream")
        a.publisher.events.put("cancel")  # what Cancel(task_a) does to a's own stream
        with pytest.raises(grpc.RpcError) as err:
            list(stream)
        assert err.value.code() is grpc.StatusCode.CANCELLED
        assert err.value.details() == "watch cancelled: task_a"
        until(lambda: b.publisher.active == 0, "b's stream to be cancelled")
    finally:
        channel.close()


# -- through the job manager's own watch servicer ---------------------------------------------
class RealMember:
    """A member serving watch.py's WatchServicer over its own publisher, fanned in."""

    def __init__(self, name: str, members: dict[str, str]) -> None:
        self.listeners = Listeners()
        self.publisher = WatchPublisher(self.listeners)
        self.server = GrpcServer("127.0.0.1:0")
        self.fan_in = WatchFanIn(lambda: dict(members), name, "", recheck=0.1)
        register(self.server, pb_grpc.add_WatchServiceServicer_to_server,
                 WatchServicer(self.publisher),
                 forward=MemberForwarder(lambda _job: True, _NoOwners(), lambda _u: None,
                                         watch_fan_in=self.fan_in))
        self.server.start()
        self.address = self.fan_in.my_address = f"127.0.0.1:{self.server.port}"
        members[name] = self.address

    def publish(self, job_id: str, instance: int) -> None:
        """A task of one of this member's jobs changed (what its cache tells its listeners)."""
        job: Any = SimpleNamespace(job_id=job_id)
        for listener in list(self.listeners.task):
            listener(job, instance, f.task_runtime(TaskState.RUNNING))

    def stop(self) -> None:
        self.fan_in.close()
        self.server.stop(0)


def test_through_the_watch_servicer_a_pod_watch_sees_both_members_until_cancelled() -> None:
    members: dict[str, str] = {}
    a, b = RealMember("a", members), RealMember("b", members)
    channel = grpc.insecure_channel(a.address)
    try:
        stub = pb_grpc.WatchServiceStub(channel)
        stream = stub.Watch(pb.WatchRequest(pod_filter=watch_pb2.PodFilter()),
                            timeout=DEADLINE * 2)
        watch_id = next(stream).watch_id
        assert watch_id.startswith("task_")
        until(lambda: len(b.publisher.watchers) == 1, "b's watcher")
        a.publish("job-a", 0)
        b.publish("job-b", 1)
        read_until(stream, {"job-a-0", "job-b-1"}, watch_id)
        stub.Cancel(pb.CancelRequest(watch_id=watch_id), timeout=DEADLINE)
        with pytest.raises(grpc.RpcError) as err:
            list(stream)
        assert err.value.code() is grpc.StatusCode.CANCELLED
        assert err.value.details() == f"watch cancelled: {watch_id}"
        until(lambda: not a.publisher.watchers and not b.publisher.watchers,
              "every member's watcher to be dropped")
    finally:
        channel.close()
        a.stop()
        b.stop()
