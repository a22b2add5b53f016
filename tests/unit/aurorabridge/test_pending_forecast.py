"""getPendingReason carries the forecast, so unchanged Aurora clients see when a task is
expected to start, what binds it, and what would start it sooner."""

from __future__ import annotations

from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.forecast.model import (
    Binding,
    BindingKind,
    Bounds,
    Counterfactual,
    CounterfactualKind,
    Estimate,
    Forecast,
)
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.conftest import Call, messages

OK = api.ResponseCode.OK


def pending_job(call: Call, fake: FakePeloton) -> str:
    resp = call("startJobUpdate", request=b.update_request(b.task_config(), 2), message="")
    assert resp.responseCode == OK, messages(resp)
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.set_pod(job_id, 1, pod_pb2.POD_STATE_PENDING, message="waiting for admission in /b")
    return job_id


def reasons(call: Call) -> list[str]:
    got = call("getPendingReason", query=api.TaskQuery(role="www"))
    assert got.responseCode == OK, messages(got)
    return [r.reason for r in got.result.getPendingReasonResult.reasons]


def test_the_reason_carries_the_estimate_the_binding_and_the_best_change(
        call: Call, fake: FakePeloton) -> None:
    job_id = pending_job(call, fake)
    fake.forecasts[job_id] = Forecast(
        job_id=job_id, instances=(1,), now=0.0,
        estimate=Estimate(p50=200.0, p90=260.0, runs=5, started=5),
        binding=Binding(BindingKind.ENTITLEMENT, "pool /b is at its entitlement (share 1)"),
        counterfactuals=(
            Counterfactual(CounterfactualKind.SMALLER_RESOURCES, "half the resources", None),
            Counterfactual(CounterfactualKind.RESERVATION, "+6 cpu reservation on pool /b",
                           Estimate(p50=0.0, p90=0.0, runs=5, started=5)),
            Counterfactual(CounterfactualKind.ADD_HOSTS, "1 host added",
                           Estimate(p50=300.0, p90=300.0, runs=5, started=5))),
        bounds=Bounds(horizon=86400.0, wall=2.0, variations=5))
    assert reasons(call) == [
        "waiting for admission in /b | forecast: expected to start 3m20s (p50) to 4m20s (p90); "
        "pool /b is at its entitlement (share 1); sooner with +6 cpu reservation on pool /b "
        "(now) [forecast: 1d00h horizon, 2 s wall cap]"]
    asked = fake.calls_of("forecast")[-1]
    assert (asked["job_id"], asked["instances"], asked["wall_secs"]) == (job_id, [1], 2.0)


def test_without_a_forecast_the_reason_is_peloton_s_alone(call: Call, fake: FakePeloton) -> None:
    pending_job(call, fake)  # the fake answers Unavailable: a cluster without the service
    assert reasons(call) == ["waiting for admission in /b"]
    assert len(fake.calls_of("forecast")) == 1
