"""`peloton job forecast JOB [INSTANCE]`: the request it sends, its text and its JSON, over a
real gRPC server serving a canned ForecastService."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from peloton.api import service_registry
from peloton.api.convert.ext_forecast import forecast_to_pb
from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.core.errors import NotFound
from peloton.core.forecast.model import (
    Binding,
    BindingKind,
    Bounds,
    Counterfactual,
    CounterfactualKind,
    Estimate,
    Forecast,
)
from tests.unit.cli.conftest import Peloton

JOB = "11111111-2222-3333-4444-555555555555"
FORECAST = Forecast(
    job_id=JOB, instances=(0,), now=1_750_000_000.0,
    estimate=Estimate(p50=200.0, p90=200.0, runs=1, started=1),
    binding=Binding(BindingKind.ENTITLEMENT, "pool /b is at its entitlement (share 1): needs "
                    "1 cpu, 5 of 5 cpu in use; 1st of 1 queued in /b", 1, 1, 1, 3,
                    (("insufficient cpu", 2),), "waiting for admission in pool /b"),
    counterfactuals=(
        Counterfactual(CounterfactualKind.RESERVATION, "+6 cpu reservation on pool /b",
                       Estimate(0.0, 0.0, 1, 1)),
        Counterfactual(CounterfactualKind.SMALLER_RESOURCES, "half the resources per task",
                       None)),
    bounds=Bounds(horizon=86400.0, wall=10.0, variations=5), wall_secs=0.7,
    notes=("assumes no job arrives after now",
           "every duration is known: one run, no variations"))


class Canned(forecast_pb2_grpc.ForecastServiceServicer):  # type: ignore[misc]
    """Answers FORECAST for JOB, NotFound for anything else; keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def Forecast(self, request: Any, context: Any) -> Any:
        self.requests.append(request)
        if request.job_id != JOB:
            raise NotFound(f"job {request.job_id} has no pending task to forecast")
        return forecast_to_pb(FORECAST)


@pytest.fixture
def canned() -> Iterator[tuple[Peloton, Canned]]:
    server = GrpcServer("127.0.0.1:0", max_workers=4)
    servicer = Canned()
    service_registry.register(server, forecast_pb2_grpc.add_ForecastServiceServicer_to_server,
                              servicer)
    server.start()
    try:
        yield Peloton(f"127.0.0.1:{server.port}"), servicer
    finally:
        server.stop(grace=0)


def test_text_names_the_estimate_the_binding_the_changes_and_the_bounds(
        canned: tuple[Peloton, Canned]) -> None:
    peloton, servicer = canned
    got = peloton("job", "forecast", JOB, "0", "--wall", "3", "--duration", "50")
    assert got.exit_code == 0, got.output
    assert got.output == (
        f"job {JOB} instance 0: starts 3m20s\n"
        "  binding now (entitlement): pool /b is at its entitlement (share 1): needs 1 cpu, "
        "5 of 5 cpu in use; 1st of 1 queued in /b\n"
        "  hosts: 1 of 3 fit (2 insufficient cpu)\n"
        "  scheduler: waiting for admission in pool /b\n"
        "what would start it sooner:\n"
        "  +6 cpu reservation on pool /b  now\n"
        "  half the resources per task    not run (wall time spent)\n"
        "note: assumes no job arrives after now\n"
        "note: every duration is known: one run, no variations\n"
        "bounds: looked 1d00h ahead over 1 run(s), spent 0.7 s of 10 s wall time\n")
    (req,) = servicer.requests
    assert (req.job_id, list(req.instances), req.wall_secs, req.duration_secs) == \
        (JOB, [0], 3.0, 50.0)


def test_json_is_the_whole_forecast(canned: tuple[Peloton, Canned]) -> None:
    peloton, _ = canned
    got = peloton("job", "forecast", JOB, "--json")
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert data["estimate"] == {"p50_secs": 200.0, "p90_secs": 200.0, "runs": 1, "started": 1}
    assert data["binding"]["kind"] == "entitlement"
    assert data["counterfactuals"][1] == {"kind": "smaller-resources",
                                          "change": "half the resources per task",
                                          "estimate": None}
    assert data["bounds"] == {"horizon_secs": 86400.0, "wall_secs": 10.0, "variations": 5}


def test_nothing_pending_is_a_not_found_exit(canned: tuple[Peloton, Canned]) -> None:
    peloton, _ = canned
    other = "99999999-2222-3333-4444-555555555555"
    got = peloton("job", "forecast", other)
    assert got.exit_code != 0
    assert "has no pending task to forecast" in got.output
