"""The report's plots as PNG bytes (matplotlib, Agg backend), the same bytes for the same results.

Figures (each a what-if drawn dashed over its baseline, solid):
- `pools-cpu.png`: per leaf pool, cpu demand, entitlement and allocation over time;
- `pending.png`: tasks waiting per leaf pool over time;
- `utilisation.png`: cluster cpu and memory utilisation (used / capacity of the hosts up);
- `waits.png`: the distribution of wait times (share of started tasks that waited at most x).

Determinism: figures are built with matplotlib's object API (no pyplot, no global
state), drawn by Agg, and saved without the "Software" text chunk or any date, so
the PNG depends only on the data, matplotlib's version and its bundled font.
matplotlib is imported when a plot is drawn, not when this module is imported; it is
the optional extra `report` (`pip install 'peloton-py[report]'`), so no daemon needs it,
and without it `render_plots` raises `PlotsUnavailable` saying how to get it (or skip
the plots with `--no-plots`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

from peloton.core.errors import PelotonError
from peloton.simulation.metrics import ratio
from peloton.simulation.result import SimulationResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: What a user without matplotlib is told (the CLI prints it and exits with code 1).
MISSING_MATPLOTLIB = ("the report's plots need matplotlib, which is not installed: install the "
                      "'report' extra (pip install 'peloton-py[report]'), or pass --no-plots")


class PlotsUnavailable(PelotonError):
    """The plots were asked for but matplotlib (the extra `report`) is not installed."""

    kind = "plots_unavailable"


#: At most this many pools get their own panel (the busiest by mean cpu demand; the rest are named).
MAX_POOL_PANELS = 12
#: Resolution of every PNG.
DPI = 100
_STYLES = ("-", "--")
_COLOURS = {"demand": "#d62728", "entitlement": "#2ca02c", "allocation": "#1f77b4"}


def _time_unit(end: float) -> tuple[float, str]:
    if end > 2 * 86400:
        return 86400.0, "days"
    if end > 2 * 3600:
        return 3600.0, "hours"
    if end > 120:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _figure(height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(9.0, height), dpi=DPI, layout="constrained")


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI, metadata={"Software": None})
    return out.getvalue()


def _step(ax: Axes, times: Sequence[float], values: Sequence[float], end: float, scale: float,
          **style: object) -> None:
    """A step line holding each sample until the next, and the last one until `end`."""
    if not times:
        return
    xs = [t / scale for t in times] + [end / scale]
    ys = [*values, values[-1]]
    ax.step(xs, ys, where="post", **style)  # type: ignore[arg-type]


def _panel_pools(runs: Sequence[SimulationResult]) -> tuple[list[str], list[str]]:
    """Leaf pools to draw (busiest first, at most MAX_POOL_PANELS, then in pool order) and the rest."""
    base = runs[0]

    def load(path: str) -> float:
        samples = base.pool_samples.get(path, ())
        return sum(s.demand.cpu + s.allocation.cpu for s in samples)

    leaves = list(base.leaves)
    if len(leaves) <= MAX_POOL_PANELS:
        return leaves, []
    busiest = sorted(leaves, key=lambda p: (-load(p), p))[:MAX_POOL_PANELS]
    shown = [p for p in leaves if p in busiest]
    return shown, [p for p in leaves if p not in busiest]


def pools_cpu(runs: Sequence[SimulationResult]) -> bytes:
    """Per leaf pool: cpu demand, entitlement and allocation over time."""
    shown, hidden = _panel_pools(runs)
    end = max(r.end for r in runs)
    scale, unit = _time_unit(end)
    fig = _figure(1.0 + 2.0 * max(1, len(shown)))
    axes = fig.subplots(max(1, len(shown)), 1, sharex=True, squeeze=False)[:, 0]
    for ax, path in zip(axes, shown, strict=False):
        for run, style in zip(runs, _STYLES, strict=False):
            samples = run.pool_samples.get(path, ())
            times = [s.t for s in samples]
            for name in ("demand", "entitlement", "allocation"):
                values = [getattr(s, name).cpu for s in samples]
                _step(ax, times, values, run.end, scale, linestyle=style, color=_COLOURS[name],
                      label=f"{name} ({run.label})")
        ax.set_title(f"{path}: cpu cores", loc="left", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8, ncols=2)
    axes[-1].set_xlabel(f"time since trace start ({unit})")
    if hidden:
        fig.suptitle(f"{len(hidden)} quieter pools not shown: {', '.join(hidden[:6])}"
                     + (", ..." if len(hidden) > 6 else ""), fontsize=9)
    return _png(fig)


def pending(runs: Sequence[SimulationResult]) -> bytes:
    """Tasks waiting in each leaf pool over time."""
    shown, _ = _panel_pools(runs)
    end = max(r.end for r in runs)
    scale, unit = _time_unit(end)
    fig = _figure(4.0)
    ax = fig.subplots()
    colours = [f"C{i % 10}" for i in range(len(shown))]
    for run, style in zip(runs, _STYLES, strict=False):
        for path, colour in zip(shown, colours, strict=False):
            samples = run.pool_samples.get(path, ())
            _step(ax, [s.t for s in samples], [float(s.pending) for s in samples], run.end, scale,
                  linestyle=style, color=colour, label=f"{path} ({run.label})")
    ax.set_title("tasks waiting per pool", loc="left", fontsize=10)
    ax.set_xlabel(f"time since trace start ({unit})")
    ax.set_ylabel("tasks")
    ax.grid(True, alpha=0.3)
    if shown:
        ax.legend(fontsize=8, ncols=2)
    return _png(fig)


def utilisation(runs: Sequence[SimulationResult]) -> bytes:
    """Cluster cpu and memory utilisation (%) over time."""
    end = max(r.end for r in runs)
    scale, unit = _time_unit(end)
    fig = _figure(4.0)
    ax = fig.subplots()
    for run, style in zip(runs, _STYLES, strict=False):
        times = [s.t for s in run.cluster_samples]
        cpu = [100 * ratio(s.used.cpu, s.capacity.cpu) for s in run.cluster_samples]
        mem = [100 * ratio(s.used.mem_mb, s.capacity.mem_mb) for s in run.cluster_samples]
        _step(ax, times, cpu, run.end, scale, linestyle=style, color="C0", label=f"cpu ({run.label})")
        _step(ax, times, mem, run.end, scale, linestyle=style, color="C1", label=f"memory ({run.label})")
    ax.set_title("cluster utilisation", loc="left", fontsize=10)
    ax.set_xlabel(f"time since trace start ({unit})")
    ax.set_ylabel("% of the capacity of hosts up")
    ax.set_ylim(0, 105)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def waits(runs: Sequence[SimulationResult]) -> bytes:
    """Share of started tasks that waited at most x seconds (one line per run)."""
    fig = _figure(4.0)
    ax = fig.subplots()
    for run, style in zip(runs, _STYLES, strict=False):
        values = sorted(t.wait for t in run.tasks if t.wait is not None)
        if not values:
            continue
        shares = [100 * (i + 1) / len(values) for i in range(len(values))]
        ax.step([0.0, *values], [0.0, *shares], where="post", linestyle=style, label=run.label)
    ax.set_title("wait before the first start", loc="left", fontsize=10)
    ax.set_xlabel("seconds")
    ax.set_ylabel("% of started tasks waiting at most that long")
    ax.set_ylim(0, 105)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


#: File name -> figure, in the order the HTML page shows them.
FIGURES = {"pools-cpu.png": pools_cpu, "pending.png": pending, "utilisation.png": utilisation,
           "waits.png": waits}


def require_matplotlib() -> None:
    """Raise PlotsUnavailable unless matplotlib can be imported (the CLI asks before a long
    simulation, not after it)."""
    try:
        import matplotlib  # noqa: F401 - only whether it is there
    except ImportError:
        raise PlotsUnavailable(MISSING_MATPLOTLIB) from None


def render_plots(runs: Sequence[SimulationResult]) -> dict[str, bytes]:
    """Every figure of the report for `runs` (the baseline first), as PNG bytes by file name.

    Raises PlotsUnavailable without matplotlib.
    """
    require_matplotlib()
    return {name: draw(runs) for name, draw in FIGURES.items()}
