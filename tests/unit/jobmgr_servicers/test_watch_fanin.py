"""A Watch through any member sees every member's changes (servicers/watch_fanin.py): the
receiving member merges the same Watch opened on every live member, over gRPC, following
members that join (read from their start) and leave (read to their clean end); any other
end of a member's stream ends the watch; a Watch of one job goes to the job's owner alone
and follows it from owner to owner; every member serves it as the original caller.  Each
member here is a gRPC server whose WatchService publishes what the test puts in its queue
(or watch.py's own servicer), started through the `cluster` fixture (which stops
everything a test started)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, TypeVar

import gevent.queue
import grpc
import pytest

from peloton.api.auth_grpc import current_principal
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.watch import watch_pb2
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as pb
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2_grpc as pb_grpc
from peloton.common.auth import Principal, Security
from peloton.core.errors import Conflict
from peloton.core.states import TaskState
from peloton.jobmgr.job_deps import Listeners
from peloton.jobmgr.servicers.watch import FROM_KEY, LEFT_KEY, WatchPublisher, WatchServicer
from peloton.jobmgr.servicers.watch_fanin import LOCAL_KEY, WatchFanIn, watched_job
from tests.contract import factories as f
from tests.unit.jobmgr_servicers.served import Served, basic, security

DEADLINE = 10.0
JOB = "job-1"
EVERY_POD = pb.WatchRequest(pod_filter=watch_pb2.PodFilter())
ONE_JOB = pb.WatchRequest(pod_filter=watch_pb2.PodFilter(job_id=v1.JobID(value=JOB)))
M = TypeVar("M", bound="Member")


class Publisher(pb_grpc.WatchServiceServicer):  # type: ignore[misc]
    """One member's own watch stream: a pod name put in `events` is published; "overflow"
    ends the stream as watch.py's overflow does, "cancel" as its Cancel does, "leave" as
    its leave does (OK with the leaver's trailer), "fail" with UNAVAILABLE, "end" with OK
    and no trailer.  Records each stream's metadata and whom it was served as."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.events: gevent.queue.Queue[str] = gevent.queue.Queue()
        self.opened: list[dict[str, str]] = []
        self.callers: list[Principal | None] = []
        self.active = 0

    def Watch(self, request: Any, context: Any) -> Iterator[pb.WatchResponse]:
        self.opened.append(dict(context.invocation_metadata()))
        self.callers.append(current_principal())
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
                if event == "leave":
                    context.set_trailing_metadata(((LEFT_KEY, "1"),))
                    return
                if event == "end":
                    return
                yield pb.WatchResponse(watch_id=watch_id, pods=[pod_pb2.PodSummary(
                    pod_name=v1.PodName(value=event))])
        finally:
            self.active -= 1


class Member:
    """A member: `servicer` behind a gRPC server whose forwarder fans a Watch in over the
    cluster's `members` and sends a Watch of one job to its owner in `owners` (dicts the
    test changes, as the member directory would)."""

    def __init__(self, cluster: Cluster, name: str, servicer: Any,
                 security: Security | None) -> None:
        self.name = name
        identity = security.internal if security is not None else ()
        self.fan_in = cluster.served.closing(WatchFanIn(
            lambda: dict(cluster.members), name, "", owner=cluster.owners.get,
            identity=identity, recheck=0.1, leave_grace=cluster.leave_grace,
            open_timeout=cluster.open_timeout))
        forwarder = cluster.served.forwarder(lambda _job: True, _NoOwners(), lambda _u: None,
                                             watch_fan_in=self.fan_in, identity=identity)
        self.server = cluster.served.server(pb_grpc.add_WatchServiceServicer_to_server,
                                            servicer, forward=forwarder, security=security)
        self.address = self.fan_in.my_address = f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.server.stop(0)


class FakeMember(Member):
    """A member whose watch stream is a `Publisher`."""

    def __init__(self, cluster: Cluster, name: str, security: Security | None) -> None:
        self.publisher = Publisher(name)
        super().__init__(cluster, name, self.publisher, security)


class FakeClock:
    """Monotonic seconds a test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RealMember(Member):
    """A member serving watch.py's WatchServicer over its own publisher, which keeps its
    first changes (a member's) on `clock`."""

    def __init__(self, cluster: Cluster, name: str, security: Security | None) -> None:
        self.listeners = Listeners()
        self.clock = FakeClock()
        self.publisher = WatchPublisher(self.listeners, journal=True, journal_seconds=60.0,
                                        clock=self.clock)
        super().__init__(cluster, name, WatchServicer(self.publisher), security)

    def publish(self, job_id: str, instance: int) -> None:
        """A task of one of this member's jobs changed (what its cache tells its listeners)."""
        job: Any = SimpleNamespace(job_id=job_id)
        for listener in list(self.listeners.task):
            listener(job, instance, f.task_runtime(TaskState.RUNNING))


class _NoOwners:
    def address_of(self, job_id: str, fresh: bool = False) -> str | None:
        return None

    def forget(self, job_id: str) -> None:
        pass


class Cluster:
    """The members a test started: `members` (live member -> address) and `owners` (job ->
    the member holding its partition) are what the member directory would say."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.members: dict[str, str] = {}
        self.owners: dict[str, str] = {}
        self.started: list[Member] = []
        #: The fan-ins' `leave_grace` and `open_timeout` for members started from now on.
        self.leave_grace = DEADLINE * 3
        self.open_timeout = DEADLINE

    def start(self, name: str, *, security: Security | None = None) -> FakeMember:
        return self.join(FakeMember(self, name, security))

    def start_real(self, name: str, *, join: bool = True) -> RealMember:
        """A member over watch.py; with `join` False it is not listed yet (`join` it)."""
        member = RealMember(self, name, None)
        return self.join(member) if join else member

    def join(self, member: M) -> M:
        """List `member` in the directory (and tell the merges)."""
        self.members[member.name] = member.address
        if member not in self.started:
            self.started.append(member)
        self.wake()
        return member

    def leave(self, member: Member) -> None:
        """Its member node goes (a leave, or its session expired)."""
        del self.members[member.name]
        self.wake()

    def wake(self) -> None:
        """What the directory's listener does on a change of members or of an owner."""
        for m in self.started:
            m.fan_in.wake()

    def watch(self, member: Member, request: pb.WatchRequest = EVERY_POD,
              metadata: Any = ()) -> Any:
        """A client's Watch through `member` (its channel closed when the test ends)."""
        stub = pb_grpc.WatchServiceStub(self.served.channel(member.address))
        return stub.Watch(request, timeout=DEADLINE * 2, metadata=metadata)

    def watching_b_through_a(self) -> tuple[FakeMember, FakeMember, Any]:
        """Members a and b, a client's Watch of every pod through a, read past its first
        answer, and a's stream from b open."""
        a, b = self.start("a"), self.start("b")
        stream = self.watch(a)
        next(stream)
        until(lambda: b.publisher.active == 1, "b's stream")
        return a, b, stream

    def cancel(self, member: Member, watch_id: str) -> None:
        stub = pb_grpc.WatchServiceStub(self.served.channel(member.address))
        stub.Cancel(pb.CancelRequest(watch_id=watch_id), timeout=DEADLINE)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    served = Served()
    yield Cluster(served)
    served.close()


def until(probe: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        gevent.sleep(0.02)


def broken(stream: Any, member: str, why: str) -> None:
    """`stream` ends as a fan-in ends a watch whose member's stream ended while the member
    was still listed: ABORTED, as an overflow, naming the member and `why`."""
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    details = err.value.details()
    assert details.startswith("event overflow: task_a: ")
    assert f"member {member} {why}" in details and details.endswith("list and watch again")


def read_until(stream: Any, wanted: set[str], watch_id: str) -> None:
    seen: set[str] = set()
    for response in stream:
        assert response.watch_id == watch_id
        seen.update(p.pod_name.value for p in response.pods)
        if wanted <= seen:
            return


def test_a_watch_through_one_member_sees_every_members_changes(cluster: Cluster) -> None:
    a, b = cluster.start("a"), cluster.start("b")
    stream = cluster.watch(a)
    first = next(stream)
    assert first.watch_id == "task_a" and not first.pods  # the receiving member's id
    # Sent only once b's stream is open: what b publishes from now on reaches the caller
    # (a client lists after its watch's first answer).
    assert b.publisher.active == 1
    a.publisher.events.put("a-job-0")
    b.publisher.events.put("b-job-0")
    read_until(stream, {"a-job-0", "b-job-0"}, "task_a")
    # One level: each member was asked for its own changes once, and fanned out no more.
    assert [LOCAL_KEY in m for m in a.publisher.opened + b.publisher.opened] == [True, True]
    stream.cancel()
    until(lambda: a.publisher.active == b.publisher.active == 0, "the members' streams to end")


def test_a_watch_whose_member_does_not_answer_at_its_start_is_refused(
        cluster: Cluster) -> None:
    # b is listed but its address accepts connections and never answers: the caller's
    # first response would promise b's changes, so the watch is refused instead.
    cluster.open_timeout = 0.3
    a = cluster.start("a")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    cluster.served.closing(silent)
    cluster.members["b"] = f"127.0.0.1:{silent.getsockname()[1]}"
    with pytest.raises(grpc.RpcError) as err:
        next(cluster.watch(a))
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    assert err.value.details() == ("the watch streams of job manager members b did not open "
                                   "within 0.3 s; watch again")
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")


def test_members_that_join_and_leave_are_followed(cluster: Cluster) -> None:
    a, b, stream = cluster.watching_b_through_a()
    c = cluster.start("c")  # joins: the directory's listener wakes the merge
    until(lambda: c.publisher.active == 1, "the joiner's stream")
    c.publisher.events.put("c-job-0")
    read_until(stream, {"c-job-0"}, "task_a")
    # A member there at the watch's start is read from then; a joiner from its own start.
    assert FROM_KEY not in b.publisher.opened[0]
    assert c.publisher.opened[0][FROM_KEY] == "start"
    # A graceful leave: its member node goes, it publishes up to its release, then ends
    # its streams cleanly: read to its end, the watch goes on, no reopening.
    cluster.leave(b)
    b.publisher.events.put("b-job-1")
    b.publisher.events.put("leave")
    read_until(stream, {"b-job-1"}, "task_a")
    until(lambda: b.publisher.active == 0, "the leaver's stream to end")
    b.stop()  # its server stops after its clean end: nothing more to read
    cluster.leave(c)
    c.publisher.events.put("leave")
    until(lambda: c.publisher.active == 0, "the second leaver's stream to end")
    a.publisher.events.put("a-job-1")
    read_until(stream, {"a-job-1"}, "task_a")
    assert (len(b.publisher.opened), len(c.publisher.opened)) == (1, 1)
    d = cluster.start("d")  # a joiner after the leaves still gets a stream
    until(lambda: d.publisher.active == 1, "the joiner's stream")
    d.publisher.events.put("d-job-0")
    read_until(stream, {"d-job-0"}, "task_a")


def test_a_leavers_clean_end_seen_before_the_directory_drops_it_is_a_leave(
        cluster: Cluster) -> None:
    # The leaver deleted its member node first, but this merge's directory lags: its clean
    # end alone says it sent everything.  It is not reopened while still listed; once
    # gone and back (the same id restarted), it is read again from its start.
    a, b, stream = cluster.watching_b_through_a()
    b.publisher.events.put("b-job-0")
    b.publisher.events.put("leave")
    read_until(stream, {"b-job-0"}, "task_a")
    until(lambda: b.publisher.active == 0, "the leaver's stream to end")
    for n in range(3):  # the merge looks at the members again and again meanwhile
        cluster.wake()
        a.publisher.events.put(f"a-job-{n}")
        read_until(stream, {f"a-job-{n}"}, "task_a")
    assert len(b.publisher.opened) == 1
    cluster.leave(b)
    a.publisher.events.put("a-job-3")
    read_until(stream, {"a-job-3"}, "task_a")
    cluster.join(b)
    until(lambda: b.publisher.active == 1, "the restarted member's stream")
    assert b.publisher.opened[1][FROM_KEY] == "start"
    b.publisher.events.put("b-job-1")
    read_until(stream, {"b-job-1"}, "task_a")


def test_a_live_members_stream_that_fails_ends_the_watch(cluster: Cluster) -> None:
    # Its changes since the failure would be missed: the caller must list and watch again.
    a, b, stream = cluster.watching_b_through_a()
    b.publisher.events.put("fail")
    broken(stream, "b", "failed (UNAVAILABLE: connection dropped)")
    until(lambda: a.publisher.active == b.publisher.active == 0, "every stream to end")
    assert len(b.publisher.opened) == 1  # not reopened


def test_a_member_whose_stream_fails_after_it_left_the_directory_ends_the_watch(
        cluster: Cluster) -> None:
    # A lost machine: its session expired (its member node gone) before its connection's
    # failure was noticed.  No clean end came, so what it published last may be missing.
    a, b, stream = cluster.watching_b_through_a()
    cluster.leave(b)
    a.publisher.events.put("a-job-0")  # the merge has looked at the members since
    read_until(stream, {"a-job-0"}, "task_a")
    b.stop()
    broken(stream, "b", "failed (")
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")
    assert len(b.publisher.opened) == 1


def test_a_lost_member_whose_stream_hangs_ends_the_watch(cluster: Cluster) -> None:
    # Out of the directory, its stream neither ends cleanly nor fails (the connection of a
    # machine that vanished hangs): after `leave_grace` it is taken for lost.
    cluster.leave_grace = 0.3
    _a, b, stream = cluster.watching_b_through_a()
    cluster.leave(b)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    details = err.value.details()
    assert details.startswith("event overflow: task_a: job manager member b left the members")
    assert "neither ended cleanly nor failed" in details
    assert len(b.publisher.opened) == 1


def test_a_leaver_within_its_grace_does_not_end_the_watch(cluster: Cluster) -> None:
    # The same grace, and a leaver whose clean end comes within it (its release and stop
    # take a while): the watch goes on.
    cluster.leave_grace = 1.0
    a, b, stream = cluster.watching_b_through_a()
    cluster.leave(b)
    a.publisher.events.put("a-job-0")
    read_until(stream, {"a-job-0"}, "task_a")
    b.publisher.events.put("b-job-0")
    b.publisher.events.put("leave")
    read_until(stream, {"b-job-0"}, "task_a")
    until(lambda: b.publisher.active == 0, "the leaver's stream to end")
    deadline = time.monotonic() + 2 * cluster.leave_grace
    n = 0
    while time.monotonic() < deadline:  # past the grace, the watch still delivers
        n += 1
        a.publisher.events.put(f"a-job-{n}")
        read_until(stream, {f"a-job-{n}"}, "task_a")


def test_the_receiving_members_leave_ends_the_watch(cluster: Cluster) -> None:
    # The member serving the watch stops: the caller watches again through another.
    _a, b, stream = cluster.watching_b_through_a()
    _a.publisher.events.put("leave")
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    assert err.value.details() == ("event overflow: task_a: job manager member a, which "
                                   "serves this watch, is leaving; list and watch again "
                                   "through another member")
    until(lambda: b.publisher.active == 0, "b's stream to be cancelled")


def test_a_killed_member_ends_the_watch(cluster: Cluster) -> None:
    # kill -9: its connections close at once while its member node lives until its session
    # expires; what it published just before may not have arrived.
    a, b, stream = cluster.watching_b_through_a()
    b.stop()
    broken(stream, "b", "failed (")
    del cluster.members["b"]  # its session expires after the watch ended
    cluster.wake()
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")
    assert len(b.publisher.opened) == 1


@pytest.mark.parametrize("listed", [True, False])
def test_a_stream_that_ends_without_the_leave_trailer_ends_the_watch(
        cluster: Cluster, listed: bool) -> None:
    # OK but not a leave's clean end: nothing says everything was sent.
    a, b, stream = cluster.watching_b_through_a()
    if not listed:
        cluster.leave(b)
        a.publisher.events.put("a-job-0")
        read_until(stream, {"a-job-0"}, "task_a")
    b.publisher.events.put("end")
    broken(stream, "b", "ended without the clean end of a leave")
    assert len(b.publisher.opened) == 1


def test_another_members_overflow_ends_the_watch_as_a_local_one_would(cluster: Cluster) -> None:
    a, b, stream = cluster.watching_b_through_a()
    b.publisher.events.put("overflow")
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    assert err.value.details() == "event overflow: task_a"
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")


def test_cancel_on_the_receiving_member_ends_every_members_stream(cluster: Cluster) -> None:
    a, b, stream = cluster.watching_b_through_a()
    a.publisher.events.put("cancel")  # what Cancel(task_a) does to a's own stream
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.CANCELLED
    assert err.value.details() == "watch cancelled: task_a"
    until(lambda: b.publisher.active == 0, "b's stream to be cancelled")


# -- a Watch of one job: its owner alone ------------------------------------------------------
@pytest.mark.parametrize(("request_", "job"), [
    (ONE_JOB, JOB),
    (pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter(
        job_ids=[v1.JobID(value=JOB)])), JOB),
    (EVERY_POD, None),
    (pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter()), None),
    (pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter(
        job_ids=[v1.JobID(value=JOB), v1.JobID(value="job-2")])), None),
    (pb.WatchRequest(), None),
])
def test_the_job_a_watch_is_about(request_: pb.WatchRequest, job: str | None) -> None:
    assert watched_job(request_) == job


