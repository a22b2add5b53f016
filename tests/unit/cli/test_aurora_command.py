"""The `aurora` command without a scheduler: argument parsing as Aurora's client parses it, the
exit codes of failures found before any call, and the arithmetic of `sla` and `update --wait`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aurorabridge.thrift_api import api
from cli.aurora.exit_codes import EXIT_INVALID_CONFIGURATION, EXIT_INVALID_PARAMETER, EXIT_USAGE
from cli.aurora.group import aurora
from cli.aurora.options import JobKey, parse_instances, parse_job_key
from cli.aurora.sla import job_uptime, parse_durations, parse_percentiles, up_count
from cli.aurora.updates import rollback_exit, update_exit


def test_keys_and_instances() -> None:
    assert parse_job_key("west/www/prod/hello") == JobKey("west", "www", "prod", "hello")
    assert str(parse_job_key("west/www/prod/hello")) == "west/www/prod/hello"
    for bad in ("west/www/prod", "west/w w/prod/hello", "west/www/prod/hel/lo"):
        with pytest.raises(ValueError):
            parse_job_key(bad)
    assert parse_instances("0,2-4,3") == [0, 2, 3, 4]
    assert parse_instances("") is None
    with pytest.raises(ValueError, match="Invalid instance range"):
        parse_instances("4-2")


def test_sla_arithmetic() -> None:
    assert parse_durations("1h3m,10s,1d") == [("10s", 10), ("1h3m", 3780), ("1d", 86400)]
    with pytest.raises(ValueError):
        parse_durations("5x")
    assert parse_percentiles("99,50") == [50.0, 99.0]
    with pytest.raises(ValueError):
        parse_percentiles("100")
    uptimes = {0: 10, 1: 100, 2: 1000, 3: 10000}
    assert up_count(uptimes, 100) == 75.0 and up_count({}, 1) == 0.0
    assert job_uptime(uptimes, 50) == 100 and job_uptime(uptimes, 99) == 10


def test_update_wait_exit_codes() -> None:
    s = api.JobUpdateStatus
    assert [update_exit(x) for x in (s.ROLLED_FORWARD, s.ROLLED_BACK, s.ABORTED)] == [0, 4, 20]
    assert [rollback_exit(x) for x in (s.ROLLED_BACK, s.ROLLED_FORWARD, s.FAILED)] == [0, 4, 20]


def test_failures_before_any_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "clusters.json").write_text(json.dumps([{"name": "west", "scheduler_uri": "http://x"}]))
    monkeypatch.setenv("AURORA_CONFIG_ROOT", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    runner = CliRunner()
    unknown = runner.invoke(aurora, ["job", "killall", "east/www/prod/hello"])
    assert unknown.exit_code == EXIT_INVALID_CONFIGURATION and "Unknown cluster: east" in unknown.output
    usage = runner.invoke(aurora, ["job", "killall", "west/www/prod"])
    assert usage.exit_code == EXIT_USAGE and "CLUSTER/ROLE/ENV/NAME" in usage.output
    no_instances = runner.invoke(aurora, ["job", "kill", "west/www/prod/hello"])
    assert no_instances.exit_code == EXIT_INVALID_PARAMETER and "use killall" in no_instances.output
    missing = runner.invoke(aurora, ["job", "inspect", "west/www/prod/hello", str(tmp_path / "no.aurora")])
    assert missing.exit_code == EXIT_INVALID_CONFIGURATION
    assert "Error loading configuration" in missing.output and "cannot read the config" in missing.output
    (tmp_path / "clusters.json").write_text("{")
    broken = runner.invoke(aurora, ["job", "killall", "west/www/prod/hello"])
    assert broken.exit_code == EXIT_INVALID_CONFIGURATION and "Unable to parse" in broken.output
