"""Job manager members for the Watch fan-in tests (test_watch_fanin.py, test_watch_one_job.py):
each member is a gRPC server whose WatchService publishes what the test puts in its queue
(`FakeMember`) or is watch.py's own servicer over its own publisher (`RealMember`), and
whose forwarder fans a client's Watch in over the `Cluster`'s members (servicers/
watch_fanin.py).  `clusters()` backs each module's `cluster` fixture and stops everything
a test started."""

from __future__ import annotations

import itertools
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
from peloton.common.member_directory import PartitionClaim
from peloton.core.errors import Conflict
from peloton.core.partitions import partition_of
from peloton.core.states import TaskState
from peloton.jobmgr.job_deps import Listeners
from peloton.jobmgr.servicers.watch import LEFT_KEY, WatchPublisher, WatchServicer
from peloton.jobmgr.servicers.watch_fanin import WatchFanIn
from tests.contract import factories as f
from tests.unit.jobmgr_servicers.served import Served

DEADLINE = 10.0
JOB = "job-1"
#: The job partitions of the members' publishers (a `RealMember` claims and releases them).
PARTITIONS = 8
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
            lambda: dict(cluster.members), name, "", owner=cluster.owners.claim,
            claim_here=lambda job: cluster.here.get((name, job)),
            identity=identity, recheck=0.1, leave_grace=cluster.leave_grace,
            open_timeout=cluster.open_timeout))
        forwarder = cluster.served.forwarder(lambda _job: True, _NoOwners(), lambda _u: None,
                                             watch_fan_in=self.fan_in, identity=identity)
        self.server = cluster.served.server(pb_grpc.add_WatchServiceServicer_to_server,
                                            servicer, forward=forwarder, security=security)
        self.address = self.fan_in.my_address = f"127.0.0.1:{self.server.port}"

    def stop(self, grace: float = 0.0) -> None:
        """Stop its server: at once (0, a kill: calls in flight are cancelled), or as a
        daemon's stop does (`GrpcServer.stop`'s 2 s), calls in flight finishing first."""
        self.server.stop(grace)


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
    first changes and each partition's since its claim (a member's) on `clock`."""

    def __init__(self, cluster: Cluster, name: str, security: Security | None) -> None:
        self.listeners = Listeners()
        self.clock = FakeClock()
        self.publisher = WatchPublisher(self.listeners, journal=True, journal_seconds=60.0,
                                        partition=lambda job_id: partition_of(job_id, PARTITIONS),
                                        clock=self.clock)
        super().__init__(cluster, name, WatchServicer(self.publisher), security)

    def claim(self, job_id: str, after: int | None) -> None:
        """This member takes the partition of `job_id` over from epoch `after` (what
        app.py's acquire tells it)."""
        self.publisher.claimed(partition_of(job_id, PARTITIONS), after)

    def release(self, job_id: str) -> None:
        """This member lets the partition of `job_id` go."""
        self.publisher.released(partition_of(job_id, PARTITIONS))

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


class Owners(dict[str, str]):
    """Job -> the member holding its partition, as a test sets it: each assignment is a
    new claim of the partition (a new epoch, as a new partition node's czxid is), the same
    holder's again included."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: dict[str, int] = {}
        self._next = itertools.count(1)

    def __setitem__(self, job: str, holder: str) -> None:
        super().__setitem__(job, holder)
        self.epochs[job] = next(self._next)

    def move_through(self, job: str, via: str, to: str) -> None:
        """The job's partition goes to `via`, then to `to`, at once for whoever looks (the
        directory never showed `via`'s claim)."""
        next(self._next)  # `via`'s claim
        self[job] = to

    def claim(self, job: str) -> PartitionClaim | None:
        """What the member directory says of the job's partition."""
        holder = self.get(job)
        return None if holder is None else PartitionClaim(holder, self.epochs[job])


class Cluster:
    """The members a test started: `members` (live member -> address) and `owners` (job ->
    the member holding its partition) are what the member directory would say."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.members: dict[str, str] = {}
        self.owners = Owners()
        #: (member, job) -> that member's own claim of the job's partition: (epoch, the
        #: epoch it took over from), what its partition fences would say.
        self.here: dict[tuple[str, str], tuple[int, int | None]] = {}
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

    def watching_b_owners_job_through_a(self, *, real: bool = False) -> tuple[Any, Any, Any, Any, str]:
        """Members a, b and c (over watch.py if `real`), b owning JOB, and a client's Watch of
        JOB through a, read past its first answer, with b's stream open: the members, the
        stream and its watch id."""
        self.owners[JOB] = "b"
        start = self.start_real if real else self.start
        a, b, c = (start(name) for name in "abc")
        stream = self.watch(a, ONE_JOB)
        watch_id = next(stream).watch_id
        if real:
            until(lambda: len(b.publisher.watchers) == 1, "the owner's watcher")
        else:
            assert isinstance(b, FakeMember)
            until(lambda: b.publisher.active == 1, "the owner's stream")
        return a, b, c, stream, watch_id

    def cancel(self, member: Member, watch_id: str) -> None:
        stub = pb_grpc.WatchServiceStub(self.served.channel(member.address))
        stub.Cancel(pb.CancelRequest(watch_id=watch_id), timeout=DEADLINE)


def clusters() -> Iterator[Cluster]:
    """A test's cluster (a `cluster` fixture yields from it): everything it started is
    stopped when the test ends."""
    served = Served()
    try:
        yield Cluster(served)
    finally:
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


def aborted(stream: Any) -> str:
    """Read `stream` to its end, which must be ABORTED; the status details."""
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    return str(err.value.details())


def read_until(stream: Any, wanted: set[str], watch_id: str) -> set[str]:
    """Read `stream` until every pod in `wanted` was seen; the pods seen."""
    seen: set[str] = set()
    for response in stream:
        assert response.watch_id == watch_id
        seen.update(p.pod_name.value for p in response.pods)
        if wanted <= seen:
            return seen
    raise AssertionError(f"the watch ended before {sorted(wanted - seen)} were seen")


