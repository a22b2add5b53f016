"""All of the CLI's rendering: tables, YAML/JSON documents, messages, progress bars, errors.

Command modules decide *what* to show; this module decides *how*.  With
`-j/--json` every read command prints the full response as JSON (proto
field names, enums by name, unset fields included, like the original's
jsonpb settings) so scripts get a stable shape.  Without it, lists are
tables (the original's column names) and single entities are YAML, as the
original printed them.  Progress bars and warnings go to stderr so stdout
stays parseable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import click
import yaml
from google.protobuf import json_format
from google.protobuf.message import Message
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from peloton.core.errors import PelotonError


def to_dict(message: Message) -> dict[str, Any]:
    """A message as plain data: proto field names, enum names, defaults included."""
    data: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    return data


def fmt_time(text: str) -> str:
    """An RFC3339 timestamp to the second (`2019-01-02T03:04:05Z`); '' if unparsable."""
    parsed = _parse_time(text)
    return parsed.strftime("%Y-%m-%dT%H:%M:%SZ") if parsed else ""


def fmt_run_time(start: str, end: str, now: datetime | None = None) -> str:
    """HH:MM:SS from `start` to `end` (or to now while running); '' without a start."""
    begin = _parse_time(start)
    if begin is None:
        return ""
    finish = _parse_time(end) or now or datetime.now(UTC)
    seconds = max(0, int((finish - begin).total_seconds()))
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _parse_time(text: str) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Output:
    """Renders one command's results to stdout (data) and stderr (progress, warnings, errors)."""

    def __init__(self, *, json_mode: bool) -> None:
        self.json_mode = json_mode

    def _console(self, err: bool = False) -> Console:
        # Built per call: click's test runner swaps sys.stdout between invocations.
        stream = sys.stderr if err else sys.stdout
        return Console(file=stream, soft_wrap=False, highlight=False,
                       width=None if stream.isatty() else 250)

    # -- data ---------------------------------------------------------------------------------
    def json(self, data: Message | dict[str, Any] | list[Any]) -> None:
        """Print `data` as indented JSON."""
        plain = to_dict(data) if isinstance(data, Message) else data
        click.echo(json.dumps(plain, indent=2, sort_keys=False))

    def document(self, message: Message) -> None:
        """One entity: JSON with -j, else YAML (the original's `get` format)."""
        if self.json_mode:
            self.json(message)
        else:
            click.echo(yaml.safe_dump(to_dict(message), sort_keys=False, default_flow_style=False).rstrip())

    def event(self, message: Message) -> None:
        """One item of a stream: a line of JSON with -j (NDJSON), else a YAML document."""
        if self.json_mode:
            click.echo(json.dumps(to_dict(message), separators=(",", ":")))
        else:
            click.echo("---")
            self.document(message)

    def dump(self, data: Any, fmt: str = "yaml") -> None:
        """Plain data (dicts, lists) as YAML or JSON (`fmt` is yaml, yml or json)."""
        if fmt.lower() == "json":
            self.json(data)
        else:
            click.echo(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip())

    def result(self, response: Message, text: str) -> None:
        """A write command's outcome: the response with -j, else one line of text."""
        if self.json_mode:
            self.json(response)
        else:
            click.echo(text)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], *, empty: str = "") -> None:
        """Rows under a header line; `empty` is printed instead when there are no rows."""
        if not rows:
            if empty:
                click.echo(empty)
            return
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False)
        for header in headers:
            table.add_column(header, no_wrap=True, overflow="ignore")
        for row in rows:
            table.add_row(*("" if cell is None else str(cell) for cell in row))
        console = self._console()
        with console.capture() as captured:
            console.print(table)
        # rich pads the last column; trailing blanks only get in the way of `cut`/`awk`.
        click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))

    def line(self, text: str) -> None:
        """A line of plain text on stdout."""
        click.echo(text)

    def raw(self, data: bytes) -> None:
        """Bytes as they are (file contents)."""
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    # -- side channel -------------------------------------------------------------------------
    def warn(self, text: str) -> None:
        """A warning on stderr."""
        click.echo(f"Warning: {text}", err=True)

    def error(self, exc: PelotonError) -> None:
        """Report a failed command on stderr (JSON with -j)."""
        if self.json_mode:
            body = {"error": {"kind": exc.kind, "message": exc.message, "field": exc.field}}
            click.echo(json.dumps(body), err=True)
            return
        text = exc.message
        if exc.field and exc.field not in text:
            text = f"{text} (field: {exc.field})"
        click.echo(f"Error: {text}", err=True)

    @contextmanager
    def progress(self, title: str, total: int) -> Iterator[ProgressView]:
        """A live progress bar on stderr for the duration of a wait."""
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                       console=self._console(err=True), transient=False)
        task = bar.add_task(title, total=max(total, 1), detail="")
        with bar:
            yield ProgressView(bar, task)


class ProgressView:
    """Handle to update one progress bar."""

    def __init__(self, bar: Progress, task: Any) -> None:
        self._bar = bar
        self._task = task

    def update(self, done: int, total: int, detail: str) -> None:
        """Show `done` of `total`, with a short state summary beside the bar."""
        self._bar.update(self._task, completed=done, total=max(total, 1), detail=detail)
