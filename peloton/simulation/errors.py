"""The one input error of the simulation's file formats: which file, which line, which field.

Every loader raises `InputError` (an `InvalidArgument`, so the CLI exits with code 4)
whose message starts with where the problem is, e.g.

    trace.jsonl:7: resources.cpu: must be a number >= 0, got -1

so a user can jump to the line and fix the field.  `line` is None for whole-file
problems and for YAML documents (whose fields are named by path instead).
"""

from __future__ import annotations

from peloton.core.errors import InvalidArgument


class InputError(InvalidArgument):
    """A trace, cluster, pools or what-if file is malformed or inconsistent."""

    def __init__(self, source: str, detail: str, *, line: int | None = None,
                 field: str | None = None) -> None:
        where = source if line is None else f"{source}:{line}"
        text = f"{where}: {field}: {detail}" if field else f"{where}: {detail}"
        super().__init__(text, field=field)
        self.source = source
        self.line = line
        self.detail = detail
