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
import re
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import click
import yaml
from google.protobuf import json_format
from google.protobuf.message import Message
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli.table import Col, render
from cli.table import width as table_width
from peloton.core.errors import PelotonError, Unavailable


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


_DAEMONS = {"jobmgr": ("job manager", "-m/--jobmgr or $JOBMGR_URL"),
            "resmgr": ("resource manager", "-v/--resmgr or $RESMGR_URL"),
            "hostmgr": ("host manager", "-u/--hostmgr or $HOSTMGR_URL")}
_UNREACHABLE = re.compile(r"^cannot reach peloton-(\w+) \(.*?\) at (\S+): (.*)$", re.S)


def down_hint(exc: PelotonError) -> str:
    """One line for "nothing answers at the address" (no cluster running), else ''."""
    m = _UNREACHABLE.match(exc.message)
    if not isinstance(exc, Unavailable) or m is None or not re.search(
            r"failed to connect|Connection refused|No route|Name resolution|DNS", m[3], re.I):
        return ""
    name, flag = _DAEMONS.get(m[1], (m[1], "the global flags"))
    return (f"no Peloton {name} answers at {m[2]}: is a cluster running? Start one with "
            f"`make run` (or `peloton up`), or point the CLI at yours with {flag}.")


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

    def table(self, headers: Sequence[Col | str], rows: Sequence[Sequence[Any]], *,
              empty: str = "") -> None:
        """Rows under a header line, fitted to the terminal (cli/table.py); `empty` is
        printed instead when there are no rows."""
        if not rows:
            if empty:
                click.echo(empty)
            return
        click.echo("\n".join(render(headers, rows)))

    def fields(self, pairs: Sequence[tuple[str, Any]]) -> None:
        """A curated view: `Label  value` lines, labels aligned, long values wrapped under
        their value column; empty values are left out."""
        shown = [(k, " ".join(str(v).split())) for k, v in pairs if v not in (None, "")]
        if not shown:
            return
        pad = max(len(k) for k, _ in shown) + 2
        room = max(20, table_width() - pad)
        for key, value in shown:
            pieces = textwrap.wrap(value, room, break_on_hyphens=False) or [""]
            click.echo(f"{key.ljust(pad)}{pieces[0]}".rstrip())
            for piece in pieces[1:]:
                click.echo(f"{' ' * pad}{piece}")

    def wrapped(self, text: str) -> None:
        """A line of prose, wrapped at the terminal's width; continuation lines are indented
        two more spaces than the first."""
        indent = len(text) - len(text.lstrip(" "))
        lines = textwrap.wrap(text.strip(), table_width(), initial_indent=" " * indent,
                              subsequent_indent=" " * (indent + 2), break_on_hyphens=False)
        for line in lines or [""]:
            click.echo(line)

    def raw_as(self, message: Message | dict[str, Any] | list[Any], fmt: str) -> None:
        """`-o json|yaml`: the raw message (or data) instead of the curated view."""
        plain = to_dict(message) if isinstance(message, Message) else message
        self.dump(plain, fmt)

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
        text = down_hint(exc) or exc.message
        if exc.field and exc.field not in text and exc.field != "config":
            text = f"{text} (field: {exc.field})"
        click.echo(f"Error: {text}", err=True)

    @contextmanager
    def progress(self, title: str, total: int) -> Iterator[ProgressView]:
        """A live progress bar on stderr for the duration of a wait.

        When stderr is not a terminal (a CI log, a pipe) a bar is drawn only once, when the
        wait ends, so a wait that never ends would leave nothing behind: there each change
        is printed as a line of its own instead, with the time since the wait began.
        """
        console = self._console(err=True)
        if not console.is_terminal:
            yield ProgressView(None, None, log=(console, title))
            return
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                       console=console, transient=False)
        task = bar.add_task(title, total=max(total, 1), detail="")
        with bar:
            yield ProgressView(bar, task)


class ProgressView:
    """Handle to update one progress bar (or, off a terminal, its log of changes)."""

    def __init__(self, bar: Progress | None, task: Any, *,
                 log: tuple[Console, str] | None = None) -> None:
        self._bar = bar
        self._task = task
        self._log = log
        self._started = time.monotonic()
        self._last: tuple[int, int, str] | None = None

    def update(self, done: int, total: int, detail: str) -> None:
        """Show `done` of `total`, with a short state summary beside the bar."""
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=max(total, 1), detail=detail)
        if self._log is None or (done, total, detail) == self._last:
            return
        self._last = (done, total, detail)
        console, title = self._log
        console.print(f"{title} {done}/{max(total, 1)} {detail} "
                      f"{timedelta(seconds=int(time.monotonic() - self._started))}",
                      markup=False, highlight=False)
