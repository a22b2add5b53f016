"""Host maintenance (AuroraAdmin): startMaintenance, drainHosts, maintenanceStatus, endMaintenance.

| Aurora mode | Peloton v0 host state |
|---|---|
| NONE | UP (or unknown to Peloton) |
| SCHEDULED | UP, and marked by startMaintenance in this bridge |
| DRAINING | DRAINING |
| DRAINED | DRAINED, DOWN |

Peloton has no "scheduled" stage: its StartMaintenance drains at once.  So
startMaintenance only marks hosts (in this bridge's memory; a restart
forgets the marks, the hosts stay usable either way), drainHosts calls
HostService.StartMaintenance, and endMaintenance calls CompleteMaintenance
for hosts Peloton is draining or has drained and clears the marks.  Host
names are checked against QueryHosts before anything changes.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.responses import ok
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.core.errors import InvalidArgument

_M = api.MaintenanceMode
_MODES: dict[int, int] = {host_pb2.HOST_STATE_DRAINING: _M.DRAINING, host_pb2.HOST_STATE_DRAINED: _M.DRAINED,
          host_pb2.HOST_STATE_DOWN: _M.DRAINED}


def _hosts(args: Any) -> list[str]:
    hosts = args.hosts.hostNames if args.hosts is not None else None
    names = sorted(set(hosts or ()))
    if not names or not all(isinstance(h, str) and h for h in names):
        raise InvalidArgument("name at least one host, with non-empty names", field="hosts")
    return names


def _states(ctx: BridgeContext) -> dict[str, int]:
    resp = ctx.port.query_hosts()
    return {h.hostname: h.state for h in resp.host_infos}


def _statuses(ctx: BridgeContext, names: list[str], states: dict[str, int]) -> list[Any]:
    def mode(name: str) -> int:
        state = states.get(name)
        if state in _MODES:
            return int(_MODES[state])
        return int(_M.SCHEDULED if name in ctx.scheduled_hosts else _M.NONE)

    return [api.HostStatus(host=n, mode=mode(n)) for n in names]


def _known(names: list[str], states: dict[str, int]) -> None:
    unknown = [n for n in names if n not in states]
    if unknown:
        raise InvalidArgument(f"unknown hosts: {', '.join(unknown)}", field="hosts")


def start_maintenance(ctx: BridgeContext, args: Any) -> Any:
    names = _hosts(args)
    states = _states(ctx)
    _known(names, states)
    ctx.scheduled_hosts.update(names)
    statuses = _statuses(ctx, names, states)
    return ok(api.Result(startMaintenanceResult=api.StartMaintenanceResult(statuses=statuses)))


def drain_hosts(ctx: BridgeContext, args: Any) -> Any:
    names = _hosts(args)
    states = _states(ctx)
    _known(names, states)
    for name in names:
        if states[name] == host_pb2.HOST_STATE_UP:
            ctx.port.start_maintenance(name)
    states = _states(ctx)
    return ok(api.Result(drainHostsResult=api.DrainHostsResult(statuses=_statuses(ctx, names, states))))


def maintenance_status(ctx: BridgeContext, args: Any) -> Any:
    names = _hosts(args)
    statuses = _statuses(ctx, names, _states(ctx))
    return ok(api.Result(maintenanceStatusResult=api.MaintenanceStatusResult(statuses=statuses)))


def end_maintenance(ctx: BridgeContext, args: Any) -> Any:
    names = _hosts(args)
    states = _states(ctx)
    _known(names, states)
    for name in names:
        if states[name] in _MODES:
            ctx.port.complete_maintenance(name)
        ctx.scheduled_hosts.discard(name)
    statuses = _statuses(ctx, names, _states(ctx))
    return ok(api.Result(endMaintenanceResult=api.EndMaintenanceResult(statuses=statuses)))


HANDLERS: dict[str, HandlerFn] = {
    "startMaintenance": start_maintenance,
    "drainHosts": drain_hosts,
    "maintenanceStatus": maintenance_status,
    "endMaintenance": end_maintenance,
}
