"""The v0 HostService over gRPC: QueryHosts, StartMaintenance, CompleteMaintenance.

Host pool methods are not defined here, so `service_registry.register` answers them
UNIMPLEMENTED (host pools are off by default in Peloton too).  Errors are raised as our
error tree and mapped to status codes once, by the registry's wrapper: an unknown host is
NOT_FOUND, completing maintenance on a host that is not DOWN is FAILED_PRECONDITION, a
request naming no host is INVALID_ARGUMENT.

Both request shapes are served: `hostname` (field 2), and the deprecated repeated
`hostnames` (field 1) that older CLIs send; for the latter every name is checked before
any host is changed, and the response's `hostname` is left empty, as Peloton does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from peloton.api.convert.ext_capacity import host_capacities_to_pb
from peloton.api.convert.v0_host import host_info_to_v0, host_state_from_v0
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2, host_svc_pb2_grpc
from peloton.api.gen.pelotonpy.ext import capacity_pb2_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.service_registry import register
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.host import HostInfo
from peloton.core.model.resources import Resources
from peloton.core.ports import HostSummary
from peloton.core.states import HostState


class HostAdmin(Protocol):
    """What the servicer needs of the host manager."""

    def query_hosts(self, states: Sequence[HostState] = ()) -> list[HostInfo]:
        """Known hosts, optionally only those in `states`."""
        ...

    def host_known(self, hostname: str) -> bool:
        """The host manager knows this host."""
        ...

    def start_maintenance(self, hostname: str) -> HostInfo:
        """Drain a host and take it DOWN."""
        ...

    def complete_maintenance(self, hostname: str) -> HostInfo:
        """Bring a DOWN host back UP."""
        ...

    def host_summaries(self) -> list[HostSummary]:
        """Every known host with capacity, allocation and run count."""
        ...

    def cluster_capacity(self) -> tuple[Resources, float]:
        """Capacity of connected UP hosts, and their slack cpu."""
        ...


class HostServiceServicer(host_svc_pb2_grpc.HostServiceServicer):  # type: ignore[misc]
    """peloton.api.v0.host.svc.HostService; see the module docstring."""

    def __init__(self, admin: HostAdmin) -> None:
        self._admin = admin

    def QueryHosts(self, request: Any, context: Any) -> Any:
        states = [host_state_from_v0(s, "host_states") for s in request.host_states]
        infos = self._admin.query_hosts(states)
        return host_svc_pb2.QueryHostsResponse(host_infos=[host_info_to_v0(i) for i in infos])

    def StartMaintenance(self, request: Any, context: Any) -> Any:
        names = self._names(request)
        for name in names:
            self._admin.start_maintenance(name)
        return host_svc_pb2.StartMaintenanceResponse(hostname=request.hostname if not
                                                     request.hostnames else "")

    def CompleteMaintenance(self, request: Any, context: Any) -> Any:
        names = self._names(request)
        for name in names:
            self._admin.complete_maintenance(name)
        return host_svc_pb2.CompleteMaintenanceResponse(hostname=request.hostname if not
                                                        request.hostnames else "")

    def _names(self, request: Any) -> list[str]:
        """The hosts a maintenance request names (deprecated list first, as Peloton reads it)."""
        names = [n for n in request.hostnames] if request.hostnames else [request.hostname]
        if not all(names):
            raise InvalidArgument("hostname is required", field="hostname")
        unknown = [n for n in names if not self._admin.host_known(n)]
        if unknown:
            raise NotFound(f"unknown host(s): {', '.join(unknown)}", field="hostname")
        return names


class HostCapacityServicer(capacity_pb2_grpc.HostCapacityServiceServicer):  # type: ignore[misc]
    """pelotonpy.ext.capacity.HostCapacityService: what every host holds and has free."""

    def __init__(self, admin: HostAdmin) -> None:
        self._admin = admin

    def ListHostCapacity(self, request: Any, context: Any) -> Any:
        capacity, _ = self._admin.cluster_capacity()
        return host_capacities_to_pb(self._admin.host_summaries(), capacity)


def serve_host_service(server: ServiceHost, admin: HostAdmin) -> str:
    """Register the v0 HostService (and our capacity extension) on `server` (before it
    starts); returns the v0 service name."""
    register(server, capacity_pb2_grpc.add_HostCapacityServiceServicer_to_server,
             HostCapacityServicer(admin))
    return register(server, host_svc_pb2_grpc.add_HostServiceServicer_to_server,
                    HostServiceServicer(admin))