def test_a_watch_of_one_job_goes_to_its_owner_alone(cluster: Cluster) -> None:
    cluster.owners[JOB] = "b"
    a, b, c = cluster.start("a"), cluster.start("b"), cluster.start("c")
    stream = cluster.watch(a, ONE_JOB)
    assert next(stream).watch_id == "task_a"  # the receiving member's own stream: its id
    until(lambda: b.publisher.active == 1, "the owner's stream")
    b.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, "task_a")
    cluster.wake()  # a membership change: the merge looks again, and still wants b alone
    b.publisher.events.put(f"{JOB}-1")
    read_until(stream, {f"{JOB}-1"}, "task_a")
    assert (len(a.publisher.opened), len(b.publisher.opened), c.publisher.opened) == (1, 1, [])
    # A Watch of several jobs is still fanned in.
    several = cluster.watch(a, pb.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter(
        job_ids=[v1.JobID(value=JOB), v1.JobID(value="job-2")])))
    next(several)
    until(lambda: c.publisher.active == 1, "a fan-in over every member")


def test_a_watch_of_one_job_follows_its_owner(cluster: Cluster) -> None:
    cluster.owners[JOB] = "b"
    a, b, c = cluster.start("a"), cluster.start("b"), cluster.start("c")
    stream = cluster.watch(a, ONE_JOB)
    next(stream)
    until(lambda: b.publisher.active == 1, "the owner's stream")
    # A handover: the partition's node now names c.  The new owner gets a stream; the
    # previous one's is read a moment longer (its last changes), then closed.
    cluster.owners[JOB] = "c"
    cluster.wake()
    until(lambda: c.publisher.active == 1, "the new owner's stream")
    b.publisher.events.put(f"{JOB}-0")  # published just before it let the job go
    c.publisher.events.put(f"{JOB}-1")
    read_until(stream, {f"{JOB}-0", f"{JOB}-1"}, "task_a")
    until(lambda: b.publisher.active == 0, "the previous owner's stream to be closed")
    # The owner leaves gracefully (SIGTERM): its member node goes, it hands the job to b,
    # publishes its last change, then ends its streams cleanly; the next owner gets a
    # stream and the leaver's is read to its end: the watch goes on.
    cluster.owners[JOB] = "b"
    cluster.leave(c)
    until(lambda: b.publisher.active == 1, "the next owner's stream")
    for _ in range(3):  # looked at again and again: a leaver's stream is not closed
        cluster.wake()
        b.publisher.events.put(f"{JOB}-x")
        read_until(stream, {f"{JOB}-x"}, "task_a")
    c.publisher.events.put(f"{JOB}-2")
    c.publisher.events.put("leave")
    read_until(stream, {f"{JOB}-2"}, "task_a")
    until(lambda: c.publisher.active == 0, "the leaver's stream to end")
    c.stop()
    b.publisher.events.put(f"{JOB}-3")
    read_until(stream, {f"{JOB}-3"}, "task_a")
    assert (len(b.publisher.opened), len(c.publisher.opened)) == (2, 1)


