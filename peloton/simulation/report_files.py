"""One call from run results to every form of the report, and writing them to a directory.

`render_report(results)` takes the baseline's result and optionally the what-if's,
and returns the text, the JSON, the PNG plots and the HTML page;
`write_report(directory, rendered)` writes report.txt, report.json, report.html
and the PNGs.  Same results, same bytes, file for file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from peloton.simulation.report import DEFAULT_BUCKETS, Comparison, RunReport, build_report, compare
from peloton.simulation.report_html import render_html
from peloton.simulation.report_json import render_json
from peloton.simulation.report_text import render_text
from peloton.simulation.result import SimulationResult


@dataclass(frozen=True, slots=True)
class RenderedReport:
    """Every form of one report."""

    baseline: RunReport
    whatif: RunReport | None
    comparison: Comparison | None
    text: str
    json: str
    html: str
    plots: dict[str, bytes]


def render_report(results: Sequence[SimulationResult], *, buckets: int = DEFAULT_BUCKETS,
                  plots: bool = True) -> RenderedReport:
    """The report of `results` (the baseline, then optionally one what-if)."""
    if not 1 <= len(results) <= 2:
        raise ValueError("a report covers a baseline and at most one what-if")
    baseline = build_report(results[0], buckets)
    whatif = build_report(results[1], buckets) if len(results) == 2 else None
    comparison = compare(baseline, whatif) if whatif else None
    pngs: dict[str, bytes] = {}
    if plots:
        from peloton.simulation.plots import render_plots

        pngs = render_plots(results)
    return RenderedReport(baseline, whatif, comparison,
                          text=render_text(baseline, whatif, comparison),
                          json=render_json(baseline, whatif, comparison),
                          html=render_html(baseline, whatif, comparison, pngs), plots=pngs)


def write_report(directory: str | Path, rendered: RenderedReport) -> list[Path]:
    """Write report.txt, report.json, report.html and the PNGs into `directory` (created if needed)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = {"report.txt": rendered.text.encode(), "report.json": rendered.json.encode(),
             "report.html": rendered.html.encode(), **rendered.plots}
    written = []
    for name, data in files.items():
        path = out / name
        path.write_bytes(data)
        written.append(path)
    return written
