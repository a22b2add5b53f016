"""`peloton archive get | query | verify` over archives on disk (no cluster needed to read one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from archiver.sinks import open_sink
from cli.archive import parse_when
from cli.exit_codes import ExitCode
from cli.main import cli
from tests.fakes.archive_records import make_record

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=["dir", "sqlite"])
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = str(tmp_path / "a") if request.param == "dir" else f"sqlite:///{tmp_path / 'a.db'}"
    sink = open_sink(url)
    for record in (make_record("11111111-1111-1111-1111-111111111111", name="etl", state="FAILED",
                               completed=1_700_000_000.0),
                   make_record("22222222-2222-2222-2222-222222222222", name="report",
                               owning_team="web", completed=1_700_000_100.0)):
        sink.append(record)
    sink.flush()
    sink.close()
    return url


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_get_prints_the_whole_record_as_yaml_or_json(archive: str) -> None:
    code, out, _ = run("archive", "get", "11111111-1111-1111-1111-111111111111", "--archive", archive)
    assert code == 0
    doc = yaml.safe_load(out)
    assert list(doc)[:3] == ["format", "job_id", "summary"] and doc["summary"]["state"] == "FAILED"
    assert sorted(doc["tasks"]) == ["0", "1"] and doc["pod_events"]["0"]
    code, out, _ = run("-j", "archive", "get", "11111111-1111-1111-1111-111111111111",
                       "--archive", archive)
    assert json.loads(out)["job"]["config"]["name"] == "etl"


def test_query_prints_job_query_columns_and_filters(archive: str) -> None:
    code, out, _ = run("archive", "query", "--archive", archive)
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:4] == ["ID", "Name", "Owner", "State"]
    assert lines[2].startswith("22222222") and "web" in lines[2] and "2023-11-14 22:15:00" in lines[2]
    code, out, _ = run("-j", "archive", "query", "--archive", archive, "--states", "failed")
    assert [s["name"] for s in json.loads(out)] == ["etl"]
    code, out, _ = run("archive", "query", "--archive", archive, "--owner", "nobody")
    assert out.strip() == "No archived jobs found."


def test_missing_archive_and_missing_job_are_not_found(archive: str, tmp_path: Path) -> None:
    code, _, err = run("archive", "get", "33333333-3333-3333-3333-333333333333", "--archive", archive)
    assert code == ExitCode.NOT_FOUND and "not in the archive" in err
    code, _, err = run("archive", "query", "--archive", str(tmp_path / "nothing-here"))
    assert code == ExitCode.NOT_FOUND and "no archive" in err
    assert not (tmp_path / "nothing-here").exists()  # reading never creates an archive


def test_verify_names_the_damaged_segment_and_fails(tmp_path: Path) -> None:
    url = str(tmp_path / "a")
    sink = open_sink(url)
    sink.append(make_record(tasks=30))
    sink.flush()
    sink.close()
    code, out, _ = run("archive", "verify", "--archive", url)
    assert code == 0 and "1 archived job(s); every checksum matches" in out
    seg = next((tmp_path / "a" / "segments").iterdir())
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 1
    seg.write_bytes(bytes(data))
    code, out, err = run("archive", "verify", "--archive", url)
    assert code == ExitCode.ERROR and seg.name in out and "damaged unit" in err


def test_since_and_until_take_a_time_ago_or_a_date() -> None:
    now = 1_700_000_000.0
    assert parse_when("36h", now) == now - 36 * 3600
    assert parse_when("7d", now) == now - 7 * 86400
    assert parse_when("2023-11-14T22:13:20Z", now) == now
    assert parse_when("2023-11-14", now) == 1_699_920_000.0
