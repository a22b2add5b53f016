"""The command probe: exit codes, stderr tails, the sandbox, timeouts, and a child
collected by somebody else's SIGCHLD reaper (gevent's, in the agent)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from peloton.agent import health
from peloton.core.model.task import HealthCheckSpec


def _probe(command: str, cwd: Path, timeout: float = 5.0) -> tuple[bool, str]:
    return health.probe(HealthCheckSpec(command=command, timeout_secs=timeout), 0,
                        {"PATH": os.environ["PATH"]}, cwd)


def test_exit_code_stderr_tail_and_sandbox(tmp_path: Path) -> None:
    (tmp_path / "ready").write_text("")
    assert _probe("test -e ready", tmp_path) == (True, "command exited with code 0")
    ok, detail = _probe("echo not yet >&2; exit 3", tmp_path)
    assert not ok and detail == "command exited with code 3: not yet"
    ok, detail = _probe("exit 0", tmp_path)       # `exit` in the check ends only the check
    assert ok and detail == "command exited with code 0"


def test_timeout_kills_the_whole_probe(tmp_path: Path) -> None:
    t0 = time.monotonic()
    ok, detail = _probe("sleep 30 & sleep 30", tmp_path, timeout=0.3)
    assert not ok and detail == "timed out after 0.3 s"
    assert time.monotonic() - t0 < 5


def test_a_probe_reaped_elsewhere_still_reports_its_exit_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_waitpid = os.waitpid

    def stolen(pid: int, options: int) -> tuple[int, int]:
        real_waitpid(pid, 0)                        # another reaper collects it first
        raise ChildProcessError(10, "No child processes")

    monkeypatch.setattr(health.os, "waitpid", stolen)
    ok, detail = _probe("echo broken >&2; exit 7", tmp_path)
    assert not ok and detail == "command exited with code 7: broken"
