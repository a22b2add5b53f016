"""The maintenance half of the typed client: pelotonpy.api.maintenance.MaintenanceService on
the host manager (our extension: SLA-aware and forced drains, proto/pelotonpy/api/maintenance).

Peloton's own drain is `start_maintenance` (v0 HostService).  Failures come as gRPC status
codes (NotFound naming the unknown hosts, InvalidArgument naming the field), raised as
peloton.core.errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from peloton.api.client_transport import ServiceHandle
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2 as pb


class MaintenanceCalls:
    """Methods of MaintenanceService."""

    _maintenance: ServiceHandle

    def drain_hosts(self, hostnames: Sequence[str], drain: pb.DrainSpec) -> list[pb.HostDrain]:
        """Drain hosts as `drain` says (all or nothing); each host's record afterwards."""
        req = pb.DrainHostsRequest(hostnames=list(hostnames), drain=drain)
        return list(self._maintenance.call("DrainHosts", req, pb.DrainHostsResponse).hosts)

    def end_maintenance(self, hostnames: Sequence[str]) -> list[pb.HostDrain]:
        """Bring hosts back UP from any maintenance state, stopping drains in progress (all or
        nothing); each host's record afterwards."""
        req = pb.EndMaintenanceRequest(hostnames=list(hostnames))
        return list(self._maintenance.call("EndMaintenance", req,
                                           pb.EndMaintenanceResponse).hosts)

    def list_host_drains(self) -> list[pb.HostDrain]:
        """Every host under maintenance with how it is drained, sorted by hostname."""
        return list(self._maintenance.call("ListHostDrains", pb.ListHostDrainsRequest(),
                                           pb.ListHostDrainsResponse).hosts)
