"""The bridge's HTTP front: a gevent WSGI server answering Thrift at `/api`.

One greenlet per connection, HTTP/1.1 keep-alive, Nagle disabled on every
accepted socket (with keep-alive, Nagle plus delayed ACKs stall each small
reply by ~40 ms).  The handler keeps *all* request header values, because
Apache's THttpClient can send two Content-Type headers and the last one is
the real one; plain WSGI would hand us only the first.

Paths: `/api` (POST; GET is treated as POST, as Aurora's servlet does),
`/health` (200 "OK", for readiness probes).  Bodies larger than
`max_body_bytes` are refused with 413 before they are read.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable
from typing import Any

from gevent.pywsgi import WSGIHandler, WSGIServer

from aurorabridge.negotiation import Unsupported, negotiate
from aurorabridge.processor import Reply, ThriftProcessor, text_reply
from peloton.common.tls import TlsFiles

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_HEADERS_KEY = "aurorabridge.headers"

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            411: "Length Required", 413: "Payload Too Large", 415: "Unsupported Media Type",
            501: "Not Implemented"}


class _Handler(WSGIHandler):  # type: ignore[misc]  # gevent is untyped
    """Disables Nagle and exposes every raw header (name, value) to the app."""

    def __init__(self, sock: Any, address: Any, server: Any, rfile: Any = None) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # not TCP (tests may use other sockets)
            pass
        super().__init__(sock, address, server, rfile)

    def get_environ(self) -> dict[str, Any]:
        env: dict[str, Any] = super().get_environ()
        env[_HEADERS_KEY] = list(self.headers.items())
        return env


class ApiApp:
    """The WSGI application: routing, body limits, then the Thrift processor."""

    def __init__(self, processor: ThriftProcessor, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self._processor = processor
        self._max_body = max_body_bytes

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        reply = self._route(environ)
        status = f"{reply.status} {_REASONS.get(reply.status, '')}".strip()
        headers = [*reply.headers, ("Content-Length", str(len(reply.body)))]
        start_response(status, headers)
        return [reply.body]

    def _route(self, environ: dict[str, Any]) -> Reply:
        path = environ.get("PATH_INFO", "")
        if path == "/health":
            return Reply(200, [("Content-Type", "text/plain")], b"OK")
        if path.rstrip("/") != "/api":
            return text_reply(404, f"no such path {path!r}; the Thrift API is at /api")
        if environ.get("REQUEST_METHOD") not in ("POST", "GET"):
            return text_reply(405, "use POST (or GET) for /api")
        raw = environ.get(_HEADERS_KEY) or _headers_from_environ(environ)
        headers: dict[str, list[str]] = {}
        for name, value in raw:
            headers.setdefault(name.lower(), []).append(value.strip())
        neg = negotiate(headers)
        if isinstance(neg, Unsupported):
            return text_reply(neg.status, neg.message)
        body = self._read_body(environ)
        if isinstance(body, Reply):
            return body
        context = [(n.title(), v[-1]) for n, v in headers.items() if n.startswith("context-")]
        authorization = (headers.get("authorization") or [""])[-1]
        return self._processor.process(neg, body, context, authorization)

    def _read_body(self, environ: dict[str, Any]) -> bytes | Reply:
        length_text = environ.get("CONTENT_LENGTH") or ""
        stream = environ["wsgi.input"]
        if length_text:
            try:
                length = int(length_text)
            except ValueError:
                return text_reply(400, f"bad Content-Length {length_text!r}")
            if length < 0:
                return text_reply(400, f"bad Content-Length {length_text!r}")
            if length > self._max_body:
                return text_reply(413, f"request body of {length} bytes exceeds the limit of "
                                       f"{self._max_body} bytes")
            return bytes(stream.read(length)) if length else b""
        data = bytes(stream.read(self._max_body + 1) or b"")
        if len(data) > self._max_body:
            return text_reply(413, f"request body exceeds the limit of {self._max_body} bytes")
        return data


def _headers_from_environ(environ: dict[str, Any]) -> list[tuple[str, str]]:
    """Headers from a plain WSGI environ (when served by another WSGI server)."""
    out = [(k[5:].replace("_", "-"), v) for k, v in environ.items() if k.startswith("HTTP_")]
    if environ.get("CONTENT_TYPE"):
        out.append(("content-type", environ["CONTENT_TYPE"]))
    return out


class BridgeHttpServer:
    """Owns the listening socket and its greenlets; `port` is known after construction.

    With TLS files it serves HTTPS (requiring client certificates when they name a CA)."""

    def __init__(self, host: str, port: int, app: ApiApp, tls: TlsFiles | None = None) -> None:
        kwargs: dict[str, Any] = {}
        if tls is not None:
            kwargs["ssl_context"] = tls.server_context()
        self._server = WSGIServer((host, port), app, handler_class=_Handler, log=None,
                                  error_log=logging.getLogger("aurorabridge.http"), **kwargs)
        self._server.init_socket()
        self.host = host
        self.port: int = self._server.server_port

    def start(self) -> None:
        """Start accepting connections (returns at once; serving runs in greenlets)."""
        self._server.start()
        log.info("Aurora Thrift API listening on http://%s:%d/api", self.host, self.port)

    def stop(self, timeout: float = 1.0) -> None:
        """Stop accepting and close connections, letting requests in flight finish within `timeout`.

        Idle keep-alive connections count as in flight (gevent cannot tell them apart), so a
        client that holds one delays the stop by up to `timeout`.
        """
        self._server.stop(timeout=timeout)
