"""The report's numbers against the hand-computed two-pool case, and its byte-for-byte determinism."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.simulation.cluster import load_cluster
from peloton.simulation.engine import run_scenario
from peloton.simulation.metrics import StepSeries, bucket_edges, percentile
from peloton.simulation.pools import load_pools
from peloton.simulation.report import build_report, compare
from peloton.simulation.report_files import render_report, write_report
from peloton.simulation.result import SimulationResult
from peloton.simulation.trace_io import load_trace
from peloton.simulation.whatif import PlanOptions, load_whatif, plan
from tests.unit.simulation.cases import C1_REASON_BASE, SCRIPTS
from tests.unit.simulation.scripted import ScriptedSimulator

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[3]


def two_pool_results() -> tuple[SimulationResult, SimulationResult]:
    """The hand-computed case (cases.py) through the planner, the recorder and the report."""
    base, other = plan(load_trace(DATA / "two-pools.jsonl"), load_cluster(DATA / "two-pools-cluster.yaml"),
                       load_pools(DATA / "two-pools-pools.yaml"),
                       load_whatif(DATA / "two-pools-more-hosts.yaml"), PlanOptions(horizon=180))
    assert other is not None
    sim = ScriptedSimulator(SCRIPTS)
    return run_scenario(sim, base)[0], run_scenario(sim, other)[0]


def test_waits_and_percentiles_are_the_hand_computed_ones() -> None:
    base, _ = two_pool_results()
    report = build_report(base, buckets=3)
    a, b = report.pool("/a"), report.pool("/b")
    # /a: a1's four tasks start on arrival; a2's four wait from t=10 until a1 ends at t=100.
    assert (a.wait.count, a.wait.p50, a.wait.p90, a.wait.p99, a.wait.max, a.wait.mean) == (
        8, 0, 90, 90, 90, 45)
    # /b: everything that ran started on arrival; c1 never ran.
    assert (b.wait.count, b.wait.p50, b.wait.max, b.never_ran, b.tasks, b.finished) == (6, 0, 0, 1, 7, 6)
    # All 14 started tasks: ten waited 0, four waited 90: p50 is rank 7 (0), p90 rank 13 (90).
    assert (report.wait.count, report.wait.p50, report.wait.p90) == (14, 0, 90)
    assert report.wait.mean == pytest.approx(360 / 14)
    assert report.finished == 14 and report.tasks == 15


def test_time_weighted_means_and_utilisation_are_the_hand_computed_ones() -> None:
    report = build_report(two_pool_results()[0], buckets=3)
    a, b = report.pool("/a"), report.pool("/b")
    # /a demand 4 cores on [60, 120) of [0, 180): 240 / 180; allocation 4 throughout.
    assert a.demand.cpu == pytest.approx(4 / 3) and a.allocation.cpu == 4 and a.entitlement.cpu == 4
    assert a.pending_mean == pytest.approx(4 / 3) and a.pending_peak == 4
    # /b allocation 4 on [0, 120), 2 on [120, 180): 600 / 180.
    assert b.allocation.cpu == pytest.approx(10 / 3) and b.demand.cpu == pytest.approx(32 / 3)
    # Cluster: used 8 of 8 cores for 120 s, 6 of 8 for 60 s: 1320 / 1440.
    assert report.cluster.utilisation.cpu == pytest.approx(1320 / 1440)
    assert [round(x.utilisation.cpu, 4) for x in report.cluster.series] == [1.0, 1.0, 0.75]
    assert [x.demand.cpu for x in a.series] == [0, 4, 0]
    assert [(n.job, n.pool, n.tasks, n.reason) for n in report.never_ran] == [
        ("c1", "/b", 1, C1_REASON_BASE)]
    assert report.reasons == ((C1_REASON_BASE, 1),)


def test_the_what_if_is_compared_with_deltas() -> None:
    base, other = two_pool_results()
    comparison = compare(build_report(base), build_report(other))
    rows = {r.metric: r for r in next(p for p in comparison.pools if p.path == "/a").rows}
    assert (rows["wait p90"].baseline, rows["wait p90"].whatif, rows["wait p90"].delta) == (90, 0, -90)
    assert rows["wait mean"].delta == -45
    assert rows["cpu entitlement"].delta == 4
    cluster = {r.metric: r for r in comparison.cluster}
    # More hosts, same work: 1080 of 2880 core-seconds used instead of 1320 of 1440.
    assert cluster["cpu utilisation"].whatif == pytest.approx(37.5)
    assert cluster["cpu utilisation"].delta == pytest.approx(37.5 - 1320 / 14.4)
    assert cluster["never ran"].delta == 0
    assert other.changes == ("t=0s: add 2 host(s) (extra-00000, extra-00001)",)


def test_text_report_shows_the_numbers() -> None:
    text = render_report(list(two_pool_results()), buckets=3, plots=False).text
    assert "/a       2      8        8         8          0          0     0" in text
    assert "/a          8  45.0  0.0  90.0  90.0  90.0" in text
    assert re.search(r"\nwait p90 \(s\) +90\.0 +0\.0 +-90\.0\n", text)
    assert f"c1   /b        1  {C1_REASON_BASE[:40]}" in text
    assert "== more-hosts vs baseline ==" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_json_report_is_versioned_data() -> None:
    data = json.loads(render_report(list(two_pool_results()), plots=False).json)
    assert data["format"] == "peloton-sim-report" and data["version"] == 1
    assert [r["label"] for r in data["runs"]] == ["baseline", "more-hosts"]
    a = data["runs"][0]["pools"][0]
    assert a["path"] == "/a" and a["wait"]["p90"] == 90.0 and a["demand"]["cpu"] == 1.333333
    assert data["comparison"]["pools"][0]["rows"][1] == {
        "metric": "wait p90", "unit": "s", "baseline": 90.0, "whatif": 0.0, "delta": -90.0}


_RENDER = """
import hashlib, sys
from tests.unit.simulation.test_report import two_pool_results
from peloton.simulation.report_files import render_report
r = render_report(list(two_pool_results()))
for name, data in [("text", r.text.encode()), ("json", r.json.encode()), ("html", r.html.encode()),
                   *sorted(r.plots.items())]:
    print(name, hashlib.sha256(data).hexdigest())
