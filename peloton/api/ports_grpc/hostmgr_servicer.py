"""pelotonpy.internal.hostmgr.HostManagerService: a HostManagerPort served over gRPC.

Like resmgr_servicer.py, each method decodes, calls the port object and
encodes.  The status stream is served from the host manager's event log
directly (`StreamSource`, which peloton.hostmgr.events.EventLog is): a
remote consumer keeps its own cursor and names the stream it read under
(see the stream section of proto/pelotonpy/internal/hostmgr/hostmgr.proto).
"""

from __future__ import annotations

from typing import Any, Protocol

from peloton.api.convert.ext_maintenance import drain_to_pb
from peloton.api.convert.private_hosts import (
    event_to_pb,
    launch_failure_to_pb,
    launches_from_pb,
    offer_to_pb,
    reservation_from_pb,
    summary_to_pb,
)
from peloton.api.convert.private_sched import resources_to_pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2_grpc as pb_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.ports_grpc.resmgr_servicer import MAX_WAIT
from peloton.api.service_registry import register
from peloton.core.errors import InvalidArgument
from peloton.core.ports import HostEvent, HostManagerPort


class StreamSource(Protocol):
    """The host manager's status stream as the servicer reads it (EventLog's interface)."""

    #: Identity of this process's stream; offsets mean nothing under another one.
    stream_id: str

    def register(self, consumer: str) -> int:
        """Make `consumer` known; returns its acknowledged offset."""
        ...

    def read(self, after: int, limit: int, timeout: float) -> list[HostEvent]:
        """Events with offsets above `after`, waiting up to `timeout` for the first."""
        ...

    def acknowledge(self, consumer: str, offset: int) -> None:
        """`consumer` processed everything up to `offset`."""
        ...


class HostManagerServicer(pb_grpc.HostManagerServiceServicer):  # type: ignore[misc]
    """Serves one HostManagerPort object and its status stream."""

    def __init__(self, port: HostManagerPort, stream: StreamSource) -> None:
        self.port = port
        self.stream = stream

    # -- placement engine side ------------------------------------------------------------------
    def AcquireHosts(self, request: pb.AcquireHostsRequest, context: Any) -> pb.AcquireHostsResponse:
        lease = self.port.acquire_hosts(request.max_hosts)
        return pb.AcquireHostsResponse(lease_id=lease.lease_id,
                                       offers=[offer_to_pb(o) for o in lease.offers])

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

    def Reconcile(self, request: pb.ReconcileRequest, context: Any) -> pb.ReconcileResponse:
        if request.all:  # HostManager's own extension of the port: reconcile(None)
            self.port.reconcile(None)  # type: ignore[arg-type]
        else:
            self.port.reconcile(list(request.run_ids))
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
        if not request.consumer:
            raise InvalidArgument("consumer is required", field="consumer")
        stream = self.stream
        current = stream.stream_id
        if request.stream_id != current:  # a new consumer, or a new host manager: resume here
            return pb.PollEventsResponse(stream_id=current,
                                         acknowledged=stream.register(request.consumer))
        # Registering again changes nothing but keeps a member consumer (`jobmgr@<member>`)
        # from being forgotten as gone (peloton/hostmgr/events.py).
        stream.register(request.consumer)
        events = stream.read(request.after, request.limit, min(request.timeout, MAX_WAIT))
        return pb.PollEventsResponse(stream_id=current, events=[event_to_pb(e) for e in events])

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

    def DrainingRuns(self, request: pb.DrainingRunsRequest,
                     context: Any) -> pb.DrainingRunsResponse:
        return pb.DrainingRunsResponse(runs=[pb.DrainingRun(hostname=h, run_id=r)
                                             for h, r in self.port.draining_runs()])

    def DrainRequests(self, request: pb.DrainRequestsRequest,
                      context: Any) -> pb.DrainRequestsResponse:
        return pb.DrainRequestsResponse(drains={
            host: drain_to_pb(req) for host, req in self.port.drain_requests().items()})


def serve_host_manager(server: ServiceHost, port: HostManagerPort, stream: StreamSource) -> str:
    """Register the service for `port` on `server` (before it starts); returns its name."""
    return register(server, pb_grpc.add_HostManagerServiceServicer_to_server,
                    HostManagerServicer(port, stream))

