"""HostManagerPort over gRPC, with the status stream as long polls that survive failovers.

`GrpcHostManager` is what the placement engine, the job manager and the
resource manager hold in multi-process mode.  Each method is one call to
pelotonpy.internal.hostmgr.HostManagerService on the host manager's leader
(see channel.py).

`RemoteEventStream` is one consumer's `EventStream`.  It keeps the read
cursor on this side together with the stream id it reads under; the host
manager keeps only acknowledged offsets.  When the host manager restarts or
fails over its stream id changes, the next poll is answered with the new id
and the consumer's acknowledged offset there, and the stream carries on from
that offset: events not acknowledged before are re-delivered by the agents,
so nothing is lost and nothing from the old stream is acknowledged in the
new one.  A poll naming partitions (an all-active job manager member's) is
answered with their jobs' events and the offset read up to, past the events
passed over; an older host manager ignores the partitions and answers every
event without that offset or the head, which this side then derives.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from peloton.api.convert.ext_maintenance import drain_from_pb
from peloton.api.convert.lease_offers import LeaseDecoder
from peloton.api.convert.private_hosts import (
    SpecTable,
    event_from_pb,
    launch_failure_from_pb,
    launches_into_pb,
    launches_to_pb,
    reservation_to_pb,
    summary_from_pb,
)
from peloton.api.convert.private_sched import (
    enum_from_pb,
    labels_from_pb,
    partitions_to_pb,
    resources_from_pb,
)
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.ports_grpc.channel import PeerChannel, PeerSecurity, Target
from peloton.core.errors import Unimplemented
from peloton.core.feasibility import HostShape
from peloton.core.model.resources import Resources
from peloton.core.model.sched import HostLease, HostReservation, LaunchFailure, LaunchSpec
from peloton.core.model.sla_policy import DrainRequest
from peloton.core.partitions import PartitionSet
from peloton.core.ports import HostEvent, HostSummary, shapes_of
from peloton.core.states import HostState, TaskState

log = logging.getLogger(__name__)

SERVICE = "pelotonpy.internal.hostmgr.HostManagerService"
#: The host manager's YARPC dispatcher name (api-compat.md §2).
RPC_SERVICE = "peloton-hostmgr"


#: Hosts launched on per LaunchHosts call: the host manager hands each host's runs to its
#: backend in turn (for agents, a call to each), and the whole call has one deadline.
HOSTS_PER_LAUNCH = 500


class GrpcHostManager:
    """A `HostManagerPort` whose calls go to the host manager's leader."""

    def __init__(self, target: Target, *, caller: str, timeout: float = 10.0,
                 security: PeerSecurity | None = None) -> None:
        self.channel = PeerChannel(target, SERVICE, rpc_service=RPC_SERVICE, caller=caller,
                                   timeout=timeout, security=security)
        #: The host manager answered AdoptHosts UNIMPLEMENTED (an older version).
        self._per_host_adopt = False
        #: The same for LaunchHosts.
        self._per_host_launch = False
        #: The same for HostShapes (then they come from HostSummaries).
        self._shapes_from_summaries = False
        #: Offers of the leases so far, by their bytes (see lease_offers.py).
        self._leases = LeaseDecoder()

    def close(self) -> None:
        """Close the channels."""
        self.channel.close()

    # -- placement engine side ------------------------------------------------------------------
    def acquire_hosts(self, max_hosts: int = 0) -> HostLease:
        """Lease every UP host with free resources (or at most `max_hosts`)."""
        # Decoded by the lease decoder, which decodes only the offers that changed since
        # this client last saw them (lease_offers.py).
        return self._leases.lease(self.channel.call_raw(
            "AcquireHosts", pb.AcquireHostsRequest(max_hosts=max_hosts)))

    def commit_lease(self, lease_id: str, reservations: Sequence[HostReservation]) -> None:
        """Turn a lease into reservations."""
        self.channel.call("CommitLease", pb.CommitLeaseRequest(
            lease_id=lease_id, reservations=[reservation_to_pb(r) for r in reservations]),
            pb.CommitLeaseResponse)

    def release_lease(self, lease_id: str) -> None:
        """Give a lease back unused."""
        self.channel.call("ReleaseLease", pb.ReleaseLeaseRequest(lease_id=lease_id),
                          pb.ReleaseLeaseResponse)

    # -- job manager side -------------------------------------------------------------------------
    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> list[LaunchFailure]:
        """Start runs on a host; returns those it could not take."""
        specs, launches = launches_to_pb(tasks)
        reply = self.channel.call("Launch", pb.LaunchRequest(hostname=hostname, specs=specs,
                                                             tasks=launches), pb.LaunchResponse)
        return [launch_failure_from_pb(f) for f in reply.failures]

    def launch_hosts(self, launches: Mapping[str, Sequence[LaunchSpec]]
                     ) -> dict[str, list[LaunchFailure]]:
        """`launch` on many hosts, `HOSTS_PER_LAUNCH` hosts a call (one Launch per host to
        an older host manager); the failures by hostname."""
        out: dict[str, list[LaunchFailure]] = {}
        items = list(launches.items())
        done = 0
        while done < len(items) and not self._per_host_launch:
            chunk = items[done:done + HOSTS_PER_LAUNCH]
            request = hosts_request(pb.LaunchHostsRequest(), chunk)
            try:
                reply = self.channel.call("LaunchHosts", request, pb.LaunchHostsResponse)
            except Unimplemented:
                log.info("the host manager has no LaunchHosts; launching host by host")
                self._per_host_launch = True
                break
            for h in reply.hosts:
                out[h.hostname] = [launch_failure_from_pb(f) for f in h.failures]
            done += len(chunk)
        for hostname, tasks in items[done:]:
            failures = self.launch(hostname, tasks)
            if failures:
                out[hostname] = failures
        return out

    def kill(self, run_ids: Sequence[str], grace_secs: float = 5.0) -> None:
        """Stop runs wherever they are."""
        self.channel.call("Kill", pb.KillRequest(run_ids=list(run_ids), grace_secs=grace_secs),
                          pb.KillResponse)

    def destroy_volumes(self, hostname: str, volume_ids: Sequence[str]) -> list[str]:
        """Remove persistent volumes from a host; returns those still in use."""
        reply = self.channel.call("DestroyVolumes", pb.DestroyVolumesRequest(
            hostname=hostname, volume_ids=list(volume_ids)), pb.DestroyVolumesResponse)
        return list(reply.in_use)

    def adopt(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Runs known to be on `hostname` hold their resources again."""
        specs, launches = launches_to_pb(tasks)
        self.channel.call("Adopt", pb.AdoptRequest(hostname=hostname, specs=specs, tasks=launches),
                          pb.AdoptResponse)

    def adopt_hosts(self, runs: Mapping[str, Sequence[LaunchSpec]]) -> None:
        """`adopt` of many hosts in one call (one Adopt per host to an older host manager)."""
        if not self._per_host_adopt:
            request = hosts_request(pb.AdoptHostsRequest(), runs.items())
            try:
                self.channel.call("AdoptHosts", request, pb.AdoptResponse)
                return
            except Unimplemented:
                log.info("the host manager has no AdoptHosts; adopting host by host")
                self._per_host_adopt = True
        for hostname, tasks in runs.items():
            self.adopt(hostname, tasks)

    def reconcile(self, run_ids: Sequence[str] | None = None,
                  expected: Sequence[TaskState | None] | None = None) -> None:
        """Ask the hosts to re-report these runs (every run if None, as HostManager allows),
        those whose `expected` state is the last one heard left out (an older host manager
        ignores `expected` and re-reports every run)."""
        request = pb.ReconcileRequest(run_ids=list(run_ids or ()), all=run_ids is None)
        if expected is not None:
            request.expected.extend(s.value if s is not None else "" for s in expected)
        self.channel.call("Reconcile", request, pb.ReconcileResponse)

    def sandbox_files(self, hostname: str, run_id: str,
                      path: str = "") -> tuple[str, list[tuple[str, int]]]:
        """(file server address, [(file, size)]) of a run's sandbox."""
        reply = self.channel.call("SandboxFiles", pb.SandboxFilesRequest(
            hostname=hostname, run_id=run_id, path=path), pb.SandboxFilesResponse)
        return reply.address, [(f.name, f.size) for f in reply.files]

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Bytes of a file in a run's sandbox."""
        reply = self.channel.call("ReadSandbox", pb.ReadSandboxRequest(
            hostname=hostname, run_id=run_id, path=path, offset=offset, length=length),
            pb.ReadSandboxResponse)
        return bytes(reply.data)

    def subscribe(self, consumer: str) -> RemoteEventStream:
        """The status stream for `consumer` (connects on the first poll)."""
        return RemoteEventStream(self.channel, consumer)

    # -- cluster views --------------------------------------------------------------------------
    def cluster_capacity(self) -> tuple[Resources, float]:
        """Capacity of connected UP hosts, and slack cpu."""
        reply = self.channel.call("ClusterCapacity", pb.ClusterCapacityRequest(),
                                  pb.ClusterCapacityResponse)
        return resources_from_pb(reply.capacity), reply.slack_cpu

    def host_states(self) -> dict[str, HostState]:
        """Maintenance state of every known host."""
        reply = self.channel.call("HostStates", pb.HostStatesRequest(), pb.HostStatesResponse)
        return {name: enum_from_pb(HostState, state, "states")
                for name, state in reply.states.items()}

    def host_summaries(self) -> list[HostSummary]:
        """Every known host with capacity, allocation and connection."""
        reply = self.channel.call("HostSummaries", pb.HostSummariesRequest(),
                                  pb.HostSummariesResponse)
        return [summary_from_pb(h) for h in reply.hosts]

    def host_shapes(self) -> list[HostShape]:
        """What every known host could ever hold, sorted by hostname (from the summaries,
        for a host manager without HostShapes)."""
        if not self._shapes_from_summaries:
            try:
                reply = self.channel.call("HostShapes", pb.HostShapesRequest(),
                                          pb.HostShapesResponse)
            except Unimplemented:
                log.info("the host manager has no HostShapes; reading host summaries")
                self._shapes_from_summaries = True
            else:
                return shapes_from_pb(reply)
        return shapes_of(self.host_summaries())

    def draining_runs(self) -> list[tuple[str, str]]:
        """(hostname, run id) of every run on a DRAINING host."""
        reply = self.channel.call("DrainingRuns", pb.DrainingRunsRequest(),
                                  pb.DrainingRunsResponse)
        return [(r.hostname, r.run_id) for r in reply.runs]

    def drain_requests(self) -> dict[str, DrainRequest]:
        """How each DRAINING host is drained."""
        reply = self.channel.call("DrainRequests", pb.DrainRequestsRequest(),
                                  pb.DrainRequestsResponse)
        return {host: drain_from_pb(spec, "drains") for host, spec in reply.drains.items()}


#: The two requests that carry runs by host (launches and adoptions), filled the same way.
HostsRequest = TypeVar("HostsRequest", pb.LaunchHostsRequest, pb.AdoptHostsRequest)


def hosts_request(request: HostsRequest,
                  runs: Iterable[tuple[str, Sequence[LaunchSpec]]]) -> HostsRequest:
    """`request` filled with `runs` by hostname: one HostRuns per host, every run's task
    spec in one table the whole call shares (a job's runs share one spec object)."""
    table = SpecTable()
    for hostname, tasks in runs:
        request.hosts.add(hostname=hostname, tasks=launches_into_pb(tasks, table))
    request.specs.extend(table.messages)
    return request


def shapes_from_pb(reply: pb.HostShapesResponse) -> list[HostShape]:
    """A HostShapes reply -> shapes sorted by hostname (each group's values shared)."""
    out: list[HostShape] = []
    for group in reply.groups:
        capacity, labels = resources_from_pb(group.capacity), labels_from_pb(group.labels)
        out.extend(HostShape(name, capacity, labels, group.up) for name in group.hostnames)
    out.sort(key=lambda s: s.hostname)
    return out


class RemoteEventStream:
    """One consumer's `EventStream` over PollEvents/AckEvents; see the module docstring."""

    def __init__(self, channel: PeerChannel, consumer: str) -> None:
        self.consumer = consumer
        self._channel = channel
        self.stream_id = ""  # unknown until the first poll: that poll "subscribes"
        self._cursor = 0
        self._from = 0  # where the last poll read from (`rewind`)
        self._head = 0
        #: The partitions last asked for, encoded once until they change.
        self._asked: tuple[PartitionSet | None, bytes] = (None, b"")

    @property
    def position(self) -> int:
        """The offset of the last event the last poll returned or passed over."""
        return self._cursor

    @property
    def head(self) -> int:
        """The host manager's newest offset when the last poll answered."""
        return self._head

    def rewind(self) -> None:
        """The next poll reads again what the last one read (returned or passed over)."""
        self._cursor = self._from

    def poll(self, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> list[HostEvent]:
        """Events after `position` (oldest first), of jobs in `partitions` only (None:
        every event), waiting up to `timeout`."""
        deadline = time.monotonic() + timeout
        resets = 0
        while True:
            wait = max(0.0, deadline - time.monotonic())
            request = pb.PollEventsRequest(consumer=self.consumer, stream_id=self.stream_id,
                                           after=self._cursor, limit=limit, timeout=wait)
            if partitions is not None:
                request.partitions.MergeFromString(self._partitions_pb(partitions))
            reply = self._channel.call("PollEvents", request, pb.PollEventsResponse, wait=wait)
            if reply.stream_id != self.stream_id:
                if self.stream_id:
                    log.info("status stream of consumer %s: the host manager's stream changed "
                             "(%s -> %s); resuming after offset %d", self.consumer,
                             self.stream_id, reply.stream_id, reply.acknowledged)
                self.stream_id = reply.stream_id
                self._cursor = self._from = self._head = reply.acknowledged
                resets += 1
                if resets <= 2:  # read the new stream at once, with whatever wait is left
                    continue
                return []
            events = [event_from_pb(e) for e in reply.events]
            self._from = self._cursor
            if reply.position or not events:
                self._cursor = max(self._cursor, reply.position)
                self._head = max(reply.head, self._cursor)
            else:  # an older host manager: no position or head; a full batch may have more
                self._cursor = events[-1].offset
                self._head = self._cursor + (len(events) >= limit)
            return events

    def _partitions_pb(self, partitions: PartitionSet) -> bytes:
        """`partitions` encoded (once while they stay the same: they change only when a
        partition moves, and a member polls many times a second)."""
        asked, encoded = self._asked
        if asked != partitions:
            encoded = partitions_to_pb(partitions).SerializeToString()
            self._asked = (partitions, encoded)
        return encoded

    def acknowledge(self, offset: int) -> None:
        """Everything up to `offset` (of the stream last polled) is processed and persisted."""
        self._channel.call("AckEvents", pb.AckEventsRequest(
            consumer=self.consumer, stream_id=self.stream_id, offset=offset), pb.AckEventsResponse)
