"""Task logs: the task page reads only the tail of stdout/stderr from the agent, whatever agent it is."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from tests.unit.ui import fakes
from tests.unit.ui.conftest import Ui

STDOUT = b"".join(b"line %d\n" % i for i in range(1000))
FILES = {"/sandboxes/run-1/stdout": STDOUT, "/sandboxes/run-1/stderr": b"oops \xff\n"}


class Agent(ThreadingHTTPServer):
    """Serves sandbox files; `ranges` says whether it honours browse, offset and length (ours does)."""

    def __init__(self, ranges: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.ranges = ranges
        self.requests: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    server: Agent

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        body: bytes | None = None
        if url.path == "/files/download":
            body = FILES.get(query["path"])
            if body is not None and self.server.ranges:
                start = int(query.get("offset", 0))
                body = body[start:start + int(query.get("length", len(body)))]
        elif url.path == "/files/browse" and self.server.ranges:
            folder = query["path"] + "/"
            listing = [{"path": p, "size": len(b)} for p, b in FILES.items() if p.startswith(folder)]
            body = json.dumps(listing).encode()
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=[True, False], ids=["ranged-agent", "whole-file-agent"])
def agent(request: pytest.FixtureRequest, ui: Ui) -> Iterator[Agent]:
    server = Agent(ranges=request.param)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ui.world.sandbox = ("127.0.0.1", str(server.server_address[1]), sorted(FILES))
    yield server
    server.shutdown()
    server.server_close()


def test_logs_are_the_tail_of_each_file_with_its_size(ui: Ui, agent: Agent) -> None:
    logs = ui.get(f"/ui/api/jobs/{fakes.JOB}/tasks/0?log_bytes=16").data["logs"]
    assert logs["stdout"] == {"text": "ne 998\nline 999\n", "size": len(STDOUT), "truncated": True}
    assert logs["stderr"] == {"text": "oops \ufffd\n", "size": 7, "truncated": False}
    downloads = [r for r in agent.requests if r.startswith("/files/download")]
    if agent.ranges:  # only the last bytes crossed the wire
        assert all("length=16" in r for r in downloads) and f"offset={len(STDOUT) - 16}" in downloads[0]


def test_log_size_is_bounded(ui: Ui) -> None:
    answer = ui.get(f"/ui/api/jobs/{fakes.JOB}/tasks/0?log_bytes=99999999")
    assert answer.status == 400
    assert answer.data["message"] == "log_bytes: must be within 1..4194304, got 99999999"
