"""Fetching a remote volume's URL to a file: an opener per scheme, and the bounded download
(remote_volumes.py keeps what these fetch).

Each opener returns the stream and its length when known; its errors are typed and name
the URL.  A download is bounded in size (refused, named, before or while it is read) and
in time, and leaves nothing behind when it fails.  A `file:` URL is read only if every
user of the host could read it: the agent may be root, and a task must not read through
it what it could not read itself.
"""

from __future__ import annotations

import hashlib
import os
import stat
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from peloton.agent.cache_files import remove_path
from peloton.core.errors import (
    FailedPrecondition,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from peloton.core.remote_volume import FetchKind, RemoteVolume

MB = 1024 * 1024
#: Bytes read and hashed at a time.
CHUNK = 256 * 1024

#: Opens a URL for reading: (url, timeout) -> (stream, Content-Length or None).
Opener = Callable[[str, float], tuple[BinaryIO, int | None]]


def open_http(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
    """GET `url` (redirects followed); typed errors name the URL."""
    request = urllib.request.Request(url, headers={"User-Agent": "pelotonpy-agent"})
    try:
        resp = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        raise FailedPrecondition(f"remote volume {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unavailable(f"remote volume {url}: cannot fetch: {reason}") from None
    length = resp.headers.get("Content-Length")
    return resp, int(length) if length and length.isdigit() else None


def open_file(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
    """Open a `file:` URL's file, if every user of the host could read it (when the agent is
    root; otherwise the agent's own rights are the task's)."""
    del timeout  # a local read is not timed
    path = unquote(urlsplit(url).path)
    try:
        real = os.path.realpath(path, strict=True)
        if os.geteuid() == 0:
            _world_walkable(real, url)
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FailedPrecondition(f"remote volume {url}: no such file on this host") from None
    except OSError as exc:
        raise FailedPrecondition(f"remote volume {url}: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (os.geteuid() == 0 and not st.st_mode & stat.S_IROTH):
        os.close(fd)
        raise PermissionDenied(f"remote volume {url}: not a regular file every user may read")
    return os.fdopen(fd, "rb"), st.st_size


def _world_walkable(real: str, url: str) -> None:
    parent = os.path.dirname(real)
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            raise PermissionDenied(f"remote volume {url}: {parent} is closed to other users")
        if parent == "/":
            return
        parent = os.path.dirname(parent)


def refuse(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
    """A scheme this agent has no client for (the host manager says so before; a safety net)."""
    raise FailedPrecondition(f"remote volume {url}: this agent does not fetch that scheme")


OPENERS: dict[FetchKind, Opener] = {FetchKind.FILE: open_file, FetchKind.HTTP: open_http,
                                    FetchKind.MESOS: refuse}


def download(vol: RemoteVolume, opener: Opener, tmp: Path, *, max_mb: float,
             timeout_secs: float, monotonic: Callable[[], float]
             ) -> tuple[Path, str, int]:
    """Fetch `vol` with `opener` into a new file of `tmp`: (the file, its sha256, its
    bytes).  At most `max_mb` (ResourceExhausted naming the URL) within `timeout_secs`
    (Unavailable); an I/O failure is Unavailable; nothing is left behind on failure."""
    limit = max_mb * MB
    deadline = monotonic() + timeout_secs
    staged = tmp / uuid.uuid4().hex
    digest = hashlib.sha256()
    size = 0
    try:
        src, length = opener(vol.url, timeout_secs)
        with src, open(staged, "xb") as out:
            if length is not None and length > limit:
                raise _too_big(vol, max_mb, length)
            while chunk := src.read(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise _too_big(vol, max_mb, None)
                if monotonic() > deadline:
                    raise Unavailable(f"remote volume {vol.url}: not fetched within "
                                      f"{timeout_secs:g} s")
                digest.update(chunk)
                out.write(chunk)
    except OSError as exc:
        remove_path(staged)
        raise Unavailable(f"remote volume {vol.url}: fetch failed: {exc}") from None
    except BaseException:
        remove_path(staged)
        raise
    return staged, digest.hexdigest(), size


def _too_big(vol: RemoteVolume, max_mb: float, length: int | None) -> ResourceExhausted:
    size = f" ({length / MB:.1f} MB)" if length is not None else ""
    return ResourceExhausted(f"remote volume {vol.url} is larger{size} than this agent's "
                             f"limit of {max_mb:g} MB", field="command.uris")
