"""The agent's HTTP file server: sandboxes readable the way Mesos agents serve them.

`GET /files/download?path=P` returns a file's bytes (optionally from
`offset`, at most `length`), `GET /files/browse?path=P` lists a directory
as JSON `[{"path", "size", "mode"}]`.  `P` is a path BrowseSandbox answered:
`<run id>/cap-<expiry>-<signature>/<file>` (relative to the sandboxes
directory, or absolute under it).  The capability (caps.py) must be valid
for that run, else 403: the server serves no path it did not hand out
through the authorized API, so a task on the same machine cannot read
other sandboxes through it.  Paths are opened one component at a time
without following symlinks (sandbox.open_beneath): nothing outside the
run's own sandbox is readable, whatever the task put in it.

With TLS files the server speaks HTTPS (and with a CA, requires client
certificates).
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from gevent.pywsgi import WSGIServer

from peloton.agent.caps import PREFIX, SandboxCaps
from peloton.agent.sandbox import Sandboxes
from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument, NotFound

log = logging.getLogger(__name__)
#: Largest single read, so one request cannot make the agent buffer a huge file.
MAX_READ = 64 << 20
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class Forbidden(Exception):
    """The path is not one this server may serve."""


class FileServer:
    """Serves sandbox files under capabilities over HTTP(S)."""

    def __init__(self, sandboxes: Sandboxes, caps: SandboxCaps, host: str, port: int = 0,
                 tls: TlsFiles | None = None) -> None:
        self.sandboxes = sandboxes
        self.caps = caps
        self.root = sandboxes.root.resolve()
        kwargs: dict[str, Any] = {}
        if tls is not None:
            kwargs["ssl_context"] = tls.server_context()
        self._server = WSGIServer((host, port), self._app, log=None, error_log=None, **kwargs)
        self._server.init_socket()
        self.host = host

    @property
    def port(self) -> int:
        """The port bound."""
        return int(self._server.server_port)

    @property
    def address(self) -> str:
        """host:port clients fetch from."""
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        """Serve in a greenlet."""
        self._server.start()

    def stop(self) -> None:
        """Stop serving."""
        self._server.stop(timeout=1)

    def locate(self, path: str) -> tuple[str, str, str]:
        """(run id, capability, rest) of a served path; Forbidden when it is not one."""
        rel = path
        if os.path.isabs(path):
            root = str(self.root) + "/"
            if not path.startswith(root):
                raise Forbidden("path is outside the sandboxes")
            rel = path[len(root):]
        run_id, _, rest = rel.lstrip("/").partition("/")
        cap, _, rest = rest.partition("/")
        if not cap.startswith(PREFIX) or not self.caps.valid(run_id, cap):
            raise Forbidden("this path needs a current capability from BrowseSandbox")
        return run_id, cap, rest

    def _app(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        route = environ.get("PATH_INFO", "")
        path = (query.get("path") or [""])[0]
        if route not in ("/files/download", "/files/browse"):
            return _reply(start, "404 Not Found", b"unknown endpoint\n")
        if not path:
            return _reply(start, "400 Bad Request", b"missing path\n")
        try:
            run_id, cap, rest = self.locate(path)
            if route == "/files/browse":
                body = _listing(self.sandboxes, run_id, cap, rest)
                return _reply(start, "200 OK", body, "application/json")
            return _reply(start, "200 OK", _read(self.sandboxes, run_id, rest, query))
        except Forbidden as exc:
            return _reply(start, "403 Forbidden", f"{exc}\n".encode())
        except (NotFound, FileNotFoundError):
            return _reply(start, "404 Not Found", b"no such file\n")
        except IsADirectoryError:
            return _reply(start, "400 Bad Request", b"path is a directory\n")
        except (InvalidArgument, ValueError, OSError) as exc:
            return _reply(start, "400 Bad Request", f"{exc}\n".encode())


def _read(sandboxes: Sandboxes, run_id: str, rest: str, query: dict[str, list[str]]) -> bytes:
    offset = int((query.get("offset") or ["0"])[0])
    length = min(int((query.get("length") or [str(MAX_READ)])[0]), MAX_READ)
    if offset < 0 or length < 0:
        raise ValueError("offset and length must be >= 0")
    fd = sandboxes.open(run_id, rest)
    with os.fdopen(fd, "rb") as fh:
        if stat.S_ISDIR(os.fstat(fh.fileno()).st_mode):
            raise IsADirectoryError(rest)
        fh.seek(offset)
        return fh.read(length)


def _listing(sandboxes: Sandboxes, run_id: str, cap: str, rest: str) -> bytes:
    out = []
    for name, size, is_dir, _ in sandboxes.listdir(run_id, rest):
        path = "/".join(p for p in (run_id, cap, rest.strip("/"), name) if p)
        out.append({"path": path, "size": size, "mode": "d" if is_dir else "-"})
    return json.dumps(out).encode()


def _reply(start: StartResponse, status: str, body: bytes,
           content_type: str = "application/octet-stream") -> list[bytes]:
    start(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


__all__ = ["MAX_READ", "FileServer", "Path"]
