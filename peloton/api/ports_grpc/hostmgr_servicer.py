"""pelotonpy.internal.hostmgr.HostManagerService: a HostManagerPort served over gRPC.

Like resmgr_servicer.py, each method decodes, calls the port object and
encodes.  The status stream is served from the host manager's event log
directly (`StreamSource`, which peloton.hostmgr.events.EventLog is): a
remote consumer keeps its own cursor and names the stream it read under
(see the stream section of proto/pelotonpy/internal/hostmgr/hostmgr.proto).
A poll naming partitions (an all-active job manager member's) is given only
their jobs' events; a poll without them (the resource manager, a lone job
manager, an older caller) every event.

What every caller reads again is encoded once, since encoding is most of
the cost of these replies: each status event once for all the consumers
that read it (every job manager member and the resource manager), each
host's offer once until its books change (the port hands out the same
HostOffer value until then), and the host shapes once until a host joins,
goes or changes state.  Replies are assembled from those bytes, and the
leases and polls are sent as assembled (`raw_replies`, see
peloton/api/service_registry.py): the typed AcquireHosts and PollEvents decode
the same bytes, for callers in this process.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from peloton.api.convert.ext_maintenance import drain_to_pb
from peloton.api.convert.private_hosts import (
    event_to_pb,
    launch_failure_to_pb,
    launches_from_pb,
    launches_from_table,
    offer_to_pb,
    reservation_from_pb,
    summary_to_pb,
    task_spec_from_pb,
)
from peloton.api.convert.private_sched import (
    enum_from_pb,
    labels_to_pb,
    partitions_from_pb,
    resources_to_pb,
)
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2_grpc as pb_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.ports_grpc.resmgr_servicer import MAX_WAIT
from peloton.api.service_registry import register
from peloton.core.errors import InvalidArgument
from peloton.core.feasibility import HostShape
from peloton.core.model.constraints import Label
from peloton.core.model.host import HostOffer
from peloton.core.model.resources import Resources
from peloton.core.partitions import PartitionSet
from peloton.core.ports import EventScan, HostManagerPort
from peloton.core.states import TaskState

#: Events kept encoded for the consumers still to read them (about 150 bytes each): more
#: than any consumer lags behind the others in a healthy cluster.
ENCODED_EVENTS = 50_000
#: Partitions a poll may name, at most (a cluster has DEFAULT_PARTITIONS, 64).
MAX_POLL_PARTITIONS = 4096


#: PollEventsResponse.events (field 3) as a length-delimited field's tag.
_EVENTS_TAG = bytes([3 << 3 | 2])


def _field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited protobuf field: its tag, the varint length of `data`, `data`
    (what the message holding it would serialize it as; cheaper than a message per event)."""
    n = len(data)
    out = bytearray(tag)
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    out += data
    return bytes(out)


