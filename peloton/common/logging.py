"""One logging setup for every daemon: a level, and plain text or JSON lines.

`setup_logging` configures the root logger with a single handler it owns
(calling it again replaces that handler, so tests and `peloton up` can call
it freely).  JSON mode writes one object per line with `ts` (ISO 8601 UTC),
`level`, `logger`, `msg`, `daemon` when given, any `extra={...}` fields the
call passed, and `exc` with the formatted traceback when there is one, so
log shippers need no parsing rules.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from peloton.core.errors import InvalidArgument

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
PLAIN_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    """The `logging` config section."""

    level: str = "INFO"
    json: bool = False

    def __post_init__(self) -> None:
        if self.level.upper() not in LEVELS:
            raise InvalidArgument(f"level must be one of {', '.join(LEVELS)}, got {self.level!r}",
                                  field="level")


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object (see the module docstring for the keys)."""

    def __init__(self, daemon: str | None = None) -> None:
        super().__init__()
        self._daemon = daemon

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single line of JSON."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if self._daemon:
            entry["daemon"] = self._daemon
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class _OwnedHandler(logging.StreamHandler[TextIO]):
    """Marks the handler `setup_logging` installed, so a second call replaces only it."""


def setup_logging(level: str | int = "INFO", *, json_lines: bool = False, daemon: str | None = None,
                  stream: TextIO | None = None) -> logging.Handler:
    """Configure the root logger; returns the installed handler."""
    if isinstance(level, str):
        if level.upper() not in LEVELS:
            raise InvalidArgument(f"unknown log level {level!r}", field="logging.level")
        level = getattr(logging, level.upper())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OwnedHandler)]:
        root.removeHandler(old)
        old.close()
    handler = _OwnedHandler(stream if stream is not None else sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter(daemon))
    else:
        prefix = f"[{daemon}] " if daemon else ""
        handler.setFormatter(logging.Formatter(prefix + PLAIN_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
    # kazoo logs every reconnect attempt at INFO/WARNING; keep its noise one level down.
    logging.getLogger("kazoo.client").setLevel(max(int(level), logging.WARNING))
    return handler
