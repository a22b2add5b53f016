"""Replies sent as the bytes the servicer assembled (service_registry.RAW_REPLIES).

The host manager keeps each leased host's offer and each status event encoded and
assembles its AcquireHosts and PollEvents replies from those bytes; the server sends them
as they are, without decoding them for gRPC to encode them again.  What goes on the wire
is still a valid reply (decoded here with protobuf), errors keep their status, and the
typed methods still answer callers in the same process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from peloton.api.convert.private_hosts import event_to_pb, offer_to_pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2_grpc as pb_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.api.ports_grpc.hostmgr_servicer import HostManagerServicer, serve_host_manager
from peloton.api.service_registry import FIELD_TRAILER, register
from peloton.core.errors import Unavailable
from peloton.core.model.sched import HostLease
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import StatusUpdate
from peloton.hostmgr.events import EventLog
from tests.fakes.hostmgr import FakeHostManager

SERVICE = "/pelotonpy.internal.hostmgr.HostManagerService/"


class _Served:
    """A servicer on a local server, and a channel to call its methods undecoded."""

    def __init__(self, server: GrpcServer) -> None:
        self.server = server
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")

    def raw(self, method: str, request: Any) -> bytes:
        """The reply's bytes as they came over the wire."""
        call = self.channel.unary_unary(SERVICE + method,
                                        request_serializer=type(request).SerializeToString)
        data: bytes = call(request, timeout=5)
        return data

    def close(self) -> None:
        self.channel.close()
        self.server.stop(0)


@pytest.fixture
def serve() -> Iterator[Any]:
    served: list[_Served] = []

    def start(add: Any) -> _Served:
        server = GrpcServer("127.0.0.1:0")
        add(server)
        server.start()
        served.append(_Served(server))
        return served[-1]

    yield start
    for s in served:
        s.close()


def _update(n: int, state: TaskState = TaskState.RUNNING) -> StatusUpdate:
    return StatusUpdate(uuid=f"u{n}", run_id=f"job-{n}-1", state=state, hostname="h1",
                        agent_id="a1", timestamp=1000.0 + n, message=f"update {n}")


def _hosts() -> Any:  # the fake's sandbox calls predate the port's hostname argument
    hm = FakeHostManager()
    for i in range(3):
        hm.add_host(f"h{i}", cpu=4 + i)
    return hm


def _log() -> EventLog:
    log = EventLog(100, ("resmgr",), lambda trimmed: None)
    log.offer_many([_update(n) for n in range(1, 4)])
    return log


# -- the mechanism ------------------------------------------------------------------------------
class _Twice(pb_grpc.HostManagerServiceServicer):  # type: ignore[misc]
    """Answers AcquireHosts with bytes that name the lease twice: decoding them keeps the
    second and encoding that again names it once, so only bytes sent as they are arrive
    as they were returned."""

    raw_replies = {"AcquireHosts": "acquire_hosts_reply"}
    BYTES = (pb.AcquireHostsResponse(lease_id="first").SerializeToString()
             + pb.AcquireHostsResponse(lease_id="second").SerializeToString())

    def acquire_hosts_reply(self, request: pb.AcquireHostsRequest, context: Any) -> bytes:
        return self.BYTES

    def AcquireHosts(self, request: pb.AcquireHostsRequest,
                     context: Any) -> pb.AcquireHostsResponse:
        return pb.AcquireHostsResponse.FromString(self.acquire_hosts_reply(request, context))

    def ReleaseLease(self, request: pb.ReleaseLeaseRequest,
                     context: Any) -> pb.ReleaseLeaseResponse:
        return pb.ReleaseLeaseResponse()


def test_a_raw_reply_goes_out_as_the_servicer_returned_it(serve: Any) -> None:
    served = serve(lambda s: register(s, pb_grpc.add_HostManagerServiceServicer_to_server,
                                      _Twice()))
    data = served.raw("AcquireHosts", pb.AcquireHostsRequest())
    assert data == _Twice.BYTES  # not decoded and encoded again (that names the lease once)
    assert pb.AcquireHostsResponse.FromString(data).lease_id == "second"
    # The servicer's other methods are typed as before.
    assert served.raw("ReleaseLease", pb.ReleaseLeaseRequest(lease_id="x")) == b""


