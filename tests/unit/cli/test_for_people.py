"""The CLI read by people: an 80-column snapshot of the main views, strict YAML with
file:line and the closest field, job id prefixes, and a newline after the last progress line.

The snapshot (snapshots/80_columns.txt) is what a user sees in a terminal of 80 columns
(or when the output is piped); `PELOTON_UPDATE_SNAPSHOTS=1` rewrites it after a deliberate
change.  "Now" is frozen, so running tasks show a stable run time.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

import cli.views
from cli import output
from cli.exit_codes import ExitCode
from tests.unit.cli.conftest import Peloton
from tests.unit.cli.fakes import JOB, World
from tests.unit.cli.test_respool_job import JOB_YAML, _file

SNAPSHOT = Path(__file__).with_name("snapshots") / "80_columns.txt"
NOW = datetime(2019, 5, 1, 12, 0, 0, tzinfo=UTC)
COMMANDS = [
    ("job", "list"),
    ("job", "query"),
    ("job", "status", JOB),
    ("task", "list", JOB),
    ("task", "get", JOB, "2"),
    ("pod", "events", JOB, "0"),
    ("pod", "get", f"{JOB}-0"),
    ("host", "query"),
    ("job", "stateless", "query"),
    ("job", "stateless", "get", JOB),
    ("update", "list", JOB),
    ("auth", "whoami"),
]


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli.views, "fmt_run_time",
                        lambda start, end: output.fmt_run_time(start, end, now=NOW))
    monkeypatch.delenv("COLUMNS", raising=False)


def test_the_main_views_at_80_columns(peloton: Peloton, world: World, tmp_path: Path,
                                      frozen: None) -> None:
    peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML), "-i", JOB)
    text = []
    for args in COMMANDS:
        result = peloton(*args)
        assert result.exit_code == 0, (args, result.output)
        text.append(f"$ peloton {' '.join(args)}\n{result.stdout}")
    got = "\n".join(text)
    too_wide = [line for line in got.splitlines() if len(line) > 80]
    assert not too_wide, too_wide
    for word in ("INVALID", "POD_STATE_", "HOST_STATE_", "JOB_STATE_", "WORKFLOW_STATE_"):
        assert word not in got, word
    if os.environ.get("PELOTON_UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(got)
    assert got == SNAPSHOT.read_text(), "the 80-column views changed; see " + str(SNAPSHOT)


def test_a_typo_in_yaml_is_refused_with_file_line_and_the_closest_field(
        peloton: Peloton, world: World, tmp_path: Path) -> None:
    path = _file(tmp_path, "job.yaml", JOB_YAML.replace("cpulimit: 1.0", "cpulimt: 1.0"))
    result = peloton("job", "create", "/DefaultResPool", path)
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert result.stderr.strip().splitlines() == [
        f"Error: {path}:14: defaultconfig.resource.cpulimt: unknown field (did you mean "
        "cpuLimit?); fix it, or pass --lenient to ignore unknown fields"]
    assert not world.requests("JobManager.Create")  # nothing sent
    lenient = peloton("job", "create", "/DefaultResPool", path, "--lenient")
    assert lenient.exit_code == 0, lenient.output
    assert "cpulimt: unknown field, ignored (did you mean cpuLimit?)" in lenient.stderr


def test_a_yaml_syntax_error_names_the_file(peloton: Peloton, tmp_path: Path) -> None:
    path = _file(tmp_path, "job.yaml", "name: x\n  bad: [\n")
    result = peloton("job", "create", "/DefaultResPool", path)
    assert result.exit_code == ExitCode.INVALID_ARGUMENT
    assert f"{path}:2:" in result.stderr and "<unicode string>" not in result.stderr


def test_job_id_prefixes(peloton: Peloton, world: World, tmp_path: Path) -> None:
    for job_id in (JOB, "358fad27-0000-4000-8000-000000000000"):
        peloton("job", "create", "/DefaultResPool", _file(tmp_path, "j.yaml", JOB_YAML), "-i",
                job_id)
    unique = peloton("task", "list", "358fad26")
    assert unique.exit_code == 0, unique.output
    assert world.requests("TaskManager.List")[-1].jobId.value == JOB
    ambiguous = peloton("task", "list", "358fad")
    assert ambiguous.exit_code == ExitCode.INVALID_ARGUMENT
    assert "matches 2 jobs" in ambiguous.stderr and JOB in ambiguous.stderr
    short = peloton("task", "list", "358fa")
    assert short.exit_code == ExitCode.INVALID_ARGUMENT and "at least 6" in short.stderr
    none = peloton("task", "list", "abcdef")
    assert none.exit_code == ExitCode.NOT_FOUND and "no job id starts with" in none.stderr
    pod = peloton("pod", "get", "358fad26-0")
    assert pod.exit_code == 0, pod.output


def test_the_progress_bar_ends_its_line_when_piped(peloton: Peloton, world: World,
                                                    tmp_path: Path) -> None:
    world.job_script[JOB] = [("RUNNING", {"RUNNING": 3}), ("SUCCEEDED", {"SUCCEEDED": 3})]
    result = peloton("job", "create", "/DefaultResPool", _file(tmp_path, "job.yaml", JOB_YAML),
                     "-i", JOB, "--wait")
    assert result.exit_code == 0, result.output
    assert result.stderr.endswith("\n") and "3/3" in result.stderr.splitlines()[-1]
