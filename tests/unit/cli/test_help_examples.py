"""Every `--help` example parses as written: the command exists, its options and arguments
are valid, and every file it names exists in the repository (run from its root)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

import click
import pytest

from cli.ids import CHECK_ONLY
from cli.main import cli
from tests.harness.procs import REPO

_EXAMPLE = re.compile(r"^\s{2,}(peloton .*)$")


def _commands(group: click.Group, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, cmd in sorted(group.commands.items()):
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def _examples() -> list[tuple[str, str]]:
    out = []
    for path, cmd in [((), cli), *_commands(cli)]:
        lines = (cmd.help or "").splitlines()
        joined: list[str] = []
        for line in lines:
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1] + " " + line.strip()
            else:
                joined.append(line)
        for line in joined:
            m = _EXAMPLE.match(line)
            if m:
                out.append((" ".join(path) or "peloton", m.group(1).split("  #")[0].strip()))
    return out


EXAMPLES = _examples()


def test_every_api_command_has_an_example() -> None:
    have = {where for where, _ in EXAMPLES}
    missing = [" ".join(p) for p, cmd in _commands(cli)
               if not isinstance(cmd, click.Group) and " ".join(p) not in have
               and not cmd.hidden]
    assert not missing, missing


@pytest.mark.parametrize(("where", "example"), EXAMPLES, ids=[e for _, e in EXAMPLES])
def test_help_example_parses_and_its_files_exist(where: str, example: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    args = shlex.split(example.split(" | ")[0])[1:]
    if "--help" in args or "-h" in args:
        return
    ctx = cli.make_context("peloton", list(args), resilient_parsing=False)
    ctx.meta[CHECK_ONLY] = True
    command: click.Command = cli
    rest = [*ctx._protected_args, *ctx.args] if hasattr(ctx, "_protected_args") else [
        *ctx.protected_args, *ctx.args]
    while isinstance(command, click.Group) and rest:
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None, f"{example}: no command {name}"
        ctx = sub.make_context(name or "", rest, parent=ctx)
        command = sub
        rest = ([*ctx._protected_args, *ctx.args] if isinstance(sub, click.Group) else [])
    for token in args:
        if re.search(r"\.(yaml|yml|json)$", token) and "/" in token:
            assert (REPO / token).exists(), f"{example}: {token} does not exist"
