"""docs/benchmarks.md is written by `make bench` from its table and docs/benchmarks-notes.md:
an edit made to benchmarks.md's notes alone is lost at the next `make bench`."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_benchmarks_page_ends_with_the_notes_it_is_written_from() -> None:
    page = (DOCS / "benchmarks.md").read_text()
    notes = (DOCS / "benchmarks-notes.md").read_text().strip()
    assert page.rstrip().endswith(notes), (
        "docs/benchmarks.md's notes differ from docs/benchmarks-notes.md: edit the notes file "
        "(tests/bench/run.py appends it to the table) and copy the change to benchmarks.md")
