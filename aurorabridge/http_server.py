"""The bridge's HTTP front: a gevent WSGI server answering Thrift at `/api`.

One greenlet per connection, HTTP/1.1 keep-alive, Nagle disabled on every
accepted socket (with keep-alive, Nagle plus delayed ACKs stall each small
reply by ~40 ms).  The handler keeps *all* request header values, because
Apache's THttpClient can send two Content-Type headers and the last one is
the real one; plain WSGI would hand us only the first.

Paths: `/api` (POST; GET is treated as POST, as Aurora's servlet does),
`/health` (200 "OK", for readiness probes).  Bodies larger than
`max_body_bytes` are refused with 413 before they are read.

Slow clients are bounded (`HttpLimits`), so a few hundred connections that
announce a large body and send a trickle cannot hold the endpoint:
  * a request must arrive whole (request line, headers and body) within
    `request_timeout_s` of its first line, or its connection is shut;
  * a connection that sends nothing for `idle_timeout_s` (before its first
    request, between keep-alive requests, or within one) is closed, and so
    is one that does not read a reply for that long;
  * at most `max_connections` are open at once: one more is answered 503
    (plain HTTP; with TLS it is just closed) and closed at once.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import gevent
from gevent.pywsgi import WSGIHandler, WSGIServer

from aurorabridge.negotiation import Unsupported, negotiate
from aurorabridge.processor import Reply, ThriftProcessor, text_reply
from peloton.common.tls import TlsFiles

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
_HEADERS_KEY = "aurorabridge.headers"
#: environ key of a callable the app calls once it has the whole body (ends the read deadline).
_BODY_READ_KEY = "aurorabridge.body_read"
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
         b"Content-Type: text/plain\r\nContent-Length: 44\r\n\r\n"
         b"too many open connections to the Aurora API\n")


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Bounds on what slow or idle clients may hold (BridgeConfig carries the settings)."""

    #: Seconds a request may take to arrive whole, from its first line to its last body byte.
    request_timeout_s: float = 30.0
    #: Seconds a connection may send nothing (or not read a reply) before it is closed.
    idle_timeout_s: float = 60.0
    #: Connections open at once; one more is refused.
    max_connections: int = 1000

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 411: "Length Required", 413: "Payload Too Large",
            415: "Unsupported Media Type", 501: "Not Implemented"}


class _Handler(WSGIHandler):  # type: ignore[misc]  # gevent is untyped
    """Disables Nagle, exposes every raw header (name, value) to the app, and shuts the
    connection of a request that does not arrive within the server's request timeout."""

    def __init__(self, sock: Any, address: Any, server: Any, rfile: Any = None) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # not TCP (tests may use other sockets)
            pass
        self._deadline: Any = None
        super().__init__(sock, address, server, rfile)

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # the client went away, or its deadline shut the socket
            pass
        finally:
            self._end_deadline()

    def read_requestline(self) -> str:
        # Waiting for a request line is bounded by the idle timeout (the socket's); from its
        # first line the whole request must arrive within the request timeout.
        line: str = super().read_requestline()
        if line:
            self._end_deadline()
            self._deadline = gevent.get_hub().loop.timer(self.server.limits.request_timeout_s)
            self._deadline.start(self._expire)
        return line

    def handle_one_response(self) -> None:
        try:
            super().handle_one_response()
        finally:
            self._end_deadline()

    def _expire(self) -> None:
        # Runs in the hub: shutting the socket wakes the greenlet blocked reading it with EOF.
        log.info("closing the connection of %s: its request did not arrive within %.3g s",
                 self.client_address, self.server.limits.request_timeout_s)
        sock = getattr(self, "socket", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _end_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.close()
            self._deadline = None

    def get_environ(self) -> dict[str, Any]:
        env: dict[str, Any] = super().get_environ()
        env[_HEADERS_KEY] = list(self.headers.items())
        env[_BODY_READ_KEY] = self._end_deadline
        return env


class _Server(WSGIServer):  # type: ignore[misc]  # gevent is untyped
    """A WSGIServer that counts its open connections and refuses those beyond the cap."""

    def __init__(self, *args: Any, limits: HttpLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.open_connections = 0

    def do_handle(self, sock: Any, address: Any) -> None:
        # Called in the hub for each accepted socket, before any greenlet is spawned.
        if self.open_connections >= self.limits.max_connections:
            log.warning("refusing a connection from %s: %d connections are open (the cap)",
                        address, self.open_connections)
            gevent.spawn(self._refuse, sock)
            return
        self.open_connections += 1
        sock.settimeout(self.limits.idle_timeout_s)  # also bounds a TLS handshake
        super().do_handle(sock, address)

    def do_close(self, sock: Any, *args: Any) -> None:
        self.open_connections -= 1
        super().do_close(sock, *args)

    def _refuse(self, sock: Any) -> None:
        try:
            if not self.ssl_enabled:
                sock.settimeout(1.0)
                sock.sendall(_BUSY)
        except OSError:
            pass
        finally:
            sock.close()


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
            try:
                data = bytes(stream.read(length)) if length else b""
            except OSError as exc:  # idle timeout, or the server closed it (stopping)
                return text_reply(408, f"request body not received: {exc}")
            if len(data) < length:  # the client stopped, or its request deadline shut it
                return text_reply(408, f"request body ended after {len(data)} of {length} bytes")
        else:
            data = bytes(stream.read(self._max_body + 1) or b"")
            if len(data) > self._max_body:
                return text_reply(413, f"request body exceeds the limit of {self._max_body} bytes")
        body_read = environ.get(_BODY_READ_KEY)
        if body_read is not None:
            body_read()
        return data


def _headers_from_environ(environ: dict[str, Any]) -> list[tuple[str, str]]:
    """Headers from a plain WSGI environ (when served by another WSGI server)."""
    out = [(k[5:].replace("_", "-"), v) for k, v in environ.items() if k.startswith("HTTP_")]
    if environ.get("CONTENT_TYPE"):
        out.append(("content-type", environ["CONTENT_TYPE"]))
    return out


class BridgeHttpServer:
    """Owns the listening socket and its greenlets; `port` is known after construction.

    With TLS files it serves HTTPS (requiring client certificates when they name a CA);
    `limits` bounds slow and idle clients (module docstring)."""

    def __init__(self, host: str, port: int, app: ApiApp, tls: TlsFiles | None = None,
                 limits: HttpLimits = HttpLimits()) -> None:
        kwargs: dict[str, Any] = {}
        if tls is not None:
            kwargs["ssl_context"] = tls.server_context()
        self._server = _Server((host, port), app, handler_class=_Handler, log=None,
                               error_log=logging.getLogger("aurorabridge.http"), limits=limits,
                               **kwargs)
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
