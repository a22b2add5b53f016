"""Where each config object was written: file and line, for error messages.

While a `.aurora` file runs, every schema object made (by a constructor, a
call that overrides fields, or `.bind`) records the innermost line of a
config file on the call stack: the line that made it.  Copies made later
(Pystachio copies objects whenever it scopes or interpolates them) keep the
origin of the object they copy.  A missing field or a bad value found after
loading is then reported at the line that wrote the object holding it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from aurorabridge.client.schema import STRUCTS

_ATTR = "_config_origin"


@dataclass(frozen=True)
class Origin:
    """A place in a config file."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class _Loading(threading.local):
    files: frozenset[str] = frozenset()


_loading = _Loading()
_installed = False
_lock = threading.Lock()


def _caller() -> Origin | None:
    files = _loading.files
    if not files:
        return None
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename in files:
            return Origin(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def origin_of(obj: Any) -> Origin | None:
    """The place that made `obj` (None for objects made outside a config file)."""
    found = getattr(obj, "__dict__", {}).get(_ATTR)
    return found if isinstance(found, Origin) else None


def _track(cls: Any) -> None:
    base_init = cls.__init__
    base_copy = cls.copy

    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        base_init(self, *args, **kw)
        where = _caller()
        if where is not None:
            self.__dict__[_ATTR] = where

    def copy(self: Any) -> Any:
        new = base_copy(self)
        if origin_of(new) is None and (where := origin_of(self)) is not None:
            new.__dict__[_ATTR] = where
        return new

    cls.__init__ = __init__
    cls.copy = copy


def install() -> None:
    """Track the origins of every schema struct (idempotent)."""
    global _installed
    with _lock:
        if not _installed:
            for cls in STRUCTS:
                _track(cls)
            _installed = True


def also_record(path: str) -> None:
    """Record origins in `path` too, until the enclosing `recording()` block ends (an included
    file's functions may be called after the include, from the including file)."""
    _loading.files = _loading.files | {path}


@contextmanager
def recording(path: str) -> Iterator[None]:
    """Record origins in `path` (and files added by also_record) while the block runs."""
    install()
    before = _loading.files
    _loading.files = before | {path}
    try:
        yield
    finally:
        _loading.files = before
