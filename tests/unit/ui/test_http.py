"""The UI's HTTP rules: pages and static files, error bodies and codes, and what writes must look like."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from peloton.api.client import PelotonClient
from tests.harness.procs import free_port
from tests.unit.ui import fakes
from tests.unit.ui.conftest import Ui, serving
from ui.http import STATUS_OF_KIND

STATIC = Path(__file__).resolve().parents[3] / "ui" / "static"


@pytest.mark.parametrize("path", ["/", "/jobs", f"/jobs/{fakes.JOB}", f"/jobs/{fakes.JOB}/tasks/3", "/pools",
                                  "/hosts", "/jobs/?state=RUNNING"])
def test_every_page_is_the_shell_with_the_refresh_period_and_a_strict_csp(ui: Ui, path: str) -> None:
    answer = ui.get(path)
    assert answer.status == 200 and answer.headers["content-type"].startswith("text/html")
    html = answer.body.decode()
    assert '<meta name="peloton-refresh-ms" content="1500">' in html
    assert '<script type="module" src="/static/js/main.js">' in html
    assert answer.headers["content-security-policy"].startswith("default-src 'self'")


def test_every_static_file_is_served_with_its_type() -> None:
    files = [p for p in STATIC.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} == {".html", ".css", ".js", ".svg"}


@pytest.mark.parametrize("name", sorted(str(p.relative_to(STATIC)) for p in STATIC.rglob("*.*")))
def test_static_file(ui: Ui, name: str) -> None:
    answer = ui.get(f"/static/{name}")
    assert answer.status == 200 and answer.body == (STATIC / name).read_bytes()
    kind = {"html": "text/html", "css": "text/css", "js": "text/javascript", "svg": "image/svg+xml"}
    assert answer.headers["content-type"].startswith(kind[name.rsplit(".", 1)[1]])


@pytest.mark.parametrize("path", ["/static/../http.py", "/static/%2e%2e/http.py", "/static/js/nope.js",
                                  "/static/render.py"])
def test_anything_else_is_a_json_404(ui: Ui, path: str) -> None:
    answer = ui.get(path)
    assert answer.status == 404 and answer.data["error"] == "not_found"


@pytest.mark.parametrize("path", ["/nowhere", "/jobs/a/b/c"])
def test_an_unknown_page_is_the_shell_with_a_404_its_script_turns_into_a_not_found_page(
        ui: Ui, path: str) -> None:
    answer = ui.get(path)
    assert answer.status == 404 and answer.headers["content-type"].startswith("text/html")
    assert b'src="/static/js/main.js"' in answer.body


def test_the_api_index_lists_every_route_with_what_it_is_for(ui: Ui) -> None:
    from ui import api_index

    answer = ui.get("/ui/api/")
    routes = answer.data["routes"]
    paths = {f"{r['method']} {r['path']}" for r in routes}
    assert "GET /ui/api/jobs/<job>/explain" in paths and "GET /ui/api/hosts" in paths
    assert "POST /ui/api/jobs/<job>/(stop|start|restart)" in paths
    assert all(r["what"] for r in routes), [r for r in routes if not r["what"]]
    assert paths == set(api_index.HELP)


def test_unknown_api_route_and_wrong_method(ui: Ui) -> None:
    assert ui.get("/ui/api/nothing").data == {"error": "not_found", "message": "no API route /ui/api/nothing"}
    answer = ui.get(f"/ui/api/jobs/{fakes.JOB}/stop")
    assert answer.status == 405 and answer.data["message"] == f"use POST for /ui/api/jobs/{fakes.JOB}/stop"
    assert ui.request("POST", "/jobs").status == 405


def test_writes_must_be_json(ui: Ui) -> None:
    form = ui.request("POST", f"/ui/api/jobs/{fakes.JOB}/stop", b"x=1",
                      {"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status == 415 and form.data["error"] == "unsupported_media_type"
    assert ui.world.requests("TaskManager.Stop") == []


def test_writes_from_another_origin_are_refused(ui: Ui) -> None:
    answer = ui.request("POST", f"/ui/api/jobs/{fakes.JOB}/stop", b"{}",
                        {"Content-Type": "application/json", "Origin": "http://evil.example"})
    assert answer.status == 403 and "cross-origin" in answer.data["message"]
    assert ui.world.requests("TaskManager.Stop") == []


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]"])
def test_bad_bodies_are_400(ui: Ui, body: bytes) -> None:
    answer = ui.request("POST", f"/ui/api/jobs/{fakes.JOB}/restart", body,
                        {"Content-Type": "application/json"})
    assert answer.status == 400 and answer.data["error"] == "invalid_argument"


def test_an_unreachable_daemon_is_503_naming_its_address() -> None:
    dead = f"127.0.0.1:{free_port()}"
    client = PelotonClient(dead, dead, dead, timeout=2)
    try:
        with serving(client) as url:
            answer = Ui(url, fakes.UiWorld()).get("/ui/api/hosts")
    finally:
        client.close()
    assert answer.status == 503 and answer.data["error"] == "unavailable"
    assert "cannot reach peloton-hostmgr" in answer.data["message"] and dead in answer.data["message"]


def test_health_and_json_content_type(ui: Ui) -> None:
    assert ui.get("/health").body == b"OK"
    answer = ui.get("/ui/api/pools")
    assert answer.headers["content-type"] == "application/json; charset=utf-8"
    assert answer.headers["cache-control"] == "no-store"
    assert json.loads(answer.body) == answer.data


def test_error_kinds_map_to_client_and_server_statuses() -> None:
    assert STATUS_OF_KIND["not_found"] == 404 and STATUS_OF_KIND["invalid_argument"] == 400
    assert STATUS_OF_KIND["conflict"] == 409 and STATUS_OF_KIND["unavailable"] == 503
    assert all(400 <= code < 600 for code in STATUS_OF_KIND.values())


def test_an_instance_id_too_large_for_the_wire_is_400(ui: Ui) -> None:
    answer = ui.get(f"/ui/api/jobs/{fakes.JOB}/tasks/99999999999")
    assert answer.status == 400 and answer.data["message"] == "instance: 99999999999 is not an instance id"
