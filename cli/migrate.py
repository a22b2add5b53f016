"""`peloton migrate`: schema versions, and moving a cluster's state between stores.

These commands talk to databases directly (not through the API): they are
run by an operator with the daemons stopped or, for `copy`, still running
(see migrations/README.md for a live cut-over).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.exit_codes import ExitCode, exit_code_for
from migrations import copy as copy_tool
from migrations import schema as schema_tool
from migrations import verify as verify_tool
from peloton.core.errors import PelotonError

STORE_HELP = "store URL: sqlite:///path, postgresql://user@host:port/db, cassandra://host:port/ks"


@contextmanager
def _errors() -> Iterator[None]:
    """Report a PelotonError as one line on stderr with its exit code."""
    try:
        yield
    except PelotonError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exit_code_for(exc))
    except KeyboardInterrupt:
        click.echo("interrupted; run the same command again to resume", err=True)
        sys.exit(ExitCode.INTERRUPTED)


@click.group()
def migrate() -> None:
    """Upgrade schemas and copy a cluster's state between stores.

    \b
    Examples:
      peloton migrate schema up --store sqlite:///var/peloton/state.db
      peloton migrate copy --from sqlite:///state.db --to postgresql://pg/peloton
      peloton migrate verify --from sqlite:///state.db --to postgresql://pg/peloton
    """


@migrate.group()
def schema() -> None:
    """Show, upgrade or downgrade a store's schema version.

    \b
    Example:
      peloton migrate schema status --store postgresql://postgres@db:5432/peloton
    """


@schema.command("status")
@click.option("--store", "url", required=True, help=STORE_HELP)
def schema_status(url: str) -> None:
    """Print the schema version; exit 1 unless it is the one this release needs.

    \b
    Example:
      peloton migrate schema status --store sqlite:///state.db
    """
    with _errors():
        st = schema_tool.status(url)
    click.echo(f"current: {st.current or 'no schema'}")
    click.echo(f"required: {st.required}")
    if st.ok:
        click.echo("up to date")
        return
    if st.ahead:
        click.echo("the database is newer than this release")
    else:
        click.echo(f"pending: {', '.join(st.pending)}")
    sys.exit(ExitCode.ERROR)


@schema.command("up")
@click.option("--store", "url", required=True, help=STORE_HELP)
@click.option("--to", "target", default="head", show_default=True, help="version to stop at")
def schema_up(url: str, target: str) -> None:
    """Apply pending migrations.

    \b
    Example:
      peloton migrate schema up --store sqlite:///state.db
    """
    with _errors():
        applied = schema_tool.upgrade(url, target)
    click.echo("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))


@schema.command("down")
@click.option("--store", "url", required=True, help=STORE_HELP)
@click.option("--to", "target", default="-1", show_default=True,
              help='version to go back to ("-1" = one step, "base" = drop everything)')
def schema_down(url: str, target: str) -> None:
    """Revert migrations (one step by default).

    \b
    Example:
      peloton migrate schema down --store sqlite:///state.db --to 0001
    """
    with _errors():
        reverted = schema_tool.downgrade(url, target)
    click.echo("reverted: " + (", ".join(reverted) if reverted else "nothing"))


def _progress_hook(progress: Progress) -> Callable[[str, int, int], None]:
    tasks: dict[str, Any] = {}

    def hook(kind: str, advance: int, total: int) -> None:
        if advance < 0:
            tasks[kind] = progress.add_task(kind, total=total)
        else:
            progress.advance(tasks[kind], advance)
    return hook


@migrate.command("copy")
@click.option("--from", "source_url", required=True, help="source " + STORE_HELP)
@click.option("--to", "dest_url", required=True, help="destination " + STORE_HELP)
@click.option("--batch-size", default=500, show_default=True, help="records per transaction")
@click.option("--restart", is_flag=True, help="ignore the checkpoint of an earlier run")
@click.option("--no-progress", is_flag=True, help="no progress bars")
def copy_cmd(source_url: str, dest_url: str, batch_size: int, restart: bool,
             no_progress: bool) -> None:
    """Copy every entity; run it again to resume or to catch up with a live source.

    \b
    Example:
      peloton migrate copy --from sqlite:///state.db --to postgresql://pg/peloton
    """
    with _errors():
        source, dest = copy_tool.open_url(source_url), copy_tool.open_url(dest_url)
        try:
            progress = Progress(TextColumn("{task.description:<15}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(),
                                console=Console(stderr=True), disable=no_progress)
            with progress:
                report = copy_tool.copy_store(source, dest, batch_size=batch_size,
                                              restart=restart, progress=_progress_hook(progress))
        finally:
            source.close()
            dest.close()
    for k in report.kinds:
        extra = (f", {k.unchanged} unchanged, {k.deleted} deleted" if k.mode == "catch-up"
                 else "")
        click.echo(f"{k.kind:<15} {k.mode:<9} {k.written} written{extra}")
    click.echo(f"done: {report.written} records written")


@migrate.command("verify")
@click.option("--from", "source_url", required=True, help="source " + STORE_HELP)
@click.option("--to", "dest_url", required=True, help="destination " + STORE_HELP)
@click.option("--max-diffs", default=10, show_default=True, help="differences listed per kind")
def verify_cmd(source_url: str, dest_url: str, max_diffs: int) -> None:
    """Compare counts and checksums of every entity kind; exit 1 on any difference.

    \b
    Example:
      peloton migrate verify --from sqlite:///state.db --to postgresql://pg/peloton
    """
    with _errors():
        source, dest = copy_tool.open_url(source_url), copy_tool.open_url(dest_url)
        try:
            report = verify_tool.verify_stores(source, dest, max_diffs=max_diffs)
        finally:
            source.close()
            dest.close()
    table = Table("kind", "source", "destination", "checksum", "result")
    for k in report.kinds:
        same = "same" if k.source_checksum == k.dest_checksum else "DIFFERENT"
        table.add_row(k.kind, str(k.source_count), str(k.dest_count), same,
                      "ok" if k.ok else "MISMATCH")
    Console(width=100).print(table)
    for k in report.kinds:
        for line in k.corrupt + k.differences:
            click.echo(f"  {k.kind}: {line}")
    if not report.ok:
        click.echo("stores differ", err=True)
        sys.exit(ExitCode.ERROR)
    click.echo("stores match")