def test_a_watch_of_one_job_ends_when_its_owner_dies(cluster: Cluster) -> None:
    # Killed, its stream fails while it is still a member (until its session expires): its
    # last changes may be lost, so the watch ends rather than being reopened on the next
    # owner.
    cluster.owners[JOB] = "b"
    a, b, c = cluster.start("a"), cluster.start("b"), cluster.start("c")
    stream = cluster.watch(a, ONE_JOB)
    next(stream)
    until(lambda: b.publisher.active == 1, "the owner's stream")
    b.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, "task_a")
    b.stop()
    broken(stream, "b", "failed (")
    cluster.owners[JOB] = "c"  # its session expires; c takes the job
    del cluster.members["b"]
    cluster.wake()
    until(lambda: a.publisher.active == 0, "a's own stream to be cancelled")
    assert (len(b.publisher.opened), c.publisher.opened) == (1, [])


def test_a_watch_of_a_job_driven_here_opens_no_remote_stream(cluster: Cluster) -> None:
    cluster.owners[JOB] = "a"
    a, b = cluster.start("a"), cluster.start("b")
    stream = cluster.watch(a, ONE_JOB)
    next(stream)
    a.publisher.events.put(f"{JOB}-0")
    read_until(stream, {f"{JOB}-0"}, "task_a")
    cluster.wake()
    a.publisher.events.put(f"{JOB}-1")
    read_until(stream, {f"{JOB}-1"}, "task_a")
    assert (len(a.publisher.opened), b.publisher.opened) == (1, [])
    # Between owners (its node gone, no claim yet) nothing is opened either; then b claims it.
    del cluster.owners[JOB]
    cluster.wake()
    a.publisher.events.put(f"{JOB}-2")
    read_until(stream, {f"{JOB}-2"}, "task_a")
    assert b.publisher.opened == []
    cluster.owners[JOB] = "b"
    cluster.wake()
    until(lambda: b.publisher.active == 1, "the new owner's stream")


