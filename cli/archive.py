"""`peloton archive`: read the jobs the archiver moved out of hot storage.

These commands open the archive itself (a directory or an SQL database, as
`--archive` or $PELOTON_ARCHIVE names it); no Peloton daemon needs to be
running.  `get` prints a job's whole record as `job get` prints a job
(YAML, or JSON with -j); `query` lists archived jobs in `job query`'s
columns; `verify` re-checks every checksum.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import click

from cli import context, params, views
from peloton.core.errors import DataCorruption

_DAYS = re.compile(r"^(\d+(?:\.\d*)?)d$")


def archive_option(f: Any) -> Any:
    """`--archive URL`, from $PELOTON_ARCHIVE when not given."""
    return click.option("--archive", "archive_url", required=True, envvar="PELOTON_ARCHIVE",
                        metavar="URL", help="The archive: dir:///path, a directory path, "
                        "sqlite:///file.db or postgresql://user@host/db ($PELOTON_ARCHIVE).")(f)


@contextmanager
def opened(url: str) -> Iterator[Any]:
    """The archive at `url`, for reading (NotFound if there is none)."""
    from archiver.sinks import open_sink

    sink = open_sink(url, create=False)
    try:
        yield sink
    finally:
        sink.close()


def parse_when(text: str, now: float | None = None) -> float:
    """Epoch seconds of `--since`/`--until`: a time ago (`36h`, `7d`) or a date (`2024-05-01T12:00Z`)."""
    now = time.time() if now is None else now
    days = _DAYS.match(text.strip())
    if days:
        return now - float(days.group(1)) * 86400
    try:
        return now - params.parse_duration(text)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither a time ago (36h, 7d) nor a date "
                                 "(2024-05-01, 2024-05-01T12:00:00Z)") from None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if seconds else ""


def summary_row(s: Any) -> list[Any]:
    """A RecordSummary in `job query`'s columns (views.JOB_SUMMARY)."""
    stats = dict(s.task_stats)
    return [views.short(s.job_id), s.name, s.owning_team or s.owner, s.state,
            views.when(_rfc3339(s.creation_time)), views.when(_rfc3339(s.completion_time)),
            s.instance_count, stats.get("RUNNING", 0), stats.get("SUCCEEDED", 0),
            stats.get("FAILED", 0), stats.get("KILLED", 0)]


@click.group("archive")
def archive() -> None:
    """Read archived jobs (finished jobs moved out of hot storage by `peloton archiver`).

    \b
    Example:
      peloton archive query --archive dir:///var/lib/peloton/archive --states FAILED --since 7d
      peloton archive get 358fad26-73fa-43c8-a350-1e9067571a76 --archive sqlite:///archive.db
    """


@archive.command("get")
@click.argument("job_id", metavar="JOB")
@archive_option
def get(job_id: str, archive_url: str) -> None:
    """Print an archived job: config, runtime, every task and its pod events (YAML, or JSON with -j).

    \b
    Example:
      peloton archive get 358fad26-73fa-43c8-a350-1e9067571a76 --archive dir:///var/archive
      peloton -j archive get 358fad26-73fa-43c8-a350-1e9067571a76 --archive ./archive | jq .tasks
    """
    out = context.out()
    with opened(archive_url) as sink:
        doc = sink.get(job_id).document()
    order = ["format", "job_id", "summary", "job", "tasks", "pod_events"]  # reading order
    ordered = {k: doc[k] for k in order if k in doc} | {k: v for k, v in doc.items() if k not in order}
    out.dump(ordered, "json" if out.json_mode else "yaml")


@archive.command("query")
@archive_option
@click.option("--name", default=None, help="Job name contains this (case-insensitive).")
@click.option("--owner", default=None, help="Owner or owning team.")
@click.option("-s", "--states", default="", help="Comma-separated final states, e.g. FAILED,KILLED.")
@click.option("--since", default=None, help="Completed at or after: a time ago (36h, 7d) or a date.")
@click.option("--until", default=None, help="Completed before: a time ago or a date.")
@click.option("-n", "--limit", default=100, show_default=True, type=int, help="Maximum jobs to list.")
def query(archive_url: str, name: str | None, owner: str | None, states: str, since: str | None,
          until: str | None, limit: int) -> None:
    """List archived jobs, newest completion first, in `job query`'s columns.

    \b
    Example:
      peloton archive query --archive ./archive --owner team-x --since 7d
      peloton -j archive query --archive sqlite:///archive.db --states FAILED -n 10
    """
    from archiver.sinks import RecordQuery

    spec = RecordQuery(name=name, owner=owner, states=frozenset(s.upper() for s in params.csv(states)),
                       since=parse_when(since) if since else None,
                       until=parse_when(until) if until else None, limit=limit)
    out = context.out()
    with opened(archive_url) as sink:
        found = sink.query(spec)
    if out.json_mode:
        out.json([s.to_json() for s in found])
        return
    out.table(views.JOB_SUMMARY, [summary_row(s) for s in found], empty="No archived jobs found.")


@archive.command("verify")
@archive_option
def verify(archive_url: str) -> None:
    """Re-check every stored byte against its checksum; exit 1 and name the damage if any.

    \b
    Example:
      peloton archive verify --archive dir:///var/lib/peloton/archive
    """
    out = context.out()
    with opened(archive_url) as sink:
        problems, count = sink.verify(), sink.count()
    if out.json_mode:
        out.json({"jobs": count, "problems": [{"where": p.where, "detail": p.detail} for p in problems]})
    elif not problems:
        out.line(f"{count} archived job(s); every checksum matches")
    else:
        out.table(["Where", "Problem"], [[p.where, p.detail] for p in problems])
    if problems:
        raise DataCorruption(f"{len(problems)} damaged unit(s) in the archive")
