"""Reading files from a task's sandbox, the way Peloton's CLI does.

BrowseSandbox (v0) and BrowsePodSandbox (v1alpha) answer with the host
and port of the agent that ran the task and the paths in its sandbox; the
file itself comes from the agent over HTTP, `GET
http://<host>:<port>/files/download?path=<path>` (the Mesos agent's
endpoint, which our local agent serves too).  This module is the one place
that knows that protocol.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence

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


def download_url(hostname: str, port: str, path: str) -> str:
    """The agent URL serving one sandbox file."""
    query = urllib.parse.urlencode({"path": path})
    return f"http://{hostname}:{port}/files/download?{query}"


def fetch_file(hostname: str, port: str, path: str, *, timeout: float) -> bytes:
    """Download one sandbox file from the agent; NotFound / Unavailable on failure."""
    if not hostname or not port:
        raise Unavailable(f"the sandbox of {path!r} has no agent address (host {hostname!r}, "
                          f"port {port!r}); the task may not have been placed yet")
    url = download_url(hostname, port, path)
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
