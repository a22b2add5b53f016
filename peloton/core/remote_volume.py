"""Immutable remote volumes: how a task config's URI (Peloton's `command.uris`, Mesos'
CommandInfo.URI) is read into what a host fetches and where the run sees it.

Peloton has no field of its own for a remote volume: on Mesos a job named files to fetch in
`command.uris`, and `cache: true` had the Mesos fetcher download each URI once per agent into
its cache.  We read the same field the same way, so a Peloton job file works unchanged:

* `value` is the URL (`SCHEMES`): `file://`, `http://`, `https://` or an absolute path are
  fetched by our agent; the Mesos fetcher's other schemes (hdfs, s3, ftp, ...) are accepted
  (the Mesos backend passes them on) and fail a run on our agent, naming the scheme; any other
  scheme is refused at create.  An optional checksum
  rides in the URL's fragment, `#sha256=<64 hex digits>` (the pip convention): a fragment is
  never sent to a server, so the same URL fetches the same bytes on Mesos, which ignores it.
  Changing the URL (or its checksum) changes the task config, so it rolls out as an ordinary
  job update, and is rolled back by one.
* `cache: true` makes it an immutable remote volume: fetched once per host into a
  content-addressed, read-only cache, and linked into each run's sandbox.  Without `cache`
  it is fetched again for every run and copied into the sandbox, owned by the task (Mesos).
* The run sees it at `output_file`, relative to its sandbox (no mount namespace here, as for
  persistent volumes), else at the URL's last path segment.
* `extract` (Mesos' default is true) unpacks an archive (`ARCHIVES`) into a directory at that
  path, named without the archive suffix unless `output_file` names it; anything else is
  presented as fetched.

Everything here is pure: the agent does the fetching, the API's validation calls
`remote_volumes` on a task's URIs so a bad one is refused at create, naming its field, and
the host manager's agent backend reads them again for each launch (`unfetchable` says why
our agent cannot fetch one the Mesos fetcher could).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import unquote, urlsplit

from peloton.core.errors import InvalidArgument
from peloton.core.lifecycle.volume_states import sandbox_relative
from peloton.core.model.task import UriSpec


class FetchKind(StrEnum):
    """How a URL's bytes are read by our agent."""

    FILE = "file"   # a local file, read by the agent (only if any user could read it)
    HTTP = "http"   # a GET; redirects are followed
    MESOS = "mesos"  # only the Mesos fetcher has a client for it: our agent fails the run


#: URL scheme ("" for an absolute path, as the Mesos fetcher takes one) -> how it is fetched.
#: Anything else is refused at create.
SCHEMES: dict[str, FetchKind] = {
    "": FetchKind.FILE, "file": FetchKind.FILE, "http": FetchKind.HTTP, "https": FetchKind.HTTP,
    **{s: FetchKind.MESOS for s in ("ftp", "ftps", "hdfs", "hftp", "s3", "s3a", "s3n")}}

#: Archive suffix -> tarfile compression ("" for none).  Longest suffixes first, so
#: `x.tar.gz` is a gzipped tar, not a `.gz`.
ARCHIVES: dict[str, str] = {".tar.gz": "gz", ".tar.bz2": "bz2", ".tar.xz": "xz",
                            ".tgz": "gz", ".tbz2": "bz2", ".txz": "xz", ".tar": ""}

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class RemoteVolume:
    """One URI as a host fetches it."""

    url: str          # what is fetched: the URI without its fragment
    sha256: str       # the digest the fetched bytes must have; "" when none was given
    path: str         # where the run sees it, relative to its sandbox
    kind: FetchKind
    cache: bool       # shared read-only cache entry (an immutable remote volume)
    archive: str | None  # tarfile compression when it is unpacked, None when not
    executable: bool

    @property
    def cache_key(self) -> str:
        """What names one cached entry's source: the URL, its checksum and how it is
        presented (an unpacked archive and the file itself are different entries)."""
        return "\n".join((self.url, self.sha256, "x" if self.executable else "",
                          "" if self.archive is None else f"tar:{self.archive}"))


