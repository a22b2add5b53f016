"""Plain-text tables that fit the terminal: drop low-value columns, wrap long text.

A table is a list of `Col`s and rows of cells.  It is drawn at the
terminal's width (80 columns when the output is not a terminal, or
`$COLUMNS`):

1. columns empty in every row are left out, unless they must stay;
2. while the narrowest possible table is too wide, the column with the
   highest `drop` rank goes (rank 0 never goes);
3. text columns (`wrap`) then share the width left and wrap onto more
   lines, on word boundaries where they can; other columns keep their
   natural width.

So a human table never runs past the right edge and never cuts a word a
user needs (ids are abbreviated by the views before they get here, keeping
their run suffix).
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest

#: Width used when stdout is not a terminal and $COLUMNS is not set.
DEFAULT_WIDTH = 80
GAP = "  "


@dataclass(frozen=True, slots=True)
class Col:
    """A column: its header, how readily it is dropped, whether its text wraps."""

    name: str
    #: 0: always shown; otherwise the highest rank is dropped first when space runs out.
    drop: int = 0
    #: Long text that wraps onto more lines instead of widening the table.
    wrap: bool = False
    #: Narrowest a wrapping column gets.
    min_width: int = 16
    #: Shown even when every cell is empty.
    keep_empty: bool = False


def width() -> int:
    """Columns available: the terminal's, else $COLUMNS, else 80."""
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return DEFAULT_WIDTH


def _col(c: Col | str) -> Col:
    return c if isinstance(c, Col) else Col(c)


def render(columns: Sequence[Col | str], rows: Sequence[Sequence[object]],
           total: int | None = None) -> list[str]:
    """The table's lines (no trailing blanks), fitted to `total` columns (default: width())."""
    total = width() if total is None else total
    cols = [_col(c) for c in columns]
    cells = [["" if v is None else " ".join(str(v).split()) for v in row] for row in rows]
    shown = [i for i, c in enumerate(cols)
             if c.drop == 0 or c.keep_empty or any(r[i] for r in cells)]

    def natural(i: int) -> int:
        return max([len(cols[i].name), *(len(r[i]) for r in cells)])

    def narrowest(i: int) -> int:
        c = cols[i]
        return min(natural(i), max(c.min_width, len(c.name))) if c.wrap else natural(i)

    def span(idx: list[int], measure: Callable[[int], int]) -> int:
        return sum(measure(i) for i in idx) + len(GAP) * max(0, len(idx) - 1)

    while span(shown, narrowest) > total:
        candidates = [i for i in shown if cols[i].drop > 0]
        if not candidates:
            break
        worst = max(candidates, key=lambda i: (cols[i].drop, i))
        shown.remove(worst)
    widths = {i: natural(i) for i in shown}
    wrapping = [i for i in shown if cols[i].wrap]
    over = span(shown, natural) - total
    if over > 0 and wrapping:
        fixed = sum(widths[i] for i in shown if i not in wrapping)
        room = total - fixed - len(GAP) * (len(shown) - 1)
        share = max(1, room // len(wrapping))
        for i in wrapping:
            widths[i] = max(narrowest(i), min(natural(i), share))
    lines = [_line([cols[i].name for i in shown], [widths[i] for i in shown]),
             "─" * min(total, span(shown, lambda i: widths[i]))]
    for row in cells:
        parts = [_wrap(row[i], widths[i]) if cols[i].wrap else [row[i]] for i in shown]
        for pieces in zip_longest(*parts, fillvalue=""):
            lines.append(_line(list(pieces), [widths[i] for i in shown]))
    return lines


def _wrap(text: str, limit: int) -> list[str]:
    if len(text) <= limit:
        return [text]
    return textwrap.wrap(text, limit, break_long_words=True, break_on_hyphens=False) or [""]


def _line(values: list[str], widths: list[int]) -> str:
    return GAP.join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()
