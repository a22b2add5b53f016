"""The report's content as blocks (headings, lines, tables), and its plain-text rendering.

`report_blocks` decides what the report says, once; `render_text` here and
`report_html.render_html` only decide how it looks.  Fixed formats only (no
terminal-width detection, no colour, no times of day), so the same reports always
render to the same bytes.  Numbers: seconds and percentages with one decimal,
cores with two, memory in whole MB, counts as integers; a missing value (no task
started, say) is "-".  Tables fit 80 columns unless pool paths are long (reasons are
cut to fit; the JSON has them whole).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from peloton.simulation.report import Comparison, Delta, RunReport, WaitStats

#: Width the text report keeps to; reasons are cut to fit (the JSON has them whole).
WIDTH = 80
#: Reasons are never cut shorter than this, even beside long job ids or pool paths.
MIN_REASON = 30


@dataclass(frozen=True, slots=True)
class Heading:
    """A section title; level 1 is a run or the comparison, level 2 a table's title."""

    text: str
    level: int = 2


@dataclass(frozen=True, slots=True)
class Lines:
    """Sentences, one per line."""

    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Table:
    """Cells as text; `align` has an l or r per column."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: str


Block = Heading | Lines | Table


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> Table:
    return Table(tuple(headers), tuple(tuple(r) for r in rows),
                 align or "l" + "r" * (len(headers) - 1))


def secs(value: float | None) -> str:
    """Seconds with one decimal ("-" for None)."""
    return "-" if value is None else f"{value:.1f}"


def cores(value: float | None) -> str:
    """Cores with two decimals."""
    return "-" if value is None else f"{value:.2f}"


def pct(value: float | None) -> str:
    """A fraction as a percentage with one decimal."""
    return "-" if value is None else f"{100 * value:.1f}%"


def _delta_cell(d: Delta, value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{d.digits}f}" if signed else f"{value:.{d.digits}f}"


def _wait_line(wait: WaitStats) -> str:
    return (f"p50 {secs(wait.p50)}s, p90 {secs(wait.p90)}s, p99 {secs(wait.p99)}s, "
            f"max {secs(wait.max)}s, mean {secs(wait.mean)}s")


def _clip(text: str, width: int) -> str:
    """`text` cut to `width` (at least MIN_REASON) with an ellipsis."""
    width = max(MIN_REASON, width)
    return text if len(text) <= width else text[:width - 3] + "..."


def summary_blocks(report: RunReport) -> list[Block]:
    """One run's headline sentences and per-pool tables (no time series)."""
    c = report.cluster
    out: list[Block] = [
        Heading(report.label, 1),
        Lines((f"Ended at t={secs(report.end)}s (horizon {secs(report.horizon)}s); "
               f"{report.finished} of {report.tasks} tasks finished.",
               f"Cluster: {c.hosts_mean:.1f} hosts up on average, capacity {cores(c.capacity.cpu)} cpu "
               f"and {c.capacity.mem_mb:.0f} MB memory;",
               f"utilisation cpu {pct(c.utilisation.cpu)}, memory {pct(c.utilisation.mem_mb)}.",
               f"Wait before the first start, all pools ({report.wait.count} tasks started):",
               f"  {_wait_line(report.wait)}."))]
    if report.changes:
        out += [Heading("Changes"), Lines(tuple(f"  {line}" for line in report.changes))]
    out += [Heading("Tasks per pool"),
            _table(["pool", "jobs", "tasks", "started", "finished", "never ran", "preempted", "lost"],
                   [[p.path, str(p.jobs), str(p.tasks), str(p.started), str(p.finished),
                     str(p.never_ran), str(p.preemptions), str(p.lost)] for p in report.pools]),
            Heading("Wait before the first start per pool (seconds)"),
            _table(["pool", "started", "mean", "p50", "p90", "p99", "max"],
                   [[p.path, str(p.wait.count), secs(p.wait.mean), secs(p.wait.p50), secs(p.wait.p90),
                     secs(p.wait.p99), secs(p.wait.max)] for p in report.pools]),
            Heading("Resources per pool (time-weighted means; cpu in cores)"),
            _table(["pool", "cpu demand", "cpu entitled", "cpu allocated", "pending", "pending peak"],
                   [[p.path, cores(p.demand.cpu), cores(p.entitlement.cpu), cores(p.allocation.cpu),
                     f"{p.pending_mean:.2f}", str(p.pending_peak)] for p in report.pools])]
    out.append(Heading("Jobs that never ran (some task never started)"))
    if report.never_ran:
        jobs = max(len("job"), *(len(n.job) for n in report.never_ran))
        pools = max(len("pool"), *(len(n.pool) for n in report.never_ran))
        tasks = max(len("tasks"), *(len(str(n.tasks)) for n in report.never_ran))
        room = WIDTH - (jobs + pools + tasks + 6)
        counts = max(len("tasks"), *(len(str(n)) for _, n in report.reasons))
        out += [_table(["job", "pool", "tasks", "reason"],
                       [[n.job, n.pool, str(n.tasks), _clip(n.reason, room)] for n in report.never_ran],
                       "llrl"),
                Heading("Why tasks never ran"),
                _table(["tasks", "reason"],
                       [[str(n), _clip(r, WIDTH - counts - 2)] for r, n in report.reasons], "rl")]
    else:
        out.append(Lines(("(none)",)))
    return out


