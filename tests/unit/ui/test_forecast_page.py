"""The job and task pages' forecast: GET /ui/api/jobs/<job>/forecast[?instance=n] over a real
gRPC server serving a canned ForecastService, and the pages' script that asks for it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from peloton.api import service_registry
from peloton.api.client import PelotonClient
from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from tests.harness.procs import REPO
from tests.unit.cli.test_job_forecast import JOB, Canned
from tests.unit.ui import fakes
from tests.unit.ui.conftest import Ui, serving
from ui.reads import FORECAST_WALL_S, page_timeout_secs


@contextmanager
def forecasting(**settings: Any) -> Iterator[tuple[Ui, Canned]]:
    """A UI (UiServer `settings`) in front of a canned ForecastService."""
    server = GrpcServer("127.0.0.1:0", max_workers=4)
    canned = Canned()
    service_registry.register(server, forecast_pb2_grpc.add_ForecastServiceServicer_to_server,
                              canned)
    server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        with serving(PelotonClient(address, address, address), **settings) as url:
            yield Ui(url, fakes.UiWorld()), canned
    finally:
        server.stop(grace=0)


@pytest.fixture
def forecast_ui() -> Iterator[tuple[Ui, Canned]]:
    with forecasting() as ui:
        yield ui


def api_timeout_ms(ui: Ui) -> int:
    """What the page shell tells its script to wait for an answer."""
    found = re.search(r'<meta name="peloton-api-timeout-ms" content="(\d+)">', ui.get("/").body.decode())
    assert found is not None
    return int(found[1])


def test_the_job_forecast_is_json_with_its_text(forecast_ui: tuple[Ui, Canned]) -> None:
    ui, canned = forecast_ui
    got = ui.get(f"/ui/api/jobs/{JOB}/forecast?instance=0")
    assert got.status == 200, got.body
    assert got.data["estimate"]["p50_secs"] == 200.0
    assert got.data["binding"]["kind"] == "entitlement"
    assert got.data["text"].startswith(f"job {JOB} instance 0: starts 3m20s\n")
    (req,) = canned.requests
    assert (list(req.instances), req.wall_secs) == ([0], FORECAST_WALL_S)
    # The pages wait for the slowest answer, a forecast's: its wall time, the call's grace
    # for the worker's start, and slack, so the server's answer comes first.
    assert api_timeout_ms(ui) == 30_000


def test_the_forecasts_wall_time_is_configured_and_the_pages_wait_for_it() -> None:
    with forecasting(forecast_wall_secs=2.5) as (ui, canned):
        assert ui.get(f"/ui/api/jobs/{JOB}/forecast").status == 200
        (req,) = canned.requests
        assert req.wall_secs == 2.5
        assert api_timeout_ms(ui) == 22_500 == round(page_timeout_secs(2.5) * 1000)
    with forecasting(forecast_wall_secs=40.0) as (ui, _):  # above the old fixed 30 s wait
        assert api_timeout_ms(ui) == 60_000


def test_nothing_pending_is_404_and_a_bad_instance_400(forecast_ui: tuple[Ui, Canned]) -> None:
    ui, _ = forecast_ui
    other = "99999999-2222-3333-4444-555555555555"
    assert ui.get(f"/ui/api/jobs/{other}/forecast").status == 404
    assert ui.get(f"/ui/api/jobs/{JOB}/forecast?instance=x").status == 400


def test_the_job_and_task_pages_offer_the_forecast() -> None:
    """Both pages mount the panel that asks the route above."""
    js = REPO / "ui" / "static" / "js"
    panel = (js / "forecast.js").read_text()
    assert "/forecast" in panel and "Forecast start" in panel
    for page in ("job.js", "task.js"):
        assert "forecastPanel(" in (js / "pages" / page).read_text(), page