# -- who the members serve ----------------------------------------------------------------------
def test_every_members_stream_serves_the_original_caller(cluster: Cluster) -> None:
    a = cluster.start("a", security=security())
    b = cluster.start("b", security=security())
    stream = cluster.watch(a, metadata=basic("alice"))
    next(stream)
    until(lambda: b.publisher.active == 1, "b's stream")
    for publisher in (a.publisher, b.publisher):  # the member's identity, naming her
        caller = publisher.callers[0]
        assert caller is not None and (caller.name, caller.method) == ("alice", "forwarded")
        assert publisher.opened[0]["username"] == "peloton"
        assert "alice-pw" not in publisher.opened[0].values()


# -- through the job manager's own watch servicer ---------------------------------------------
def test_through_the_watch_servicer_a_pod_watch_sees_both_members_until_cancelled(
        cluster: Cluster) -> None:
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    assert watch_id.startswith("task_")
    until(lambda: len(b.publisher.watchers) == 1, "b's watcher")
    a.publish("job-a", 0)
    b.publish("job-b", 1)
    read_until(stream, {"job-a-0", "job-b-1"}, watch_id)
    cluster.cancel(a, watch_id)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.CANCELLED
    assert err.value.details() == f"watch cancelled: {watch_id}"
    until(lambda: not a.publisher.watchers and not b.publisher.watchers,
          "every member's watcher to be dropped")