"""


def test_the_same_inputs_give_the_same_bytes_in_fresh_processes() -> None:
    """Text, JSON, HTML and every PNG, across processes with different hash seeds."""
    digests = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _RENDER], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=120, check=True)
        digests.append(out.stdout)
    assert digests[0] == digests[1]
    assert len(digests[0].splitlines()) == 7  # text, json, html and four plots


def test_report_files_are_written(tmp_path: Path) -> None:
    rendered = render_report(list(two_pool_results()))
    written = write_report(tmp_path / "out", rendered)
    assert sorted(p.name for p in written) == ["pending.png", "pools-cpu.png", "report.html",
                                              "report.json", "report.txt", "utilisation.png", "waits.png"]
    png = (tmp_path / "out" / "pools-cpu.png").read_bytes()
    assert png.startswith(b"\x89PNG") and b"Software" not in png
    html = (tmp_path / "out" / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "<script" not in html
    assert hashlib.sha256(png).hexdigest() == hashlib.sha256(rendered.plots["pools-cpu.png"]).hexdigest()


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=50),
       st.floats(0.5, 100))
def test_nearest_rank_percentiles_are_values_with_enough_below(values: list[float], p: float) -> None:
    got = percentile(values, p)
    assert got in values
    n = len(values)
    assert sum(1 for v in values if v <= got) >= p / 100 * n - 1e-9
    assert sum(1 for v in values if v < got) < p / 100 * n + 1e-9


def test_percentiles_by_hand() -> None:
    assert percentile([40, 10, 30, 20], 50) == 20
    assert percentile([40, 10, 30, 20], 90) == 40
    assert percentile(list(range(1, 11)), 90) == 9
    with pytest.raises(ValueError):
        percentile([], 50)


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=20),
       st.integers(1, 10))
def test_bucket_means_add_up_to_the_whole(samples: list[tuple[float, float]], count: int) -> None:
    samples.sort()
    series = StepSeries([t for t, _ in samples], [v for _, v in samples])
    end = 100.0
    edges = bucket_edges(end, count)
    total = sum(series.mean(a, b) * (b - a) for a, b in edges)
    assert total == pytest.approx(series.integral(0, end), rel=1e-9, abs=1e-6)
    assert series.mean(0, end) <= max(v for _, v in samples) + 1e-9


def test_without_matplotlib_the_plots_say_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from peloton.simulation.plots import MISSING_MATPLOTLIB, PlotsUnavailable

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what `import matplotlib` sees missing
    results = list(two_pool_results())
    with pytest.raises(PlotsUnavailable) as caught:
        render_report(results)
    assert str(caught.value) == MISSING_MATPLOTLIB
    assert "pip install 'peloton-py[report]'" in MISSING_MATPLOTLIB and "--no-plots" in MISSING_MATPLOTLIB
    assert render_report(results, plots=False).plots == {}  # --no-plots needs no matplotlib
