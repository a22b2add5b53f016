"""Exit codes per error kind, global flags and their environment overrides, --help examples."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli.context import cluster_zk_servers
from cli.exit_codes import ExitCode, exit_code_for
from cli.main import cli
from cli.params import parse_duration, parse_range
from peloton.api.client import DeadlineExceeded
from peloton.core import errors
from tests.unit.cli.conftest import Peloton
from tests.unit.cli.fakes import JOB, World


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_nothing_listening_is_unavailable_naming_the_address(peloton: Peloton) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    result = peloton("job", "get", JOB, address=address)
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert "no Peloton job manager answers at" in result.stderr and address in result.stderr
    assert "make run" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_rpc_timeout_flag_is_timeout_exit_code(peloton: Peloton, world: World) -> None:
    world.jobs[JOB] = None
    world.slow_seconds = 1.0
    result = peloton("-t", "100ms", "job", "get", JOB)
    assert result.exit_code == ExitCode.TIMEOUT
    assert "did not answer within 0.1s" in result.stderr


def test_missing_argument_is_usage_error(peloton: Peloton, world: World) -> None:
    result = peloton("job", "create", "/DefaultResPool")
    assert result.exit_code == ExitCode.USAGE
    assert "Missing argument 'CONFIG'" in result.stderr
    assert world.calls == []


def test_env_overrides_addresses_and_timeout(served: object, world: World) -> None:
    address = served.address  # type: ignore[attr-defined]
    env = {"JOBMGR_URL": f"grpc://{address}/", "RESMGR_URL": address, "HOSTMGR_URL": address,
           "TIMEOUT": "5s"}
    result = CliRunner().invoke(cli, ["host", "query"], env=env)
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["job", "get", JOB], env=env)
    assert result.exit_code == ExitCode.NOT_FOUND  # reached the fake through the grpc:// URL


def test_every_error_kind_has_its_own_exit_code() -> None:
    kinds = [errors.NotFound, errors.InvalidArgument, errors.AlreadyExists, errors.Conflict,
             errors.Unavailable, DeadlineExceeded, errors.FailedPrecondition, errors.PermissionDenied,
             errors.Unimplemented]
    codes = [exit_code_for(kind("x")) for kind in kinds]
    assert len(set(codes)) == len(codes)
    assert ExitCode.ERROR not in codes and ExitCode.USAGE not in codes
    assert exit_code_for(errors.PelotonError("x")) == ExitCode.ERROR


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            found.extend(_commands(command, f"{prefix}{name} "))
    return found


@pytest.mark.parametrize("name,command", _commands(cli))
def test_every_command_help_has_an_example(name: str, command: click.Command) -> None:
    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and "peloton " in result.output.split("Example")[1], name


def test_original_global_flag_spellings_are_accepted(peloton: Peloton) -> None:
    for flags in (["--json"], ["-j"], ["--zkroot", "/other"], ["--timeout", "1m30s"]):
        result = peloton(*flags, "host", "query")
        assert result.exit_code == 0, (flags, result.output)
    assert json.loads(peloton("--json", "host", "query").stdout)["host_infos"]


def test_cluster_name_resolves_zookeeper_from_clusters_json(tmp_path: Path) -> None:
    conf = tmp_path / "clusters.json"
    conf.write_text(json.dumps({"clusters": [{"clusterName": "one", "zkURL": "zk1:2181,zk2:2181"}]}))
    assert cluster_zk_servers("one", (), (conf,)) == ("zk1:2181", "zk2:2181")
    with pytest.raises(click.UsageError, match="do not include zk9"):
        cluster_zk_servers("one", ("zk9:2181",), (conf,))
    with pytest.raises(click.UsageError, match="not found"):
        cluster_zk_servers("two", (), (conf,))


def test_go_durations_and_ranges() -> None:
    assert parse_duration("20s") == 20 and parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5 and parse_duration("2") == 2
    with pytest.raises(ValueError):
        parse_duration("20x")
    assert parse_range(":") == (0, 2**31 - 1) and parse_range(":200") == (0, 200)
    assert parse_range("50:") == (50, 2**31 - 1)
    with pytest.raises(ValueError):
        parse_range("-1:3")
