"""Drain requests <-> our maintenance extension messages (pelotonpy.api.maintenance)."""

from __future__ import annotations

from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2 as pb
from peloton.core.errors import InvalidArgument
from peloton.core.model.host import HostInfo
from peloton.core.model.sla_policy import (
    CoordinatorSla,
    CountSla,
    DrainMode,
    DrainRequest,
    MaxUnavailable,
    PercentageSla,
    SlaPolicy,
)

_MODES = {pb.DRAIN_MODE_JOB_SLA: DrainMode.JOB_SLA, pb.DRAIN_MODE_SLA_POLICY: DrainMode.SLA_POLICY,
          pb.DRAIN_MODE_FORCE: DrainMode.FORCE}
_MODE_TO_PB = {mode: value for value, mode in _MODES.items()}


def policy_to_pb(policy: SlaPolicy) -> pb.SlaPolicy:
    """A core policy as SlaPolicy."""
    if isinstance(policy, PercentageSla):
        return pb.SlaPolicy(percentage=pb.PercentageSlaPolicy(
            percentage=policy.percentage, duration_secs=policy.duration_secs))
    if isinstance(policy, CountSla):
        return pb.SlaPolicy(count=pb.CountSlaPolicy(count=policy.count,
                                                    duration_secs=policy.duration_secs))
    if isinstance(policy, CoordinatorSla):
        return pb.SlaPolicy(coordinator=pb.CoordinatorSlaPolicy(
            coordinator_url=policy.url, status_key=policy.status_key))
    return pb.SlaPolicy(max_unavailable=pb.MaxUnavailablePolicy(count=policy.count))


def policy_from_pb(msg: pb.SlaPolicy, field: str) -> SlaPolicy | None:
    """SlaPolicy as a core policy (None when no policy is set)."""
    kind = msg.WhichOneof("policy")
    if kind == "percentage":
        return PercentageSla(msg.percentage.percentage, msg.percentage.duration_secs)
    if kind == "count":
        return CountSla(msg.count.count, msg.count.duration_secs)
    if kind == "coordinator":
        return CoordinatorSla(msg.coordinator.coordinator_url,
                              msg.coordinator.status_key or "drain")
    if kind == "max_unavailable":
        return MaxUnavailable(msg.max_unavailable.count)
    return None


def drain_to_pb(req: DrainRequest) -> pb.DrainSpec:
    """A core drain request as DrainSpec."""
    spec = pb.DrainSpec(mode=_MODE_TO_PB[req.mode],
                        min_required_instances=req.min_required_instances,
                        check_non_production=req.check_non_production,
                        started_ms=round(req.started_at * 1000))
    if req.default_policy is not None:
        spec.default_policy.CopyFrom(policy_to_pb(req.default_policy))
    if req.timeout_secs is not None:
        spec.timeout_secs = req.timeout_secs
    return spec


def drain_from_pb(spec: pb.DrainSpec, field: str = "drain") -> DrainRequest:
    """DrainSpec as a core drain request (InvalidArgument naming the field for an unknown mode)."""
    mode = _MODES.get(spec.mode)
    if mode is None:
        raise InvalidArgument(f"{field}.mode: unknown drain mode {spec.mode}", field=f"{field}.mode")
    return DrainRequest(
        mode=mode,
        default_policy=policy_from_pb(spec.default_policy, f"{field}.default_policy")
        if spec.HasField("default_policy") else None,
        timeout_secs=spec.timeout_secs if spec.HasField("timeout_secs") else None,
        started_at=spec.started_ms / 1000.0,
        min_required_instances=spec.min_required_instances,
        check_non_production=spec.check_non_production)


def host_drain_to_pb(info: HostInfo) -> pb.HostDrain:
    """A host's maintenance record as HostDrain."""
    out = pb.HostDrain(hostname=info.hostname, state=f"HOST_STATE_{info.state.value}")
    if info.drain is not None:
        out.drain.CopyFrom(drain_to_pb(info.drain))
    return out
