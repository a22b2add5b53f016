"""The fake Mesos master's HTTP side: one handler for the scheduler, operator and version calls.

A SUBSCRIBE is answered 200 with `Transfer-Encoding: chunked` and a
`Mesos-Stream-Id` header; each event is one chunk holding one RecordIO
record (`<length>\n<json>`).  The stream ends when the master closes it
(a failover) or the client goes away.  Only JSON is spoken (415 otherwise).
"""

from __future__ import annotations

import json
import queue
import select
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from tests.harness.fake_mesos_agent import Json

if TYPE_CHECKING:
    from tests.harness.fake_mesos import FakeMesosMaster


class EventStream:
    """One SUBSCRIBE connection: events queued here are written by its handler thread."""

    def __init__(self) -> None:
        self.stream_id = str(uuid.uuid4())
        self.events: queue.Queue[Json | None] = queue.Queue()
        self.last_heartbeat = time.monotonic()
        #: Drop every event but keep the connection (see FakeMesosMaster.mute).
        self.muted = False

    def send(self, event: Json) -> None:
        self.events.put(event)

    def close(self) -> None:
        self.events.put(None)


class MasterHandler(BaseHTTPRequestHandler):
    """Serves one connection to the fake master."""


    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def master(self) -> FakeMesosMaster:
        return self.server.master  # type: ignore[attr-defined,no-any-return]

    def do_GET(self) -> None:
        if self.path == "/version":
            return self._reply(200, json.dumps({"version": self.master.version}))
        return self._reply(404, "")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Type", "") != "application/json":
            return self._reply(415, "this fake speaks application/json only")
        call = json.loads(body)
        if self.path == "/api/v1":
            if call.get("type") == "GET_AGENTS":
                return self._reply(200, json.dumps(self.master.get_agents()))
            return self._reply(501, "only GET_AGENTS is faked")
        if self.path != "/api/v1/scheduler":
            return self._reply(404, "")
        if self.master.redirect_to:
            self.send_response(307)
            self.send_header("Location", f"//{self.master.redirect_to}/api/v1/scheduler")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if call.get("type") == "SUBSCRIBE":
            with self.master.lock:
                fail, self.master.fail_subscribes = (self.master.fail_subscribes > 0,
                                                     max(0, self.master.fail_subscribes - 1))
            if fail:
                return self._reply(500, "the fake master was told to fail this SUBSCRIBE")
            return self._stream(self.master.subscribe(call))
        code, error = self.master.call(call, self.headers.get("Mesos-Stream-Id", ""))
        return self._reply(code, error)

    def _reply(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json" if code == 200 else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, stream: EventStream) -> None:
        """Write RecordIO events as chunks until the stream is closed or the client goes."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Mesos-Stream-Id", stream.stream_id)
        self.end_headers()
        try:
            while True:
                try:
                    event = stream.events.get(timeout=0.1)
                except queue.Empty:
                    if _peer_closed(self.connection):
                        break
                    continue
                if event is None:
                    break
                if stream.muted:
                    continue  # a half-open connection: nothing arrives, nothing fails
                data = json.dumps(event).encode()
                record = b"%d\n" % len(data) + data
                self.wfile.write(b"%x\r\n" % len(record) + record + b"\r\n")
                self.wfile.flush()
        except OSError:
            pass
        finally:
            self.master.stream_closed(stream)


def _peer_closed(sock: Any) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return not sock.recv(1, 0x2)  # MSG_PEEK: readable with no data means EOF
    except OSError:
        return True
