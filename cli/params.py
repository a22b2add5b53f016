"""Parameter types and small parsers shared by the command modules.

They reproduce the original CLI's syntax: Go durations for `--timeout`,
`from:to` instance ranges (`[from, to)`; either side may be omitted, so
`:` is every instance), comma-separated lists, and `key=value,...` labels
(`key:value` for the watch filters, as the original).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

#: The original's "to" when a range leaves it open: every instance.
MAX_INSTANCE = 2**31 - 1

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (`20s`, `1m30s`, `500ms`) or a bare number of seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a duration: {text!r} (use e.g. 20s, 1m30s, 500ms)")
    return total


def parse_range(text: str) -> tuple[int, int]:
    """`from:to` → (from, to); `:200` is the first 200, `50:` is 50 onwards."""
    if ":" not in text:
        raise ValueError(f"expected FROM:TO, got {text!r}")
    lo, hi = text.split(":", 1)
    start = int(lo) if lo.strip() else 0
    end = int(hi) if hi.strip() else MAX_INSTANCE
    if start < 0 or end < 0:
        raise ValueError(f"negative bound in range {text!r}")
    return start, end


class _Converted(click.ParamType):  # type: ignore[type-arg]  # generic only in click >= 8.2
    def __init__(self, name: str, convert: Callable[[str], Any]) -> None:
        self.name = name
        self._convert = convert

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self._convert(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = _Converted("duration", parse_duration)
RANGE = _Converted("from:to", parse_range)


def range_option(help_text: str, *, multiple: bool = True) -> Callable[[Any], Any]:
    """`-r/--range from:to`, repeatable (`ranges`) or single (`rng`)."""
    name = "ranges" if multiple else "rng"
    return click.option("-r", "--range", name, type=RANGE, multiple=multiple,
                        help=f"{help_text} (from:to, [from,to); {'repeatable; ' if multiple else ''}"
                             "default all instances).")


def csv(text: str) -> list[str]:
    """Non-empty items of a comma-separated list."""
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_labels(text: str, sep: str = "=") -> list[tuple[str, str]]:
    """`k1=v1,k2=v2` → [(k1, v1), (k2, v2)]; a bad item is a usage error."""
    labels = []
    for item in csv(text):
        parts = item.split(sep)
        if len(parts) != 2:
            raise click.BadParameter(f"invalid label {item!r}; expected key{sep}value")
        labels.append((parts[0].strip(), parts[1].strip()))
    return labels


def enum_names(text: str, names: list[str], prefix: str = "") -> list[str]:
    """Validate comma-separated enum names (the `prefix` may be omitted: RUNNING ≡ POD_STATE_RUNNING)."""
    chosen = []
    for item in csv(text):
        name = item.upper()
        if name not in names and prefix + name in names:
            name = prefix + name
        if name not in names:
            raise click.BadParameter(f"unknown state {item!r}; choose from {', '.join(names)}")
        chosen.append(name)
    return chosen


#: The job label that asks Peloton to queue a job no host could hold now (see the README).
QUEUE_ANYWAY = "peloton/queue-anyway"


def queue_anyway_option(f: Any) -> Any:
    """`--queue-anyway`: label the job so it is queued even if no host could ever hold it."""
    return click.option("--queue-anyway", is_flag=True,
                        help=f"Queue the job even if no UP host (or the pool's limit) could "
                             f"hold its tasks now, e.g. for hosts that join later (adds the "
                             f"label {QUEUE_ANYWAY}=true).")(f)


def add_queue_anyway(labels: Any, label_type: Any) -> None:
    """Add the queue-anyway label to a repeated Label field (once)."""
    if not any(lb.key == QUEUE_ANYWAY for lb in labels):
        labels.append(label_type(key=QUEUE_ANYWAY, value="true"))


def lenient_option(f: Any) -> Any:
    """`--lenient`: an unknown field in the YAML file is a warning, not an error."""
    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        ctx.meta["peloton.lenient"] = value

    return click.option("--lenient", is_flag=True, expose_value=False, callback=remember,
                        help="Only warn about unknown fields in the YAML file (the default is "
                             "to refuse them, naming file:line and the closest field).")(f)


def output_option(f: Any) -> Any:
    """`-o/--output yaml|json`: print the raw message instead of the curated view."""
    return click.option("-o", "--output", "output_format", type=click.Choice(["yaml", "json"]),
                        default=None, help="Print the full raw message as YAML or JSON instead "
                                           "of the summary.")(f)


def wait_options(what: str) -> Callable[[Any], Any]:
    """`--wait` and `--wait-timeout` for a command that starts something long-running."""
    def decorate(f: Any) -> Any:
        f = click.option("--wait-timeout", type=DURATION, default="0",
                         help="Give up waiting after this long (e.g. 10m; 0 = never); exit code 8.")(f)
        return click.option("--wait", is_flag=True,
                            help=f"Show live progress until {what}; exit code 12 if it fails.")(f)

    return decorate


F = Any


def security_options(f: F) -> F:
    """`--auth`, `--insecure` and `--tls-cert/--tls-key/--tls-ca` of every server command."""
    options = [
        click.option("--auth", default="", metavar="FILE", envvar="PELOTON_AUTH",
                     help="Users file: turns authentication and authorization on "
                          "(README, Security; `peloton auth hash-password` makes its hashes)."),
        click.option("--insecure", is_flag=True,
                     help="Allow serving a non-loopback address without --auth."),
        click.option("--tls-cert", default="", metavar="PEM",
                     help="This process's TLS certificate (chain): serve TLS, present it as a client."),
        click.option("--tls-key", default="", metavar="PEM", help="The key of --tls-cert."),
        click.option("--tls-ca", default="", metavar="PEM",
                     help="CA to trust; servers then require client certificates (mutual TLS)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f
