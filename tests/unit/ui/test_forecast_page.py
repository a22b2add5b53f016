"""The job and task pages' forecast: GET /ui/api/jobs/<job>/forecast[?instance=n] over a real
gRPC server serving a canned ForecastService, and the pages' script that asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from peloton.api import service_registry
from peloton.api.client import PelotonClient
from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from tests.harness.procs import REPO
from tests.unit.cli.test_job_forecast import JOB, Canned
from tests.unit.ui import fakes
from tests.unit.ui.conftest import Ui, serving
from ui.reads import FORECAST_WALL_S


@pytest.fixture
def forecast_ui() -> Iterator[tuple[Ui, Canned]]:
    server = GrpcServer("127.0.0.1:0", max_workers=4)
    canned = Canned()
    service_registry.register(server, forecast_pb2_grpc.add_ForecastServiceServicer_to_server,
                              canned)
    server.start()
    address = f"127.0.0.1:{server.port}"
    try:
        with serving(PelotonClient(address, address, address)) as url:
            yield Ui(url, fakes.UiWorld()), canned
    finally:
        server.stop(grace=0)


def test_the_job_forecast_is_json_with_its_text(forecast_ui: tuple[Ui, Canned]) -> None:
    ui, canned = forecast_ui
    got = ui.get(f"/ui/api/jobs/{JOB}/forecast?instance=0")
    assert got.status == 200, got.body
    assert got.data["estimate"]["p50_secs"] == 200.0
    assert got.data["binding"]["kind"] == "entitlement"
    assert got.data["text"].startswith(f"job {JOB} instance 0: starts 3m20s\n")
    (req,) = canned.requests
    assert (list(req.instances), req.wall_secs) == ([0], FORECAST_WALL_S)


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
