"""The agent's HTTP file server: sandboxes readable the way Mesos agents serve them.

`GET /files/download?path=P` returns a file's bytes (optionally from
`offset`, at most `length`), `GET /files/browse?path=P` lists a directory
as JSON `[{"path", "size", "mode"}]`.  `P` is absolute or relative to the
sandboxes directory and must resolve inside it: nothing else on the host
is readable (a `..`, an absolute path elsewhere or a symlink out of a
sandbox gets 403).  This is what `peloton task logs` reads from, with the
address BrowseSandbox returns.
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

log = logging.getLogger(__name__)
#: Largest single read, so one request cannot make the agent buffer a huge file.
MAX_READ = 64 << 20
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class FileServer:
    """Serves files under one directory over HTTP."""

    def __init__(self, root: Path, host: str, port: int = 0) -> None:
        self.root = root.resolve()
        self._server = WSGIServer((host, port), self._app, log=None, error_log=None)
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

    def resolve(self, path: str) -> Path | None:
        """The real path of `path` if it lies inside the root, else None."""
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        try:
            real = candidate.resolve()
        except (OSError, RuntimeError):
            return None
        if real != self.root and self.root not in real.parents:
            return None
        return real

    def _app(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        route = environ.get("PATH_INFO", "")
        path = (query.get("path") or [""])[0]
        if route not in ("/files/download", "/files/browse"):
            return _reply(start, "404 Not Found", b"unknown endpoint\n")
        if not path:
            return _reply(start, "400 Bad Request", b"missing path\n")
        real = self.resolve(path)
        if real is None:
            return _reply(start, "403 Forbidden", b"path is outside the sandboxes\n")
        try:
            if route == "/files/browse":
                return _reply(start, "200 OK", _listing(real), "application/json")
            return _reply(start, "200 OK", _read(real, query))
        except FileNotFoundError:
            return _reply(start, "404 Not Found", b"no such file\n")
        except IsADirectoryError:
            return _reply(start, "400 Bad Request", b"path is a directory\n")
        except (ValueError, OSError) as exc:
            return _reply(start, "400 Bad Request", f"{exc}\n".encode())


def _read(path: Path, query: dict[str, list[str]]) -> bytes:
    offset = int((query.get("offset") or ["0"])[0])
    length = min(int((query.get("length") or [str(MAX_READ)])[0]), MAX_READ)
    if offset < 0 or length < 0:
        raise ValueError("offset and length must be >= 0")
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(length)


def _listing(path: Path) -> bytes:
    out = []
    for entry in sorted(path.iterdir()):
        st = entry.stat()
        out.append({"path": str(entry), "size": st.st_size, "mode": stat.filemode(st.st_mode)})
    return json.dumps(out).encode()


def _reply(start: StartResponse, status: str, body: bytes,
           content_type: str = "application/octet-stream") -> list[bytes]:
    start(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
