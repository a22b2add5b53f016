"""Where archived jobs go: the `ArchiveSink` seam, its query, and the registry by URL.

Two implementations pass one contract suite (tests/contract/test_archive_sinks.py):

- `dir:///path` — a directory of gzip-compressed, checksummed JSON-lines
  segments with an index (archiver/dir_sink.py);
- `sqlite:///file.db`, `postgresql://user@host/db` — tables of the sink's
  own in any SQL database (archiver/sql_sink.py).

The archiver engine is the only writer; the CLI (`peloton archive get |
query | verify`) reads.  A sink owns its files or database: nothing else in
Peloton touches them, and they never share hot storage's tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from archiver.record import ArchiveRecord, RecordSummary
from peloton.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """A search of archived jobs; every filter is ANDed, None/empty matches all.

    - `name`: case-insensitive substring of the job name (as `job query --name`);
    - `owner`: exact owner or owning team;
    - `states`: the job's final state is one of these (JobState names);
    - `since`/`until`: completion time in [since, until), epoch seconds;
    - results are newest completion first (ties by job id), at most `limit`.
    """

    name: str | None = None
    owner: str | None = None
    states: frozenset[str] = frozenset()
    since: float | None = None
    until: float | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 0:
            raise InvalidArgument("limit must be >= 0", field="limit")


@dataclass(frozen=True, slots=True)
class Problem:
    """One damaged unit found by `verify` (a segment file, a row), and what is wrong with it."""

    where: str
    detail: str


def matches(query: RecordQuery, s: RecordSummary) -> bool:
    """The one definition of a match (the SQL sink's WHERE clause must agree; the suite checks)."""
    if query.name is not None and query.name.lower() not in s.name.lower():
        return False
    if query.owner is not None and query.owner not in (s.owner, s.owning_team):
        return False
    if query.states and s.state not in query.states:
        return False
    if query.since is not None and s.completion_time < query.since:
        return False
    return query.until is None or s.completion_time < query.until


def select(query: RecordQuery, summaries: Iterable[RecordSummary]) -> list[RecordSummary]:
    """Filter, order (newest completion first, then job id) and cut to the limit."""
    found = sorted((s for s in summaries if matches(query, s)), key=lambda s: s.job_id)
    found.sort(key=lambda s: s.completion_time, reverse=True)
    return found if query.limit is None else found[:query.limit]


@runtime_checkable
class ArchiveSink(Protocol):
    """Durable cold storage of archive records.

    Single writer (one archiver); any number of readers, in other processes
    too.  Reads see flushed records only.  Every read verifies the stored
    bytes against the record's SHA-256 and raises `ArchiveCorrupt` naming
    the damaged segment or row; damage is never silently skipped.
    """

    url: str

    def append(self, record: ArchiveRecord) -> bool:
        """Queue `record` for the next flush; idempotent.

        Returns False when the newest stored (or queued) record of that job
        already has the same SHA-256 — re-archiving after a crash is a no-op.
        A different record for the same job becomes its newest version; the
        older one is kept (nothing archived is ever overwritten).
        """
        ...

    def flush(self) -> None:
        """Make every appended record durable (fsync'd / committed) before returning.

        This is the point the engine waits for before deleting a job from
        hot storage.  Raises if anything could not be made durable; then
        none of the queued records may be assumed stored.
        """
        ...

    def get(self, job_id: str) -> ArchiveRecord:
        """The newest flushed record of `job_id` (NotFound if none, ArchiveCorrupt if damaged)."""
        ...

    def query(self, query: RecordQuery = RecordQuery()) -> list[RecordSummary]:
        """Summaries of the newest record of each matching job (see `RecordQuery`)."""
        ...

    def count(self) -> int:
        """How many distinct jobs are archived (flushed)."""
        ...

    def verify(self) -> list[Problem]:
        """Check every stored byte against its checksum; an empty list means intact."""
        ...

    def close(self) -> None:
        """Release files and connections; records appended but not flushed are dropped."""
        ...


#: URL scheme -> "module:function" opening a sink of that kind (imported on use).
SCHEMES = {
    "dir": "archiver.dir_sink:open_dir_sink",
    "sqlite": "archiver.sql_sink:open_sql_sink",
    "postgresql": "archiver.sql_sink:open_sql_sink",
    "postgresql+psycopg": "archiver.sql_sink:open_sql_sink",
    "postgres": "archiver.sql_sink:open_sql_sink",
}


def open_sink(url: str, *, create: bool = True) -> ArchiveSink:
    """Open the sink at `url` (`dir:///abs/path`, `dir:rel/path`, `sqlite:///f.db`, `postgresql://…`).

    A bare path (no scheme) is a directory sink.  `create` False refuses
    to create an archive that does not exist yet (readers should not
    litter empty archives); NotFound then.
    """
    import importlib

    if ":" not in url:
        url = f"dir:{url}"
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    target = SCHEMES.get(scheme)
    if target is None:
        known = ", ".join(f"{s}://" for s in ("dir", "sqlite", "postgresql"))
        raise InvalidArgument(f"unknown archive URL {url!r}; use one of {known}", field="archive")
    module, func = target.split(":")
    opener = getattr(importlib.import_module(module), func)
    sink: ArchiveSink = opener(url, create=create)
    return sink