def test_a_raw_reply_naming_a_method_the_servicer_lacks_is_refused_at_registration() -> None:
    class Missing(_Twice):
        raw_replies = {"AcquireHosts": "no_such_method"}

    with pytest.raises(ValueError, match="no_such_method"):
        register(GrpcServer("127.0.0.1:0"), pb_grpc.add_HostManagerServiceServicer_to_server,
                 Missing())


# -- the host manager's replies ---------------------------------------------------------------
def test_a_lease_on_the_wire_decodes_to_its_offers_and_the_typed_call_agrees(
        serve: Any) -> None:
    hm = _hosts()
    servicer = HostManagerServicer(hm, _log())
    served = serve(lambda s: register(s, pb_grpc.add_HostManagerServiceServicer_to_server,
                                      servicer))
    leases: list[HostLease] = []
    acquire = hm.acquire_hosts

    def recorded(max_hosts: int = 0) -> HostLease:
        leases.append(acquire(max_hosts))
        return leases[-1]

    hm.acquire_hosts = recorded
    for _ in range(2):  # the second from the offers encoded already
        reply = pb.AcquireHostsResponse.FromString(
            served.raw("AcquireHosts", pb.AcquireHostsRequest()))
        assert reply.lease_id == leases[-1].lease_id
        assert list(reply.offers) == [offer_to_pb(o) for o in leases[-1].offers]
        assert [o.hostname for o in reply.offers] == ["h0", "h1", "h2"]
        hm.release_lease(reply.lease_id)
    typed = servicer.AcquireHosts(pb.AcquireHostsRequest(max_hosts=2), None)
    assert isinstance(typed, pb.AcquireHostsResponse)
    assert list(typed.offers) == [offer_to_pb(o) for o in leases[-1].offers]
    assert typed.lease_id == leases[-1].lease_id and len(typed.offers) == 2


def test_a_poll_on_the_wire_is_the_bytes_assembled_and_decodes_to_the_events(
        serve: Any) -> None:
    log = _log()
    servicer = HostManagerServicer(_hosts(), log)
    served = serve(lambda s: serve_host_manager(s, servicer.port, log))
    first = pb.PollEventsResponse.FromString(
        served.raw("PollEvents", pb.PollEventsRequest(consumer="resmgr")))
    assert (first.stream_id, first.acknowledged, list(first.events)) == (log.stream_id, 0, [])
    request = pb.PollEventsRequest(consumer="resmgr", stream_id=log.stream_id, limit=10)
    data = served.raw("PollEvents", request)
    reply = pb.PollEventsResponse.FromString(data)
    expected = log.read(0, 10, 0)
    assert list(reply.events) == [event_to_pb(e) for e in expected.events]
    assert (reply.position, reply.head) == (3, 3)
    # Its fields in the order assembled (position and head before the events): protobuf
    # would have encoded them again in field order.
    assert data == servicer.poll_events_reply(request, None)
    assert data != reply.SerializeToString()
    assert servicer.PollEvents(request, None) == reply  # the typed call, in-process


def test_errors_of_raw_replies_keep_their_status(serve: Any) -> None:
    class Unleasable(FakeHostManager):
        def acquire_hosts(self, max_hosts: int = 0) -> HostLease:
            raise Unavailable("no hosts yet")

    port: Any = Unleasable()
    served = serve(lambda s: serve_host_manager(s, port, _log()))
    with pytest.raises(grpc.RpcError) as err:
        served.raw("AcquireHosts", pb.AcquireHostsRequest())
    assert (err.value.code(), err.value.details()) == (grpc.StatusCode.UNAVAILABLE,
                                                       "no hosts yet")
    with pytest.raises(grpc.RpcError) as err:
        served.raw("PollEvents", pb.PollEventsRequest())  # no consumer named
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (FIELD_TRAILER, "consumer") in tuple(err.value.trailing_metadata())
