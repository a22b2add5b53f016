"""The v0 HostService over gRPC: QueryHosts, StartMaintenance, CompleteMaintenance; and our
extensions: HostCapacityService (capacity) and MaintenanceService (SLA-aware and forced drains).

Host pools are not supported: their methods answer as Peloton's with host pools off (its
default): UNIMPLEMENTED "host pools not enabled".  Errors are Peloton's
(pkg/hostmgr/hostsvc/handler.go and its drainer): starting maintenance on a host that is
not an agent is ABORTED "host is not a Peloton agent"; completing it on an unknown host
is NOT_FOUND "host info not found <host>", on a host that is not DOWN NOT_FOUND "Host is
not DOWN".

Both request shapes are served: `hostname` (field 2), and the deprecated repeated
`hostnames` (field 1) that older CLIs send; for the latter each host is acted on in turn
and the failures are answered together as INTERNAL with Go's multierr text, the response's
`hostname` left empty, as Peloton does.

MaintenanceService.DrainHosts checks every host and the request before it changes anything
(NOT_FOUND naming the unknown hosts, INVALID_ARGUMENT naming the field), then starts
maintenance on each host with the request (proto/pelotonpy/api/maintenance).
MaintenanceService.EndMaintenance checks the hosts the same way, then brings each back UP
from whatever state it is in (Aurora's endMaintenance; v0 CompleteMaintenance keeps
Peloton's rule, DOWN hosts only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import grpc

from peloton.api import peloton_texts as texts
from peloton.api.convert.ext_capacity import host_capacities_to_pb
from peloton.api.convert.ext_maintenance import drain_from_pb, host_drain_to_pb
from peloton.api.convert.v0_host import host_info_to_v0, host_state_from_v0
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2, host_svc_pb2_grpc
from peloton.api.gen.peloton.private.hostmgr.hostsvc import hostsvc_pb2_grpc
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2, maintenance_pb2_grpc
from peloton.api.gen.pelotonpy.ext import capacity_pb2_grpc
from peloton.api.grpc_errors import PelotonStatus
from peloton.api.grpc_server import ServiceHost
from peloton.api.service_registry import register
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.host import HostInfo
from peloton.core.model.resources import Resources
from peloton.core.model.sla_policy import DrainRequest
from peloton.core.ports import HostSummary
from peloton.core.sla import check_drain_request
from peloton.core.states import HostState
from peloton.hostmgr.private_queries import InternalHostServiceServicer


class HostAdmin(Protocol):
    """What the servicer needs of the host manager."""

    def query_hosts(self, states: Sequence[HostState] = ()) -> list[HostInfo]:
        """Known hosts, optionally only those in `states`."""
        ...

    def host_known(self, hostname: str) -> bool:
        """The host manager knows this host."""
        ...

    def start_maintenance(self, hostname: str, drain: DrainRequest | None = None) -> HostInfo:
        """Drain a host (as `drain` says, else within each job's SLA) and take it DOWN."""
        ...

    def complete_maintenance(self, hostname: str) -> HostInfo:
        """Bring a DOWN host back UP."""
        ...

    def end_maintenance(self, hostname: str) -> HostInfo:
        """Bring a host back UP from any maintenance state, stopping a drain in progress."""
        ...

    def host_summaries(self) -> list[HostSummary]:
        """Every known host with capacity, allocation and run count."""
        ...

    def cluster_capacity(self) -> tuple[Resources, float]:
        """Capacity of connected UP hosts, and their slack cpu."""
        ...

    def leased_hosts(self) -> set[str]:
        """Hosts a placement engine holds a lease on now."""
        ...


class HostServiceServicer(host_svc_pb2_grpc.HostServiceServicer):  # type: ignore[misc]
    """peloton.api.v0.host.svc.HostService; see the module docstring."""

    #: Served only to answer as Peloton with host pools off (scripts/compat_table.py).
    UNIMPLEMENTED_AS_PELOTON = ("ListHostPools", "CreateHostPool", "DeleteHostPool",
                                "ChangeHostPool", "MoveHosts")

    def __init__(self, admin: HostAdmin) -> None:
        self._admin = admin

    def QueryHosts(self, request: Any, context: Any) -> Any:
        states = [host_state_from_v0(s, "host_states") for s in request.host_states]
        infos = self._admin.query_hosts(states)
        return host_svc_pb2.QueryHostsResponse(host_infos=[host_info_to_v0(i) for i in infos])

    def StartMaintenance(self, request: Any, context: Any) -> Any:
        self._each(request, self._start, "aborted")
        return host_svc_pb2.StartMaintenanceResponse(hostname=request.hostname if not
                                                     request.hostnames else "")

    def CompleteMaintenance(self, request: Any, context: Any) -> Any:
        self._each(request, self._complete, "not-found")
        return host_svc_pb2.CompleteMaintenanceResponse(hostname=request.hostname if not
                                                        request.hostnames else "")

    def _start(self, hostname: str) -> PelotonStatus | None:
        if not hostname or not self._admin.host_known(hostname):
            return PelotonStatus(grpc.StatusCode.ABORTED, texts.NOT_A_PELOTON_AGENT)
        self._admin.start_maintenance(hostname)
        return None

    def _complete(self, hostname: str) -> PelotonStatus | None:
        if not hostname or not self._admin.host_known(hostname):
            return PelotonStatus(grpc.StatusCode.NOT_FOUND, texts.host_info_not_found(hostname))
        state = next((i.state for i in self._admin.query_hosts() if i.hostname == hostname),
                     HostState.UP)
        if state is not HostState.DOWN:
            return PelotonStatus(grpc.StatusCode.NOT_FOUND, texts.HOST_NOT_DOWN)
        self._admin.complete_maintenance(hostname)
        return None

    def ListHostPools(self, request: Any, context: Any) -> Any:
        raise _no_host_pools()

    def CreateHostPool(self, request: Any, context: Any) -> Any:
        raise _no_host_pools()

    def DeleteHostPool(self, request: Any, context: Any) -> Any:
        raise _no_host_pools()

    def ChangeHostPool(self, request: Any, context: Any) -> Any:
        raise _no_host_pools()

    def MoveHosts(self, request: Any, context: Any) -> Any:
        raise _no_host_pools()

    @staticmethod
    def _each(request: Any, act: Any, code_text: str) -> None:
        """Act on the request's host(s) as Peloton does (see the module docstring)."""
        if not request.hostnames:
            failure = act(request.hostname)
            if failure is not None:
                raise failure
            return
        failures = [f for f in (act(name) for name in request.hostnames) if f is not None]
        if failures:
            raise PelotonStatus(grpc.StatusCode.INTERNAL, texts.multierr_text(
                [texts.yarpc_text(_yarpc_code(f.code), f.message) for f in failures]))


def _no_host_pools() -> PelotonStatus:
    """Peloton's answer to every host pool method when its host pool manager is off."""
    return PelotonStatus(grpc.StatusCode.UNIMPLEMENTED, texts.HOST_POOLS_OFF)


def _yarpc_code(code: grpc.StatusCode) -> str:
    """YARPC's name of a status code (NOT_FOUND -> not-found)."""
    return str(code.name).lower().replace("_", "-")


class HostCapacityServicer(capacity_pb2_grpc.HostCapacityServiceServicer):  # type: ignore[misc]
    """pelotonpy.ext.capacity.HostCapacityService: what every host holds and has free."""

    def __init__(self, admin: HostAdmin) -> None:
        self._admin = admin

    def ListHostCapacity(self, request: Any, context: Any) -> Any:
        capacity, _ = self._admin.cluster_capacity()
        return host_capacities_to_pb(self._admin.host_summaries(), capacity)


class MaintenanceServicer(maintenance_pb2_grpc.MaintenanceServiceServicer):  # type: ignore[misc]
    """pelotonpy.api.maintenance.MaintenanceService: drains with an SLA policy, or forced."""

    def __init__(self, admin: HostAdmin) -> None:
        self._admin = admin

    def DrainHosts(self, request: Any, context: Any) -> Any:
        names = list(dict.fromkeys(request.hostnames))
        if not names or not all(names):
            raise InvalidArgument("name at least one host, with non-empty names",
                                  field="hostnames")
        drain = drain_from_pb(request.drain)
        check_drain_request(drain)
        self._check_known(names)
        infos = [self._admin.start_maintenance(n, drain) for n in names]
        return maintenance_pb2.DrainHostsResponse(hosts=[host_drain_to_pb(i) for i in infos])

    def EndMaintenance(self, request: Any, context: Any) -> Any:
        names = list(dict.fromkeys(request.hostnames))
        if not names or not all(names):
            raise InvalidArgument("name at least one host, with non-empty names",
                                  field="hostnames")
        self._check_known(names)
        infos = [self._admin.end_maintenance(n) for n in names]
        return maintenance_pb2.EndMaintenanceResponse(hosts=[host_drain_to_pb(i) for i in infos])

    def _check_known(self, names: list[str]) -> None:
        unknown = [n for n in names if not self._admin.host_known(n)]
        if unknown:
            raise NotFound(f"hosts not known to the host manager: {', '.join(unknown)}",
                           field="hostnames")

    def ListHostDrains(self, request: Any, context: Any) -> Any:
        infos = [i for i in self._admin.query_hosts()
                 if i.goal_state is HostState.DOWN or i.state is not HostState.UP]
        return maintenance_pb2.ListHostDrainsResponse(hosts=[host_drain_to_pb(i) for i in infos])


def serve_host_service(server: ServiceHost, admin: HostAdmin) -> str:
    """Register the v0 HostService (and our capacity and maintenance extensions) on `server`
    (before it starts); returns the v0 service name."""
    register(server, capacity_pb2_grpc.add_HostCapacityServiceServicer_to_server,
             HostCapacityServicer(admin))
    # Peloton's private queries its tools use (ClusterCapacity, GetHostsByQuery).
    register(server, hostsvc_pb2_grpc.add_InternalHostServiceServicer_to_server,
             InternalHostServiceServicer(admin))
    register(server, maintenance_pb2_grpc.add_MaintenanceServiceServicer_to_server,
             MaintenanceServicer(admin))
    return register(server, host_svc_pb2_grpc.add_HostServiceServicer_to_server,
                    HostServiceServicer(admin))
