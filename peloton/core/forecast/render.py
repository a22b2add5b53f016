"""A forecast for people and for programs: the CLI's text and `--json`, and the one line
Aurora's getPendingReason carries (so unchanged Aurora clients see the estimate)."""

from __future__ import annotations

from typing import Any

from peloton.core.forecast.model import Estimate, Forecast


def span(secs: float | None, horizon: float) -> str:
    """"now", "45s", "3m20s", "2h05m", "1d02h"; None: "not within <horizon>"."""
    if secs is None:
        return f"not within {span(horizon, horizon)}"
    s = round(secs)
    if s <= 0:
        return "now"
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def starts(est: Estimate, horizon: float) -> str:
    """When it starts, in words: "3m20s", "1m00s (p50) to 2m00s (p90)"."""
    if est.runs == 0:
        return "unknown (no run finished within the wall time)"
    p50, p90 = span(est.p50, horizon), span(est.p90, horizon)
    return p50 if p50 == p90 else f"{p50} (p50) to {p90} (p90)"


def _what(f: Forecast) -> str:
    if len(f.instances) == 1:
        return f"job {f.job_id} instance {f.instances[0]}"
    return f"job {f.job_id} ({len(f.instances)} pending instances, the last of them)"


def _bounds(f: Forecast) -> str:
    cut = "; cut short by the wall time" if f.truncated else ""
    return (f"looked {span(f.bounds.horizon, f.bounds.horizon)} ahead over "
            f"{f.estimate.runs} run(s), spent {f.wall_secs:.1f} s of {f.bounds.wall:g} s "
            f"wall time{cut}")


def text(f: Forecast) -> str:
    """The forecast as the CLI prints it."""
    h = f.bounds.horizon
    lines = [f"{_what(f)}: starts {starts(f.estimate, h)}",
             f"  binding now ({f.binding.kind.value}): {f.binding.summary}"]
    if f.binding.hosts_total:
        why = ", ".join(f"{n} {reason}" for reason, n in f.binding.rejections)
        lines.append(f"  hosts: {f.binding.hosts_fit} of {f.binding.hosts_total} fit"
                     + (f" ({why})" if why else ""))
    if f.binding.scheduler_reason:
        lines.append(f"  scheduler: {f.binding.scheduler_reason}")
    if f.counterfactuals:
        lines.append("what would start it sooner:")
        width = max(len(c.change) for c in f.counterfactuals)
        for c in f.counterfactuals:
            est = "not run (wall time spent)" if c.estimate is None else starts(c.estimate, h)
            lines.append(f"  {c.change:<{width}}  {est}")
    lines.extend(f"note: {n}" for n in f.notes)
    lines.append(f"bounds: {_bounds(f)}")
    return "\n".join(lines) + "\n"


def _est_json(est: Estimate | None) -> dict[str, Any] | None:
    if est is None:
        return None
    return {"p50_secs": est.p50, "p90_secs": est.p90, "runs": est.runs, "started": est.started}


def to_json(f: Forecast) -> dict[str, Any]:
    """The forecast as `--json` prints it (times in seconds after `now`; null: not within
    the horizon)."""
    b = f.binding
    return {
        "job_id": f.job_id, "instances": list(f.instances), "now": f.now,
        "estimate": _est_json(f.estimate),
        "binding": {"kind": b.kind.value, "summary": b.summary,
                    "queue_position": b.queue_position, "queue_length": b.queue_length,
                    "hosts_fit": b.hosts_fit, "hosts_total": b.hosts_total,
                    "rejections": [{"reason": r, "hosts": n} for r, n in b.rejections],
                    "scheduler_reason": b.scheduler_reason},
        "counterfactuals": [{"kind": c.kind.value, "change": c.change,
                             "estimate": _est_json(c.estimate)} for c in f.counterfactuals],
        "bounds": {"horizon_secs": f.bounds.horizon, "wall_secs": f.bounds.wall,
                   "variations": f.bounds.variations},
        "wall_secs": f.wall_secs, "truncated": f.truncated, "notes": list(f.notes),
    }


def reason_line(f: Forecast) -> str:
    """One line for a pending reason: the estimate, what binds, and the best change."""
    h = f.bounds.horizon
    out = f"expected to start {starts(f.estimate, h)}; {f.binding.summary}"
    best = None
    for c in f.counterfactuals:
        if c.estimate is None or c.estimate.p50 is None:
            continue
        if f.estimate.p50 is not None and c.estimate.p50 >= f.estimate.p50:
            continue
        if best is None or (best.estimate is not None and best.estimate.p50 is not None
                            and c.estimate.p50 < best.estimate.p50):
            best = c
    if best is not None and best.estimate is not None:
        out += f"; sooner with {best.change} ({span(best.estimate.p50, h)})"
    return out + f" [forecast: {span(h, h)} horizon, {f.bounds.wall:g} s wall cap]"
