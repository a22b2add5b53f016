"""The report as plain text: aligned tables, one section per run, then the what-if's deltas.

Fixed formats only (no terminal-width detection, no colour, no times of day), so
the same reports always render to the same bytes.  Numbers: seconds and
percentages with one decimal, cores with two, memory in whole MB, counts as
integers; a missing value (no task started, say) is "-".
"""

from __future__ import annotations

from collections.abc import Sequence

from peloton.simulation.report import Comparison, Delta, RunReport, WaitStats

#: Longest reason text printed in a table cell (the JSON has them whole).
REASON_WIDTH = 72


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> list[str]:
    """Rows under a header, two spaces apart; `align` has an l or r per column (default: l then r)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(widths[i]) if align[i] == "l" else c.rjust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(parts).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


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
    return (f"{wait.count} started; wait p50 {secs(wait.p50)}s, p90 {secs(wait.p90)}s, "
            f"p99 {secs(wait.p99)}s, max {secs(wait.max)}s, mean {secs(wait.mean)}s")


def _clip(text: str) -> str:
    return text if len(text) <= REASON_WIDTH else text[:REASON_WIDTH - 3] + "..."


def run_section(report: RunReport) -> list[str]:
    """Everything about one run."""
    c = report.cluster
    out = [f"== {report.label} ==",
           f"Ended at t={secs(report.end)}s (horizon {secs(report.horizon)}s); "
           f"{report.finished} of {report.tasks} tasks finished.",
           f"Cluster: {c.hosts_mean:.1f} hosts up on average; capacity cpu {cores(c.capacity.cpu)}, "
           f"memory {c.capacity.mem_mb:.0f} MB; utilisation cpu {pct(c.utilisation.cpu)}, "
           f"memory {pct(c.utilisation.mem_mb)}.",
           f"All pools: {_wait_line(report.wait)}.", ""]
    if report.changes:
        out += ["Changes:", *(f"  {line}" for line in report.changes), ""]
    out.append("Tasks per pool")
    out += table(["pool", "jobs", "tasks", "started", "finished", "never ran", "preempted", "lost"],
                 [[p.path, str(p.jobs), str(p.tasks), str(p.started), str(p.finished), str(p.never_ran),
                   str(p.preemptions), str(p.lost)] for p in report.pools])
    out += ["", "Wait before the first start per pool (seconds)"]
    out += table(["pool", "started", "mean", "p50", "p90", "p99", "max"],
                 [[p.path, str(p.wait.count), secs(p.wait.mean), secs(p.wait.p50), secs(p.wait.p90),
                   secs(p.wait.p99), secs(p.wait.max)] for p in report.pools])
    out += ["", "Resources per pool (time-weighted means; cpu in cores)"]
    out += table(["pool", "cpu demand", "cpu entitled", "cpu allocated", "pending", "pending peak"],
                 [[p.path, cores(p.demand.cpu), cores(p.entitlement.cpu), cores(p.allocation.cpu),
                   f"{p.pending_mean:.2f}", str(p.pending_peak)] for p in report.pools])
    for p in report.pools:
        out += ["", f"Over time: {p.path} (means per interval; cpu in cores)"]
        out += table(["from", "to", "cpu demand", "cpu entitled", "cpu allocated", "pending", "preempted"],
                     [[secs(b.start), secs(b.end), cores(b.demand.cpu), cores(b.entitlement.cpu),
                       cores(b.allocation.cpu), f"{b.pending:.2f}", str(b.preemptions)]
                      for b in p.series], "r" * 7)
    out += ["", "Cluster over time (means per interval)"]
    out += table(["from", "to", "hosts", "cpu capacity", "cpu used", "cpu util", "mem util"],
                 [[secs(b.start), secs(b.end), f"{b.hosts:.1f}", cores(b.capacity.cpu), cores(b.used.cpu),
                   pct(b.utilisation.cpu), pct(b.utilisation.mem_mb)] for b in c.series], "r" * 7)
    out += ["", "Jobs that never ran (some task never started)"]
    if report.never_ran:
        out += table(["job", "pool", "tasks", "reason"],
                     [[n.job, n.pool, str(n.tasks), _clip(n.reason)] for n in report.never_ran], "llrl")
        out += ["", "Why tasks never ran"]
        out += table(["tasks", "reason"], [[str(n), _clip(r)] for r, n in report.reasons], "rl")
    else:
        out.append("(none)")
    return out


def comparison_section(comparison: Comparison) -> list[str]:
    """The what-if beside its baseline, with deltas."""
    b, w = comparison.baseline, comparison.whatif
    out = [f"== {w} vs {b} ==", "Cluster"]

    def rows(deltas: Sequence[Delta]) -> list[list[str]]:
        return [[f"{d.metric} ({d.unit})" if d.unit else d.metric, _delta_cell(d, d.baseline),
                 _delta_cell(d, d.whatif), _delta_cell(d, d.delta, signed=True)] for d in deltas]

    out += table(["metric", b, w, "delta"], rows(comparison.cluster))
    for pool in comparison.pools:
        out += ["", f"Pool {pool.path}"]
        out += table(["metric", b, w, "delta"], rows(pool.rows))
    return out


def render_text(baseline: RunReport, whatif: RunReport | None = None,
                comparison: Comparison | None = None) -> str:
    """The whole text report (ends with a newline)."""
    runs = [baseline] + ([whatif] if whatif else [])
    head = [f"Simulation of trace {baseline.trace_name or '(unnamed)'}: {baseline.jobs} jobs, "
            f"{baseline.tasks} tasks; seed {baseline.seed}; pools sampled every "
            f"{secs(baseline.sample_interval)}s.",
            "Runs: " + ", ".join(r.label for r in runs) + ".", ""]
    body: list[str] = list(head)
    for run in runs:
        body += [*run_section(run), ""]
    if comparison is not None:
        body += [*comparison_section(comparison), ""]
    return "\n".join(body).rstrip("\n") + "\n"