def test_through_the_watch_servicer_a_job_watch_follows_its_owner(cluster: Cluster) -> None:
    cluster.owners[JOB] = "b"
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a, ONE_JOB)
    watch_id = next(stream).watch_id
    until(lambda: len(b.publisher.watchers) == 1, "the owner's watcher")
    b.publish(JOB, 0)
    read_until(stream, {f"{JOB}-0"}, watch_id)
    cluster.owners[JOB] = "a"  # the job moves to the receiving member
    cluster.wake()
    until(lambda: not b.publisher.watchers, "the previous owner's watcher to be dropped")
    a.publish(JOB, 1)
    read_until(stream, {f"{JOB}-1"}, watch_id)


# -- a joiner's changes before its stream opened ----------------------------------------------
def test_a_joiners_changes_before_its_stream_opened_are_not_missed(cluster: Cluster) -> None:
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    c = cluster.start_real("c", join=False)
    # c took partitions and published before this merge heard of it (its directory lags).
    c.publish("job-c", 0)
    c.publish("job-c", 1)
    cluster.join(c)
    until(lambda: len(c.publisher.watchers) == 1, "the joiner's watcher")
    c.publish("job-c", 2)
    b.publish("job-b", 0)
    read_until(stream, {"job-c-0", "job-c-1", "job-c-2", "job-b-0"}, watch_id)


