"""Peloton's private host-manager queries, for the original Peloton tools that ask them.

`peloton.private.hostmgr.hostsvc.InternalHostService`, only its two read-only queries
(proto/peloton/private/hostmgr/hostsvc/hostsvc.proto; wire checked against Peloton's in
tests/wire); every other method of Peloton's service answers UNIMPLEMENTED.  Answers
follow Peloton's pkg/hostmgr/handler.go:

* ClusterCapacity: `resources` what runs hold, `physicalResources` what connected UP
  hosts have, `allocatedSlackResources` / `physicalSlackResources` the revocable cpu held
  and offered; each a list of cpu, disk, gpu, memory (Peloton's kinds and order).  No
  connected host is `error.clusterUnavailable` "error getting host agentmap".
* GetHostsByQuery: the connected hosts not DOWN (optionally only `hostnames`) whose free
  resources are at least (`cmpLess`: below) every non-zero threshold of `resource`
  (Peloton's scalar Compare), with what they have free as Mesos resources (cpus, mem,
  disk, gpus; with `includeRevocable` the free slack cpu too, marked revocable), their
  status and their runs.  Status is "ready" or, while the placement engine holds the host,
  "placing"; hosts are never "reserved" or "held" here (no host reservations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from peloton.api.gen.mesos.v1 import mesos_pb2
from peloton.api.gen.peloton.private.hostmgr.hostsvc import hostsvc_pb2 as pb
from peloton.api.gen.peloton.private.hostmgr.hostsvc import hostsvc_pb2_grpc as pb_grpc
from peloton.core.model.resources import Resources
from peloton.core.ports import HostSummary
from peloton.core.states import HostState

#: Peloton's text when its agent map is empty.
NO_AGENTS = "error getting host agentmap"


class HostQueries(Protocol):
    """What the queries need of the host manager."""

    def host_summaries(self) -> list[HostSummary]:
        """Every known host with capacity, allocation and runs."""
        ...

    def cluster_capacity(self) -> tuple[Resources, float]:
        """Capacity of connected UP hosts, and their slack cpu."""
        ...

    def leased_hosts(self) -> set[str]:
        """Hosts a placement engine holds a lease on now."""
        ...


def _kinds(r: Resources) -> list[pb.Resource]:
    return [pb.Resource(kind="cpu", capacity=r.cpu), pb.Resource(kind="disk", capacity=r.disk_mb),
            pb.Resource(kind="gpu", capacity=r.gpu), pb.Resource(kind="memory", capacity=r.mem_mb)]


def _scalar(name: str, value: float, revocable: bool = False) -> mesos_pb2.Resource:
    out = mesos_pb2.Resource(name=name, type=mesos_pb2.Value.SCALAR, role="*",
                             scalar=mesos_pb2.Value.Scalar(value=value))
    if revocable:
        out.revocable.SetInParent()
    return out


def _at_least(free: Resources, limit: Any, less: bool) -> bool:
    """Peloton's scalar Resources.Compare: every non-zero threshold is met (or, with
    `less`, every one is undercut)."""
    for have, want in ((free.cpu, limit.cpuLimit), (free.mem_mb, limit.memLimitMb),
                       (free.gpu, limit.gpuLimit), (free.disk_mb, limit.diskLimitMb)):
        if want > 0 and (have < want) != less:
            return False
    return True


class InternalHostServiceServicer(pb_grpc.InternalHostServiceServicer):  # type: ignore[misc]
    """ClusterCapacity and GetHostsByQuery of Peloton's private host service."""

    def __init__(self, hosts: HostQueries) -> None:
        self._hosts = hosts

    def ClusterCapacity(self, request: Any, context: Any) -> pb.ClusterCapacityResponse:
        summaries = [s for s in self._hosts.host_summaries() if s.connected]
        out = pb.ClusterCapacityResponse()
        if not summaries:
            out.error.clusterUnavailable.message = NO_AGENTS
            return out
        capacity, slack = self._hosts.cluster_capacity()
        held, slack_held = Resources(), 0.0
        for s in summaries:
            held = held + s.allocated - Resources(cpu=s.slack_allocated_cpu)
            slack_held += s.slack_allocated_cpu
        out.resources.extend(_kinds(held))
        out.physicalResources.extend(_kinds(capacity))
        out.allocatedSlackResources.extend(_kinds(Resources(cpu=slack_held)))
        out.physicalSlackResources.extend(_kinds(Resources(cpu=slack)))
        return out

    def GetHostsByQuery(self, request: Any, context: Any) -> pb.GetHostsByQueryResponse:
        wanted = set(request.hostnames)
        placing = self._hosts.leased_hosts()
        out = pb.GetHostsByQueryResponse()
        for s in self._hosts.host_summaries():
            name = s.info.hostname
            if not s.connected or s.info.state is HostState.DOWN or (wanted and name not in wanted):
                continue
            regular = s.capacity - (s.allocated - Resources(cpu=s.slack_allocated_cpu))
            spare_slack = max(0.0, s.slack_cpu - s.slack_allocated_cpu)
            free = regular + Resources(cpu=spare_slack) if request.includeRevocable else regular
            if not _at_least(free, request.resource, request.cmpLess):
                continue
            host = out.hosts.add(hostname=name, status="placing" if name in placing else "ready")
            host.resources.extend(_resources(regular))
            if request.includeRevocable and spare_slack > 0:
                host.resources.append(_scalar("cpus", spare_slack, revocable=True))
            for run in s.runs:
                host.tasks.add(value=run)
        return out


def _resources(free: Resources) -> Sequence[mesos_pb2.Resource]:
    return [_scalar(name, value) for name, value in (
        ("cpus", free.cpu), ("mem", free.mem_mb), ("disk", free.disk_mb), ("gpus", free.gpu))
        if value > 0]