def archive_suffix(name: str) -> str | None:
    """The archive suffix `name` ends with (`ARCHIVES`), None when it is not an archive."""
    lower = name.lower()
    return next((s for s in ARCHIVES if lower.endswith(s) and len(lower) > len(s)), None)


def remote_volume(uri: UriSpec, field: str = "command.uris") -> RemoteVolume:
    """Read one URI; raises InvalidArgument (naming `field`) for a scheme we cannot fetch,
    a malformed checksum or a path outside the sandbox."""
    try:
        parts = urlsplit(uri.value.strip())
    except ValueError as exc:
        raise InvalidArgument(f"URI {uri.value!r} is not a URL: {exc}", field=field) from None
    kind = SCHEMES.get(parts.scheme.lower())
    if kind is None:
        raise InvalidArgument(f"URI {uri.value!r}: scheme must be one of "
                              f"{', '.join(sorted(s for s in SCHEMES if s))} (or an absolute "
                              "path)", field=field)
    if not parts.scheme and not parts.path.startswith("/"):
        raise InvalidArgument(f"URI {uri.value!r}: a path must be absolute", field=field)
    if kind is FetchKind.FILE and parts.netloc not in ("", "localhost"):
        raise InvalidArgument(f"URI {uri.value!r}: a file URL names a path on the host "
                              "(file:///path)", field=field)
    if kind is FetchKind.HTTP and not parts.hostname:
        raise InvalidArgument(f"URI {uri.value!r} names no host", field=field)
    sha256 = ""
    if parts.fragment:
        key, _, value = parts.fragment.partition("=")
        if key != "sha256" or not _SHA256.fullmatch(value.lower()):
            raise InvalidArgument(f"URI {uri.value!r}: the only fragment understood is "
                                  "#sha256=<64 hex digits>", field=field)
        sha256 = value.lower()
    name = posixpath.basename(unquote(parts.path).rstrip("/"))
    suffix = archive_suffix(name) if uri.extract else None
    if uri.output_file.strip():
        path = uri.output_file
    elif suffix is not None:
        path = name[:-len(suffix)]
    else:
        path = name
    if not path or path in (".", ".."):
        raise InvalidArgument(f"URI {uri.value!r} names no file: give it an outputFile",
                              field=field)
    try:
        rel = sandbox_relative(path)
    except InvalidArgument:
        raise InvalidArgument(f"URI {uri.value!r}: outputFile {path!r} must name a path "
                              "inside the sandbox", field=field) from None
    url = parts._replace(fragment="").geturl()
    if not parts.scheme:
        url = f"file://{parts.path}"
    return RemoteVolume(url=url, sha256=sha256, path=rel,
                        kind=kind, cache=uri.cache,
                        archive=None if suffix is None else ARCHIVES[suffix],
                        executable=uri.executable)


def remote_volumes(uris: tuple[UriSpec, ...]) -> tuple[RemoteVolume, ...]:
    """Every URI of a command, read; two that would land on the same path are refused."""
    out = tuple(remote_volume(u, f"command.uris[{i}]") for i, u in enumerate(uris))
    seen: dict[str, int] = {}
    for i, vol in enumerate(out):
        if vol.path in seen:
            raise InvalidArgument(f"URIs {seen[vol.path]} and {i} both land at {vol.path!r}",
                                  field=f"command.uris[{i}]")
        seen[vol.path] = i
    return out


def unfetchable(vol: RemoteVolume) -> str | None:
    """Why our agent cannot fetch `vol` (a scheme only the Mesos fetcher has), None if it can."""
    if vol.kind is FetchKind.MESOS:
        scheme = vol.url.partition(":")[0]
        return (f"URI {vol.url}: {scheme} is fetched only by the Mesos fetcher, not by this "
                "cluster's agents (use http(s) or file)")
    return None


def mismatch(vol: RemoteVolume, got: str) -> str | None:
    """Why fetched bytes with digest `got` must not be used, None when they may."""
    if vol.sha256 and got != vol.sha256:
        return (f"remote volume {vol.url}: sha256 mismatch: expected {vol.sha256}, "
                f"fetched {got}")
    return None
