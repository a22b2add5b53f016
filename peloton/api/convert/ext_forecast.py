"""Forecasts <-> our forecast extension messages (pelotonpy.api.forecast), both ways: the
resource manager sends a core `Forecast`, clients (CLI, UI, Aurora bridge) get one back."""

from __future__ import annotations

from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2 as pb
from peloton.core.errors import InvalidArgument
from peloton.core.forecast.model import (
    Binding,
    BindingKind,
    Bounds,
    Counterfactual,
    CounterfactualKind,
    Estimate,
    Forecast,
)


def estimate_to_pb(est: Estimate) -> pb.Estimate:
    """An estimate (None times as unset)."""
    return pb.Estimate(has_p50=est.p50 is not None, p50_secs=est.p50 or 0.0,
                       has_p90=est.p90 is not None, p90_secs=est.p90 or 0.0,
                       runs=est.runs, started=est.started)


def estimate_from_pb(msg: pb.Estimate) -> Estimate:
    """The core estimate of a message."""
    return Estimate(p50=msg.p50_secs if msg.has_p50 else None,
                    p90=msg.p90_secs if msg.has_p90 else None, runs=msg.runs,
                    started=msg.started)


def forecast_to_pb(f: Forecast) -> pb.ForecastResponse:
    """A forecast as ForecastResponse."""
    b = f.binding
    return pb.ForecastResponse(
        job_id=f.job_id, instances=list(f.instances), now=f.now,
        estimate=estimate_to_pb(f.estimate),
        binding=pb.Binding(kind=b.kind.value, summary=b.summary,
                           queue_position=b.queue_position, queue_length=b.queue_length,
                           hosts_fit=b.hosts_fit, hosts_total=b.hosts_total,
                           rejections=[pb.Rejection(reason=r, hosts=n) for r, n in b.rejections],
                           scheduler_reason=b.scheduler_reason),
        counterfactuals=[pb.Counterfactual(
            kind=c.kind.value, change=c.change,
            estimate=estimate_to_pb(c.estimate) if c.estimate is not None else None)
            for c in f.counterfactuals],
        horizon_secs=f.bounds.horizon, wall_cap_secs=f.bounds.wall,
        variations=f.bounds.variations, wall_secs=f.wall_secs, truncated=f.truncated,
        notes=list(f.notes))


def forecast_from_pb(msg: pb.ForecastResponse) -> Forecast:
    """The core forecast of a ForecastResponse (InvalidArgument on an unknown kind)."""
    try:
        kind = BindingKind(msg.binding.kind)
        counterfactuals = tuple(Counterfactual(
            CounterfactualKind(c.kind), c.change,
            estimate_from_pb(c.estimate) if c.HasField("estimate") else None)
            for c in msg.counterfactuals)
    except ValueError as exc:
        raise InvalidArgument(f"unknown forecast kind: {exc}", field="kind") from None
    b = msg.binding
    return Forecast(
        job_id=msg.job_id, instances=tuple(msg.instances), now=msg.now,
        estimate=estimate_from_pb(msg.estimate),
        binding=Binding(kind=kind, summary=b.summary, queue_position=b.queue_position,
                        queue_length=b.queue_length, hosts_fit=b.hosts_fit,
                        hosts_total=b.hosts_total,
                        rejections=tuple((r.reason, r.hosts) for r in b.rejections),
                        scheduler_reason=b.scheduler_reason),
        counterfactuals=counterfactuals,
        bounds=Bounds(horizon=msg.horizon_secs, wall=msg.wall_cap_secs,
                      variations=msg.variations),
        wall_secs=msg.wall_secs, truncated=msg.truncated, notes=tuple(msg.notes))