def series_blocks(report: RunReport) -> list[Block]:
    """One run's per-interval tables: every pool, then the cluster."""
    out: list[Block] = []
    for p in report.pools:
        out += [Heading(f"Over time: {p.path} (means per interval; cpu in cores)"),
                _table(["from", "to", "cpu demand", "cpu entitled", "cpu allocated", "pending",
                        "preempted"],
                       [[secs(b.start), secs(b.end), cores(b.demand.cpu), cores(b.entitlement.cpu),
                         cores(b.allocation.cpu), f"{b.pending:.2f}", str(b.preemptions)]
                        for b in p.series], "r" * 7)]
    out += [Heading("Cluster over time (means per interval)"),
            _table(["from", "to", "hosts", "cpu capacity", "cpu used", "cpu util", "mem util"],
                   [[secs(b.start), secs(b.end), f"{b.hosts:.1f}", cores(b.capacity.cpu),
                     cores(b.used.cpu), pct(b.utilisation.cpu), pct(b.utilisation.mem_mb)]
                    for b in report.cluster.series], "r" * 7)]
    return out


def comparison_blocks(comparison: Comparison) -> list[Block]:
    """The what-if beside its baseline, with deltas."""
    b, w = comparison.baseline, comparison.whatif

    def rows(deltas: Sequence[Delta]) -> list[list[str]]:
        return [[f"{d.metric} ({d.unit})" if d.unit else d.metric, _delta_cell(d, d.baseline),
                 _delta_cell(d, d.whatif), _delta_cell(d, d.delta, signed=True)] for d in deltas]

    out: list[Block] = [Heading(f"{w} vs {b}", 1), Heading("Cluster"),
                        _table(["metric", b, w, "delta"], rows(comparison.cluster))]
    for pool in comparison.pools:
        out += [Heading(f"Pool {pool.path}"), _table(["metric", b, w, "delta"], rows(pool.rows))]
    return out


def head_lines(baseline: RunReport, whatif: RunReport | None) -> Lines:
    """What was simulated."""
    runs = [baseline] + ([whatif] if whatif else [])
    return Lines((f"Simulation of trace {baseline.trace_name or '(unnamed)'}: {baseline.jobs} jobs, "
                  f"{baseline.tasks} tasks;",
                  f"seed {baseline.seed}; pools sampled every {secs(baseline.sample_interval)}s.",
                  "Runs: " + ", ".join(r.label for r in runs) + "."))


def report_blocks(baseline: RunReport, whatif: RunReport | None = None,
                  comparison: Comparison | None = None) -> list[Block]:
    """The whole report: what ran, each run's summary, the comparison, then the time series."""
    blocks: list[Block] = [head_lines(baseline, whatif)]
    runs = [baseline] + ([whatif] if whatif else [])
    for run in runs:
        blocks += summary_blocks(run)
    if comparison is not None:
        blocks += comparison_blocks(comparison)
    for run in runs:
        blocks += [Heading(f"{run.label}: over time", 1), *series_blocks(run)]
    return blocks


def table_lines(t: Table) -> list[str]:
    """A table as aligned lines: header, dashes, rows; two spaces between columns."""
    widths = [len(h) for h in t.headers]
    for row in t.rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(widths[i]) if t.align[i] == "l" else c.rjust(widths[i])
                 for i, c in enumerate(cells)]
        return "  ".join(parts).rstrip()

    return [line(t.headers), line(["-" * w for w in widths]), *(line(r) for r in t.rows)]


def render_text(baseline: RunReport, whatif: RunReport | None = None,
                comparison: Comparison | None = None) -> str:
    """The whole text report (ends with a newline)."""
    out: list[str] = []
    for block in report_blocks(baseline, whatif, comparison):
        if isinstance(block, Heading):
            out += ["", f"== {block.text} =="] if block.level == 1 else ["", block.text]
        elif isinstance(block, Lines):
            out += list(block.lines)
        else:
            out += table_lines(block)
    return "\n".join(out).strip("\n") + "\n"
