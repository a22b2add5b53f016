"""`peloton simulate`: every command end to end through the click tree, with exit codes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from peloton.simulation import engine
from peloton.simulation.trace_io import load_trace
from tests.unit.simulation.cases import SCRIPTS
from tests.unit.simulation.scripted import ScriptedSimulator
from tests.unit.simulation.test_export import T0, store_url  # noqa: F401 - the fixture

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[3]
INPUTS = [str(DATA / "two-pools.jsonl"), "--cluster", str(DATA / "two-pools-cluster.yaml"),
          "--pools", str(DATA / "two-pools-pools.yaml")]
WHATIF = ["--what-if", str(DATA / "two-pools-more-hosts.yaml")]


@pytest.fixture
def scripted() -> Iterator[ScriptedSimulator]:
    sim = ScriptedSimulator(SCRIPTS, wall_secs=0.5)
    engine.register_simulator("scripted", lambda: sim)
    yield sim
    engine._FACTORIES.pop("scripted", None)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_run_is_the_default_command_and_reports_the_hand_computed_case(
        scripted: ScriptedSimulator, tmp_path: Path) -> None:
    code, out, err = invoke("simulate", *INPUTS, *WHATIF, "--horizon", "3m", "--engine", "scripted",
                            "--buckets", "3", "--out", str(tmp_path / "report"))
    assert code == 0, err
    assert [s.label for s in scripted.scenarios] == ["baseline", "more-hosts"]
    assert "/a          8  45.0  0.0  90.0  90.0  90.0" in out
    assert "baseline: simulated 3.0m in 0.5s (360x real time" in err
    assert out == (tmp_path / "report" / "report.txt").read_text()
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == [
        "pending.png", "pools-cpu.png", "report.html", "report.json", "report.txt", "utilisation.png",
        "waits.png"]


def test_run_prints_json_with_either_flag(scripted: ScriptedSimulator) -> None:
    for flags in (["simulate", "run", "--json"], ["-j", "simulate", "run"]):
        code, out, _ = invoke(*flags, *INPUTS, "--horizon", "180", "--engine", "scripted")
        assert code == 0
        data = json.loads(out)
        assert [r["label"] for r in data["runs"]] == ["baseline"] and data["comparison"] is None


def test_run_replays_through_the_real_engine_and_says_how_fast(tmp_path: Path) -> None:
    code, out, err = invoke("simulate", *INPUTS, *WHATIF, "--horizon", "3m", "--buckets", "3")
    assert code == 0, err
    # The hand-computed case (cases.py): a2 waits 90 s in the baseline, nothing with more hosts.
    assert "/a          8  45.0  0.0  90.0  90.0  90.0" in out
    assert "wait p90 (s)                 90.0         0.0  -90.0" in out
    assert re.search(r"^baseline: simulated 3\.0m in [0-9.]+s \([0-9,]+x real time; ", err, re.M)
    assert re.search(r"^more-hosts: simulated 3\.0m in [0-9.]+s \([0-9,]+x real time; ", err, re.M)


def test_bad_inputs_exit_4_naming_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text((DATA / "two-pools.jsonl").read_text().replace('"instances": 4', '"instances": -4', 1))
    code, _, err = invoke("simulate", "check", str(bad), *INPUTS[1:])
    assert code == 4
    assert f"{bad}:2: instances: must be between 1 and 100,000, got -4" in err
    wrong = tmp_path / "w.yaml"
    wrong.write_text("version: 1\nchanges:\n  - remove: {group: node, count: 3}\n")
    code, _, err = invoke("simulate", "check", *INPUTS, "--what-if", str(wrong))
    assert code == 4 and f"{wrong}: changes[0].remove: 3 host(s) of group node wanted" in err


def test_check_prints_what_a_run_would_replay() -> None:
    code, out, err = invoke("simulate", "check", *INPUTS, *WHATIF)
    assert code == 0 and "ok: every input is valid" in err
    assert "5 jobs, 15 tasks" in out and "t=0s: add 2 host(s) (extra-00000, extra-00001)" in out


def test_import_google_writes_a_trace(tmp_path: Path) -> None:
    sample = DATA / "google-v2" / "task_events" / "part-00000-of-00001.csv"
    out_file = tmp_path / "g.jsonl"
    code, _, err = invoke("simulate", "import-google", str(sample), "-o", str(out_file),
                          "--pool-map", "0-8=/low,9-11=/high")
    assert code == 0 and "kept 8 tasks in 5 jobs" in err
    assert {j.pool for j in load_trace(out_file).jobs} == {"/low", "/high"}
    code, _, err = invoke("simulate", "import-google", str(sample), "--pool-map", "x")
    assert code == 2 and "LOW-HIGH=/pool" in err


def test_export_writes_a_trace_and_pools(store_url: str, tmp_path: Path) -> None:  # noqa: F811
    trace_file, pools_file = tmp_path / "t.jsonl", tmp_path / "pools.yaml"
    code, _, err = invoke("simulate", "export", "--store", store_url, "--since", "2023-11-14T22:00:00Z",
                          "--salt", "x", "-o", str(trace_file), "--pools-out", str(pools_file))
    assert code == 0, err
    assert "exported 5 jobs" in err
    trace = load_trace(trace_file)
    assert len(trace.jobs) == 5 and trace.header.start == T0 + 100
    code, _, err = invoke("simulate", "check", str(trace_file), "--cluster",
                          str(DATA / "two-pools-cluster.yaml"), "--pools", str(pools_file))
    assert code == 0, err


def test_every_command_has_help_with_an_example() -> None:
    for command in ("run", "check", "export", "import-google"):
        code, out, _ = invoke("simulate", command, "--help")
        assert code == 0 and "Example" in out


def test_the_pure_parts_import_without_gevent_grpc_or_a_database() -> None:
    code = ("import sys\n"
            "import peloton.simulation.report_files, peloton.simulation.whatif, peloton.simulation.engine\n"
            "import peloton.simulation.google_trace, peloton.simulation.export_model\n"
            "import peloton.simulation.jobs\n"
            "bad = sorted(m for m in ('gevent', 'grpc', 'sqlalchemy', 'matplotlib', 'peloton.storage',\n"
            "                         'peloton.resmgr', 'peloton.jobmgr') if m in sys.modules)\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_the_readme_check_command_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (REPO / "README.md").read_text()
    command = ("peloton simulate check sample-trace.jsonl --cluster cluster.yaml --pools pools.yaml \\\n"
               "    --what-if research-reservation.yaml")
    assert command in readme and "cd docs/examples/simulation" in readme
    monkeypatch.chdir(REPO / "docs" / "examples" / "simulation")
    code, out, err = invoke(*command.replace("\\\n", " ").split()[1:])
    assert code == 0, err
    assert "46 jobs, 1546 tasks" in out and "t=0s: pool /research: cpu reservation 64 -> 128" in out


@pytest.mark.slow
def test_the_readme_run_command_runs_as_written_and_draws_the_plot_shown(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The worked example's run step, in a copy of its directory: the numbers the README quotes
    and the very PNG it shows (regenerate docs/images/simulation-pools-cpu.png from
    report/pools-cpu.png when the report or the scheduler changes on purpose)."""
    readme = (REPO / "README.md").read_text()
    command = ("peloton simulate sample-trace.jsonl --cluster cluster.yaml --pools pools.yaml \\\n"
               "    --what-if research-reservation.yaml --out report/")
    assert command in readme
    shutil.copytree(REPO / "docs" / "examples" / "simulation", tmp_path / "example")
    monkeypatch.chdir(tmp_path / "example")
    code, out, err = invoke(*command.replace("\\\n", " ").split()[1:])
    assert code == 0, err
    excerpt = readme[readme.index("metric                   baseline  research-128"):]
    excerpt = excerpt[:excerpt.index("```")]
    for line in excerpt.splitlines():
        assert line in out, line
    assert (tmp_path / "example" / "report" / "pools-cpu.png").read_bytes() == (
        REPO / "docs" / "images" / "simulation-pools-cpu.png").read_bytes()


def test_run_without_matplotlib_says_how_to_get_the_plots(
        scripted: ScriptedSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from peloton.simulation.plots import MISSING_MATPLOTLIB

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = invoke("simulate", *INPUTS, "--engine", "scripted", "--out", str(tmp_path / "r"))
    assert code == 1 and MISSING_MATPLOTLIB in err
    assert "simulated" not in err  # refused before the simulation ran, not after
    code, _, err = invoke("simulate", *INPUTS, "--engine", "scripted", "--out", str(tmp_path / "r"),
                          "--no-plots")
    assert code == 0, err