class StreamSource(Protocol):
    """The host manager's status stream as the servicer reads it (EventLog's interface)."""

    #: Identity of this process's stream; offsets mean nothing under another one.
    stream_id: str

    def register(self, consumer: str) -> int:
        """Make `consumer` known; returns its acknowledged offset."""
        ...

    def read(self, after: int, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> EventScan:
        """Events with offsets above `after` (of jobs in `partitions` only, unless None),
        waiting up to `timeout` for the first; where the read ended, and the head."""
        ...

    def acknowledge(self, consumer: str, offset: int) -> None:
        """`consumer` processed everything up to `offset`."""
        ...


class HostManagerServicer(pb_grpc.HostManagerServiceServicer):  # type: ignore[misc]
    """Serves one HostManagerPort object and its status stream."""

    #: Served with the bytes these methods assemble (service_registry.RAW_REPLIES).
    raw_replies: ClassVar[Mapping[str, str]] = {"AcquireHosts": "acquire_hosts_reply",
                                                 "PollEvents": "poll_events_reply"}

    def __init__(self, port: HostManagerPort, stream: StreamSource) -> None:
        self.port = port
        self.stream = stream
        #: Hostname -> its offer last leased and that offer encoded (see AcquireHosts).
        self._offers: dict[str, tuple[HostOffer, bytes]] = {}
        #: The host shapes last answered and their encoded reply (see HostShapes).
        self._shapes: tuple[list[HostShape], bytes] | None = None
        #: Offset -> the event encoded as a reply's field, for the stream `_encoded_stream`.
        #: (An OrderedDict: a dict emptied from its front slows down every `iter()` of it.)
        self._encoded: OrderedDict[int, bytes] = OrderedDict()
        self._encoded_stream = ""

    # -- placement engine side ------------------------------------------------------------------
    def AcquireHosts(self, request: pb.AcquireHostsRequest, context: Any) -> pb.AcquireHostsResponse:
        return pb.AcquireHostsResponse.FromString(self.acquire_hosts_reply(request, context))

    def acquire_hosts_reply(self, request: pb.AcquireHostsRequest, context: Any) -> bytes:
        """AcquireHosts' reply, encoded: what the server sends (see `raw_replies`)."""
        lease = self.port.acquire_hosts(request.max_hosts)
        # A host's offer is the same value until its books change (hostmgr/hosts.py), and
        # a round leases thousands of hosts most of which nothing happened to since their
        # last round: each offer is encoded once, as its field of a reply.
        cache = self._offers
        chunks = [pb.AcquireHostsResponse(lease_id=lease.lease_id).SerializeToString()]
        for offer in lease.offers:
            cached = cache.get(offer.hostname)
            if cached is None or cached[0] is not offer:
                cached = cache[offer.hostname] = (offer, pb.AcquireHostsResponse(
                    offers=[offer_to_pb(offer)]).SerializeToString())
            chunks.append(cached[1])
        return b"".join(chunks)

    def CommitLease(self, request: pb.CommitLeaseRequest, context: Any) -> pb.CommitLeaseResponse:
        self.port.commit_lease(request.lease_id,
                               [reservation_from_pb(r) for r in request.reservations])
        return pb.CommitLeaseResponse()

    def ReleaseLease(self, request: pb.ReleaseLeaseRequest,
                     context: Any) -> pb.ReleaseLeaseResponse:
        self.port.release_lease(request.lease_id)
        return pb.ReleaseLeaseResponse()

    # -- job manager side ------------------------------------------------------------------------
    def Launch(self, request: pb.LaunchRequest, context: Any) -> pb.LaunchResponse:
        failures = self.port.launch(request.hostname, launches_from_pb(request.specs, request.tasks))
        return pb.LaunchResponse(failures=[launch_failure_to_pb(f) for f in failures])

    def LaunchHosts(self, request: pb.LaunchHostsRequest,
                    context: Any) -> pb.LaunchHostsResponse:
        specs = [task_spec_from_pb(s) for s in request.specs]
        failures = self.port.launch_hosts({h.hostname: launches_from_table(specs, h.tasks)
                                           for h in request.hosts})
        return pb.LaunchHostsResponse(hosts=[
            pb.HostLaunchFailures(hostname=hostname,
                                  failures=[launch_failure_to_pb(f) for f in failed])
            for hostname, failed in failures.items()])

    def Kill(self, request: pb.KillRequest, context: Any) -> pb.KillResponse:
        self.port.kill(list(request.run_ids), request.grace_secs)
        return pb.KillResponse()

    def DestroyVolumes(self, request: pb.DestroyVolumesRequest,
                       context: Any) -> pb.DestroyVolumesResponse:
        kept = self.port.destroy_volumes(request.hostname, list(request.volume_ids))
        return pb.DestroyVolumesResponse(in_use=kept)

    def Adopt(self, request: pb.AdoptRequest, context: Any) -> pb.AdoptResponse:
        self.port.adopt(request.hostname, launches_from_pb(request.specs, request.tasks))
        return pb.AdoptResponse()

    def AdoptHosts(self, request: pb.AdoptHostsRequest, context: Any) -> pb.AdoptResponse:
        specs = [task_spec_from_pb(s) for s in request.specs]
        self.port.adopt_hosts({h.hostname: launches_from_table(specs, h.tasks)
                               for h in request.hosts})
        return pb.AdoptResponse()

    def Reconcile(self, request: pb.ReconcileRequest, context: Any) -> pb.ReconcileResponse:
        if request.all:  # HostManager's own extension of the port: reconcile(None)
            self.port.reconcile(None)  # type: ignore[arg-type]
        else:
            # A million runs in a handful of states: each distinct one is decoded once.
            states = {s: enum_from_pb(TaskState, s, "expected") if s else None
                      for s in set(request.expected)}
            expected = [states[s] for s in request.expected] if request.expected else None
            self.port.reconcile(list(request.run_ids), expected)
        return pb.ReconcileResponse()

    def SandboxFiles(self, request: pb.SandboxFilesRequest,
                     context: Any) -> pb.SandboxFilesResponse:
        address, files = self.port.sandbox_files(request.hostname, request.run_id, request.path)
        return pb.SandboxFilesResponse(address=address, files=[
            pb.SandboxFile(name=name, size=size) for name, size in files])

    def ReadSandbox(self, request: pb.ReadSandboxRequest, context: Any) -> pb.ReadSandboxResponse:
        data = self.port.read_sandbox(request.hostname, request.run_id, request.path,
                                      request.offset, request.length or 1 << 20)
        return pb.ReadSandboxResponse(data=data)

    # -- the status stream ------------------------------------------------------------------------
    def PollEvents(self, request: pb.PollEventsRequest, context: Any) -> pb.PollEventsResponse:
        return pb.PollEventsResponse.FromString(self.poll_events_reply(request, context))

    def poll_events_reply(self, request: pb.PollEventsRequest, context: Any) -> bytes:
        """PollEvents' reply, encoded: what the server sends (see `raw_replies`)."""
        if not request.consumer:
            raise InvalidArgument("consumer is required", field="consumer")
        stream = self.stream
        current = stream.stream_id
        if request.stream_id != current:  # a new consumer, or a new host manager: resume here
            return pb.PollEventsResponse(stream_id=current, acknowledged=stream.register(
                request.consumer)).SerializeToString()
        # Registering again changes nothing but keeps a member consumer (`jobmgr@<member>`)
        # from being forgotten as gone (peloton/hostmgr/events.py).
        stream.register(request.consumer)
        partitions = poll_partitions(request)
        scan = stream.read(request.after, request.limit, min(request.timeout, MAX_WAIT),
                           partitions)
        return self._events_reply(current, scan)

    def _events_reply(self, stream_id: str, scan: EventScan) -> bytes:
        """The reply carrying `scan`'s events, encoded, each event once for every consumer: the
        job managers and the resource manager all read most events, so each is kept encoded
        (as the bytes of its field in a reply) until `ENCODED_EVENTS` newer ones are."""
        if stream_id != self._encoded_stream:  # offsets of another stream: another event
            self._encoded.clear()
            self._encoded_stream = stream_id
        cache = self._encoded
        chunks = [pb.PollEventsResponse(stream_id=stream_id, position=scan.position,
                                        head=scan.head).SerializeToString()]
        for e in scan.events:
            chunk = cache.get(e.offset)
            if chunk is None:
                chunk = cache[e.offset] = _field(_EVENTS_TAG, event_to_pb(e).SerializeToString())
            chunks.append(chunk)
        while len(cache) > ENCODED_EVENTS:
            cache.popitem(last=False)  # the oldest encoded (about the lowest offset)
        return b"".join(chunks)

    def AckEvents(self, request: pb.AckEventsRequest, context: Any) -> pb.AckEventsResponse:
        stream = self.stream
        if request.stream_id == stream.stream_id:  # offsets of another stream mean nothing here
            stream.acknowledge(request.consumer, request.offset)
        return pb.AckEventsResponse(stream_id=stream.stream_id)

    # -- cluster views ------------------------------------------------------------------------------
    def ClusterCapacity(self, request: pb.ClusterCapacityRequest,
                        context: Any) -> pb.ClusterCapacityResponse:
        capacity, slack = self.port.cluster_capacity()
        return pb.ClusterCapacityResponse(capacity=resources_to_pb(capacity), slack_cpu=slack)

    def HostStates(self, request: pb.HostStatesRequest, context: Any) -> pb.HostStatesResponse:
        return pb.HostStatesResponse(
            states={name: state.value for name, state in self.port.host_states().items()})

    def HostSummaries(self, request: pb.HostSummariesRequest,
                      context: Any) -> pb.HostSummariesResponse:
        return pb.HostSummariesResponse(hosts=[summary_to_pb(s) for s in self.port.host_summaries()])

    def HostShapes(self, request: pb.HostShapesRequest, context: Any) -> pb.HostShapesResponse:
        # Asked on every CreateJob and by the resource manager's admission: ten thousand
        # hosts changing only when one registers, goes or changes maintenance state.  The
        # host manager hands out the same cached HostShape values until then, so the reply
        # is grouped and encoded again only when one of them changed.
        shapes = self.port.host_shapes()
        cached = self._shapes
        if cached is None or len(cached[0]) != len(shapes) or any(
                a is not b for a, b in zip(cached[0], shapes, strict=True)):
            cached = self._shapes = (shapes, shapes_to_pb(shapes).SerializeToString())
        return pb.HostShapesResponse.FromString(cached[1])

    def DrainingRuns(self, request: pb.DrainingRunsRequest,
                     context: Any) -> pb.DrainingRunsResponse:
        return pb.DrainingRunsResponse(runs=[pb.DrainingRun(hostname=h, run_id=r)
                                             for h, r in self.port.draining_runs()])

    def DrainRequests(self, request: pb.DrainRequestsRequest,
                      context: Any) -> pb.DrainRequestsResponse:
        return pb.DrainRequestsResponse(drains={
            host: drain_to_pb(req) for host, req in self.port.drain_requests().items()})


def poll_partitions(request: pb.PollEventsRequest) -> PartitionSet | None:
    """The partitions a poll names (None: unset, every event); InvalidArgument
    "partitions" for more than `MAX_POLL_PARTITIONS` or one out of range."""
    if not request.HasField("partitions"):
        return None
    msg = request.partitions
    if msg.count > MAX_POLL_PARTITIONS or len(msg.held) > msg.count:
        raise InvalidArgument(f"at most {MAX_POLL_PARTITIONS} partitions, each named once: "
                              f"{len(msg.held)} of {msg.count}", field="partitions")
    return partitions_from_pb(msg)


def shapes_to_pb(shapes: Sequence[HostShape]) -> pb.HostShapesResponse:
    """Host shapes -> a reply grouping the hosts of each shape (hostnames in order)."""
    groups: dict[tuple[Resources, tuple[Label, ...], bool], list[str]] = {}
    for s in shapes:
        groups.setdefault((s.capacity, s.labels, s.up), []).append(s.hostname)
    return pb.HostShapesResponse(groups=[
        pb.HostShapeGroup(capacity=resources_to_pb(capacity), labels=labels_to_pb(labels),
                          up=up, hostnames=names)
        for (capacity, labels, up), names in groups.items()])


def serve_host_manager(server: ServiceHost, port: HostManagerPort, stream: StreamSource) -> str:
    """Register the service for `port` on `server` (before it starts); returns its name."""
    return register(server, pb_grpc.add_HostManagerServiceServicer_to_server,
                    HostManagerServicer(port, stream))

