"""The report as one self-contained HTML page: the plots embedded, then the report's tables.

The page has no scripts, no external files and no dates: PNGs are embedded as
data URIs and the styles are inline, so the file can be mailed or archived as
it is, and the same report always gives the same bytes.  Every text is escaped.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from html import escape

from peloton.simulation.report import Comparison, RunReport
from peloton.simulation.report_text import Heading, Lines, Table, report_blocks

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #eee; white-space: nowrap; }
th { background: #f4f4f4; } td.r, th.r { text-align: right; } td.l, th.l { text-align: left; }
figure { margin: 1em 0; } img { max-width: 100%; }
""".strip()


def _table(t: Table) -> list[str]:
    def cls(i: int) -> str:
        return "l" if t.align[i] == "l" else "r"

    out = ["<table>", "<tr>" + "".join(f'<th class="{cls(i)}">{escape(h)}</th>'
                                        for i, h in enumerate(t.headers)) + "</tr>"]
    for row in t.rows:
        out.append("<tr>" + "".join(f'<td class="{cls(i)}">{escape(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</table>")
    return out


def render_html(baseline: RunReport, whatif: RunReport | None = None,
                comparison: Comparison | None = None,
                plots: Mapping[str, bytes] | None = None) -> str:
    """The page: title, plots (in the mapping's order), then every block of the report."""
    title = f"Simulation of {baseline.trace_name or 'a trace'}" + (
        f": {whatif.label} vs {baseline.label}" if whatif else "")
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{escape(title)}</title>", f"<style>\n{_STYLE}\n</style>", "</head>", "<body>",
           f"<h1>{escape(title)}</h1>"]
    if plots:
        out.append("<h2>Plots</h2>")
        for name, png in plots.items():
            data = base64.b64encode(png).decode("ascii")
            out.append(f'<figure><img alt="{escape(name)}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{escape(name)}</figcaption></figure>")
    for block in report_blocks(baseline, whatif, comparison):
        if isinstance(block, Heading):
            tag = "h2" if block.level == 1 else "h3"
            out.append(f"<{tag}>{escape(block.text)}</{tag}>")
        elif isinstance(block, Lines):
            out.append("<p>" + "<br>\n".join(escape(line) for line in block.lines) + "</p>")
        else:
            out += _table(block)
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
