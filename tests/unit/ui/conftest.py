"""Fixtures: the fake Peloton on a real gRPC server, and the web UI's real HTTP server in front of it.

The UI server runs in a thread with its own gevent hub (as the Aurora
bridge's tests do); tests talk to it with urllib like a browser's fetch,
and read what reached the fakes from `world.calls`.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from peloton.api import service_registry
from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2_grpc
from peloton.api.gen.peloton.api.v0.job import job_pb2_grpc
from peloton.api.gen.peloton.api.v0.respool import respool_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2_grpc
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from tests.unit.ui import fakes
from ui.server import UiServer


@dataclass
class Answer:
    """One HTTP answer: status, headers (lower-case names), raw body and, if JSON, the data."""

    status: int
    headers: dict[str, str]
    body: bytes
    data: Any = field(default=None)


@dataclass
class Ui:
    """The UI under test: its base URL and the fakes' world; it keeps its session cookie and
    CSRF token as a browser tab would."""

    url: str
    world: fakes.UiWorld
    cookie: str = ""
    csrf: str = ""

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Answer:
        """One HTTP exchange (error statuses are answers too, not exceptions)."""
        headers = dict(headers or {})
        if self.cookie and "Cookie" not in headers:
            headers["Cookie"] = self.cookie
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, raw, hdrs = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as err:
            status, raw, hdrs = err.code, err.read(), err.headers
        answer = Answer(status, {k.lower(): v for k, v in hdrs.items()}, raw)
        set_cookie = hdrs.get("Set-Cookie", "")
        if set_cookie and "Cookie" not in (headers or {}):
            self.cookie = set_cookie.split(";")[0]
        if answer.headers.get("content-type", "").startswith("application/json"):
            answer.data = json.loads(raw)
        return answer

    def page_csrf(self) -> str:
        """The CSRF token a page of this session embeds (the session starts if need be)."""
        html = self.request("GET", "/").body.decode()
        match = re.search(r'name="peloton-csrf" content="([^"]*)"', html)
        assert match, "the page embeds no CSRF token"
        self.csrf = match.group(1)
        return self.csrf

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def post(self, path: str, body: object = None) -> Answer:
        """An action as the pages send it: JSON, same origin, with the session's CSRF token."""
        token = self.csrf or self.page_csrf()
        return self.request("POST", path, json.dumps(body or {}).encode(),
                            {"Content-Type": "application/json", "Origin": self.url,
                             "X-CSRF-Token": token})


@contextmanager
def serving(client: PelotonClient, **settings: Any) -> Iterator[str]:
    """A UiServer for `client` on 127.0.0.1 and a free port, in its own thread, with more
    of UiServer's `settings`; yields its URL."""
    ready, holder, stop = threading.Event(), {}, threading.Event()

    def serve() -> None:
        import gevent

        server = UiServer(client, "127.0.0.1", 0, refresh_ms=1500, **settings)
        holder["server"] = server
        server.start()
        ready.set()
        while not stop.is_set():
            gevent.sleep(0.02)
        server.stop()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10), "UI server did not start"
    try:
        yield holder["server"].url.rstrip("/")
    finally:
        stop.set()
        thread.join(5)


@pytest.fixture(scope="session")
def fake_world() -> Iterator[tuple[str, fakes.UiWorld]]:
    """Every fake the UI calls, on one real gRPC server (address, shared world)."""
    world = fakes.UiWorld()
    server = GrpcServer("127.0.0.1:0", max_workers=16)
    for add, servicer in [
        (respool_pb2_grpc.add_ResourceManagerServicer_to_server, fakes.UiResourceManager(world)),
        (job_pb2_grpc.add_JobManagerServicer_to_server, fakes.UiJobManager(world)),
        (task_pb2_grpc.add_TaskManagerServicer_to_server, fakes.UiTaskManager(world)),
        (host_svc_pb2_grpc.add_HostServiceServicer_to_server, fakes.UiHostService(world)),
        (update_svc_pb2_grpc.add_UpdateServiceServicer_to_server, fakes.UiUpdateService(world)),
        (stateless_svc_pb2_grpc.add_JobServiceServicer_to_server, fakes.UiJobService(world)),
    ]:
        service_registry.register(server, add, servicer)
    server.start()
    try:
        yield f"127.0.0.1:{server.port}", world
    finally:
        server.stop(grace=0)


@pytest.fixture(scope="session")
def served_ui(fake_world: tuple[str, fakes.UiWorld]) -> Iterator[Ui]:
    address, world = fake_world
    client = PelotonClient(address, address, address, caller="peloton-ui-test", timeout=5)
    with serving(client) as url:
        yield Ui(url, world)
    client.close()


@pytest.fixture
def ui(served_ui: Ui) -> Ui:
    """The UI in front of the fakes, with the fakes' state reset: jobs `JOB` (batch) and none else."""
    served_ui.world.__init__()  # type: ignore[misc]
    served_ui.world.jobs[fakes.JOB] = fakes.job_config("hello")
    return served_ui
