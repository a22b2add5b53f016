"""`peloton login | logout` and `peloton auth whoami` against a fake AuthService: the token is
kept privately per cluster and sent by later commands; a refused login exits 13 in one line;
what people read fits 80 columns."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from cli.exit_codes import ExitCode
from tests.unit.cli.conftest import Peloton
from tests.unit.cli.fakes import World


def _fits(text: str) -> None:
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, wide


def test_login_keeps_a_private_token_that_later_commands_send(peloton: Peloton, world: World,
                                                              tmp_path: Path) -> None:
    env = {"PELOTON_TOKEN_FILE": str(tmp_path / "tokens.yaml")}
    anonymous = peloton("auth", "whoami", env=env)
    assert anonymous.exit_code == 0, anonymous.output
    assert "authentication is off" in anonymous.stdout
    login = peloton("login", "-U", "alice", "--password-stdin", input="right\n", env=env)
    assert login.exit_code == 0, login.output
    token_file = tmp_path / "tokens.yaml"
    assert "as alice (role dev)" in login.stdout and "until 2100-01-01 00:00 UTC" in login.stdout
    assert str(token_file) in login.stdout
    _fits(login.stdout.replace(str(token_file), "~/.peloton/tokens.yaml"))  # the default file
    sent = world.call("AuthService.Login").metadata
    assert sent["username"] == "alice" and sent["password"] == "right"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert [entry["token"] for entry in yaml.safe_load(token_file.read_text()).values()] == [
        "tok-alice"]
    me = peloton("auth", "whoami", env=env)
    assert me.stdout.strip() == "alice (role dev, by token)"
    assert world.calls[-1].metadata["authorization"] == "Bearer tok-alice"
    out = peloton("logout", env=env)
    assert out.exit_code == 0 and "logged out of" in out.stdout
    assert yaml.safe_load(token_file.read_text()) == {}
    assert "authentication is off" in peloton("auth", "whoami", env=env).stdout


def test_a_refused_login_exits_13_in_one_line_and_keeps_nothing(peloton: Peloton, world: World,
                                                               tmp_path: Path) -> None:
    env = {"PELOTON_TOKEN_FILE": str(tmp_path / "tokens.yaml")}
    result = peloton("login", "-U", "alice", "--password-stdin", input="wrong\n", env=env)
    assert result.exit_code == ExitCode.UNAUTHENTICATED.value == 13
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "invalid username/password combination" in lines[0], lines
    _fits(result.output)
    assert not (tmp_path / "tokens.yaml").exists()
