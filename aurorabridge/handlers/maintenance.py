"""Host maintenance (AuroraAdmin): startMaintenance, drainHosts, slaDrainHosts, maintenanceStatus,
endMaintenance.

| Aurora mode | Peloton v0 host state |
|---|---|
| NONE | UP (or unknown to Peloton) |
| SCHEDULED | UP, and marked by startMaintenance in this bridge |
| DRAINING | DRAINING |
| DRAINED | DRAINED, DOWN |

Peloton has no "scheduled" stage: its StartMaintenance drains at once.  So
startMaintenance only marks hosts (in this bridge's memory; a restart
forgets the marks, the hosts stay usable either way).  endMaintenance works
in every mode, as Aurora's: it clears the marks and calls our
MaintenanceService.EndMaintenance for hosts Peloton has under maintenance,
which brings them UP at once even mid-drain (the drain stops; tasks not yet
moved keep running).  Peloton's v0 CompleteMaintenance would refuse a host
that is not DOWN yet.  Host names are checked against QueryHosts before
anything changes.

The drains go through our MaintenanceService (DrainHosts), which stores the
request with each host; the job manager moves the host's runs within it
(peloton/core/sla.py) and the host is DRAINED once empty:

* drainHosts is Aurora's forced drain (a zero-percent policy with no
  timeout): every task goes at once (DrainMode.FORCE);
* slaDrainHosts drains each task only while its job keeps its SLA: the
  task's own slaPolicy, else `defaultSlaPolicy`; after `timeoutSecs` the
  rest go anyway.  As Aurora's scheduler, jobs with fewer active instances
  than `sla_min_instances` (20) and non-production tasks (unless
  `sla_aware_kill_non_prod`) are not checked.  A coordinator policy as the
  default is refused (the bridge consults no coordinator); a task with a
  coordinator policy of its own waits for the timeout.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.atop.sla import policy
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.responses import ok
from aurorabridge.thrift_api import api
from aurorabridge.validation import check_sla_policy
from peloton.api.convert.ext_maintenance import policy_to_pb
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2 as mpb
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
    _known(names, _states(ctx))
    ctx.port.drain_hosts(names, mpb.DrainSpec(mode=mpb.DRAIN_MODE_FORCE))
    states = _states(ctx)
    return ok(api.Result(drainHostsResult=api.DrainHostsResult(statuses=_statuses(ctx, names, states))))


def sla_drain_hosts(ctx: BridgeContext, args: Any) -> Any:
    names = _hosts(args)
    default = args.defaultSlaPolicy
    if default is None:
        raise InvalidArgument("defaultSlaPolicy is required", field="defaultSlaPolicy")
    check_sla_policy(default, None, "defaultSlaPolicy")
    if default.coordinatorSlaPolicy is not None:
        raise InvalidArgument(
            "defaultSlaPolicy.coordinatorSlaPolicy is not supported: the Peloton Aurora bridge "
            "consults no coordinator; use percentageSlaPolicy or countSlaPolicy",
            field="defaultSlaPolicy.coordinatorSlaPolicy")
    timeout = args.timeoutSecs or 0  # unset is 0, as Aurora's i64: forced at the first look
    if timeout < 0:
        raise InvalidArgument(f"timeoutSecs must be >= 0, got {timeout}", field="timeoutSecs")
    _known(names, _states(ctx))
    chosen = policy(default)
    assert chosen is not None  # check_sla_policy made sure one is set
    spec = mpb.DrainSpec(mode=mpb.DRAIN_MODE_SLA_POLICY, default_policy=policy_to_pb(chosen),
                         timeout_secs=float(timeout),
                         min_required_instances=ctx.handlers.sla_min_instances,
                         check_non_production=ctx.handlers.sla_aware_kill_non_prod)
    ctx.port.drain_hosts(names, spec)
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
    under = [n for n in names if states[n] != host_pb2.HOST_STATE_UP]
    if under:
        ctx.port.end_maintenance(under)
    ctx.scheduled_hosts.difference_update(names)
    statuses = _statuses(ctx, names, _states(ctx))
    return ok(api.Result(endMaintenanceResult=api.EndMaintenanceResult(statuses=statuses)))


HANDLERS: dict[str, HandlerFn] = {
    "startMaintenance": start_maintenance,
    "drainHosts": drain_hosts,
    "slaDrainHosts": sla_drain_hosts,
    "maintenanceStatus": maintenance_status,
    "endMaintenance": end_maintenance,
}
