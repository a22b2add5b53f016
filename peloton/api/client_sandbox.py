"""Reading files from a task's sandbox, the way Peloton's CLI does.

BrowseSandbox (v0) and BrowsePodSandbox (v1alpha) answer with the host
and port of the agent that ran the task and the paths in its sandbox; the
file itself comes from the agent over HTTP, `GET
http://<host>:<port>/files/download?path=<path>` (the Mesos agent's
endpoint, which our local agent serves too).  This module is the one place
that knows that protocol.

Tails (`fetch_tail`, for log views that poll) read the file's size from
the agent's directory listing (`/files/browse?path=<dir>`, JSON entries
with `path` and `size`, as Mesos agents answer too) and ask for the last
bytes only (`offset`, `length`: our agent honours them); an agent that
ignores them or lists nothing costs one whole download, cut here.
"""

from __future__ import annotations

import json
import posixpath
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import NamedTuple

from peloton.core.errors import NotFound, Unavailable


def pick_path(paths: Sequence[str], filename: str) -> str:
    """The sandbox path ending in `filename` (the last one, as the Go CLI picks)."""
    chosen = ""
    for path in paths:
        if path.endswith(filename):
            chosen = path
    if not chosen:
        listed = ", ".join(paths) or "(none)"
        raise NotFound(f"file {filename!r} not found in sandbox; files: {listed}")
    return chosen


class FileTail(NamedTuple):
    """The end of a sandbox file: its last bytes and the file's whole size."""

    data: bytes
    size: int


def download_url(hostname: str, port: str, path: str, *, offset: int = 0, length: int = 0) -> str:
    """The agent URL serving one sandbox file (from `offset`, at most `length` bytes if set)."""
    params: dict[str, str | int] = {"path": path}
    if offset:
        params["offset"] = offset
    if length:
        params["length"] = length
    return f"http://{hostname}:{port}/files/download?{urllib.parse.urlencode(params)}"


def fetch_file(hostname: str, port: str, path: str, *, timeout: float) -> bytes:
    """Download one sandbox file from the agent; NotFound / Unavailable on failure."""
    return _get(hostname, port, path, download_url(hostname, port, path), timeout=timeout)


def fetch_tail(hostname: str, port: str, path: str, max_bytes: int, *, timeout: float) -> FileTail:
    """The last `max_bytes` (> 0) of one sandbox file and its size; NotFound / Unavailable on failure."""
    max_bytes = max(1, max_bytes)
    size = _listed_size(hostname, port, path, timeout=timeout)
    if size is None:
        data = fetch_file(hostname, port, path, timeout=timeout)
        return FileTail(data[-max_bytes:], len(data))
    offset = max(0, size - max_bytes)
    data = _get(hostname, port, path, download_url(hostname, port, path, offset=offset, length=max_bytes),
                timeout=timeout)
    if len(data) > max_bytes:  # the agent ignored offset and length: this is the whole file
        return FileTail(data[-max_bytes:], len(data))
    return FileTail(data, max(size, offset + len(data)))  # the file may have grown since listed


def _listed_size(hostname: str, port: str, path: str, *, timeout: float) -> int | None:
    """The size the agent lists for `path`, or None if its listing does not say."""
    folder, name = posixpath.split(path)
    query = urllib.parse.urlencode({"path": folder or "."})
    try:
        listing = json.loads(_get(hostname, port, path, f"http://{hostname}:{port}/files/browse?{query}",
                                  timeout=timeout))
    except (NotFound, Unavailable, ValueError):
        return None
    for entry in listing if isinstance(listing, list) else []:
        if isinstance(entry, dict) and str(entry.get("path", "")).endswith("/" + name):
            size = entry.get("size")
            return int(size) if isinstance(size, int | float) else None
    return None


def _get(hostname: str, port: str, path: str, url: str, *, timeout: float) -> bytes:
    if not hostname or not port:
        raise Unavailable(f"the sandbox of {path!r} has no agent address (host {hostname!r}, "
                          f"port {port!r}); the task may not have been placed yet")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data: bytes = resp.read()
            return data
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise NotFound(f"sandbox file not found on {hostname}:{port}: {path}") from None
        raise Unavailable(f"agent {hostname}:{port} answered HTTP {exc.code} for {path}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unavailable(f"cannot read sandbox file from agent at {url}: {reason}") from None