def test_a_joiner_whose_history_is_gone_ends_the_watch(cluster: Cluster) -> None:
    # Heard of too late (its history no longer reaches its start): a gap cannot be ruled
    # out, so the caller lists and watches again rather than missing c's first changes.
    a = cluster.start_real("a")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    c = cluster.start_real("c", join=False)
    c.publish("job-c", 0)
    c.clock.now += 61.0
    cluster.join(c)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    details = err.value.details()
    assert details.startswith(f"event overflow: {watch_id}: the watch stream of job manager "
                              f"member c failed (OUT_OF_RANGE: ")
    until(lambda: not a.publisher.watchers, "a's watcher to be dropped")


def test_through_the_watch_servicer_a_leave_is_read_to_its_end(cluster: Cluster) -> None:
    # watch.py's leave: what b buffered is sent, then its stream ends cleanly; the watch
    # goes on with a, and b's later watches end at once.
    a, b = cluster.start_real("a"), cluster.start_real("b")
    stream = cluster.watch(a)
    watch_id = next(stream).watch_id
    b.publish("job-b", 0)
    b.publish("job-b", 1)
    cluster.leave(b)
    b.publisher.leave()
    b.publish("job-b", 2)  # nothing is published after a leave
    read_until(stream, {"job-b-0", "job-b-1"}, watch_id)
    until(lambda: not b.publisher.watchers, "b's watcher to end")
    b.stop()
    a.publish("job-a", 0)
    seen: set[str] = set()
    for response in stream:
        seen.update(p.pod_name.value for p in response.pods)
        if "job-a-0" in seen:
            break
    assert "job-b-2" not in seen
