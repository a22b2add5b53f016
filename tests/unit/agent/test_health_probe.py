"""The command probe: exit codes, stderr tails, the sandbox, timeouts, and the exit status
kept while gevent's SIGCHLD reaper collects every child (the process's one rule for
children, peloton/jobmgr/README.md)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import gevent
from gevent import monkey

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


def test_exit_codes_survive_gevents_reaper_and_probes_run_side_by_side(tmp_path: Path) -> None:
    # A child started by subprocess (gevent's) makes gevent reap every child on SIGCHLD; the
    # probes' own exit statuses must still come back, and a slow probe blocks no other.
    assert monkey.is_module_patched("os")  # the agent's process model, set up by conftest
    done = subprocess.run(["true"], check=False)
    assert done.returncode == 0
    slow = gevent.spawn(_probe, "sleep 0.5; echo slow >&2; exit 5", tmp_path)
    quick = [gevent.spawn(_probe, f"echo q{i} >&2; exit {i}", tmp_path) for i in range(4)]
    gevent.joinall(quick, timeout=5)
    assert [g.value for g in quick] == [
        (i == 0, f"command exited with code {i}: q{i}") for i in range(4)]
    assert not slow.ready()  # the quick ones did not wait for it
    assert slow.get(timeout=5) == (False, "command exited with code 5: slow")


def test_a_missing_sandbox_fails_the_probe(tmp_path: Path) -> None:
    ok, detail = _probe("true", tmp_path / "gone")
    assert not ok and detail.startswith("command exited with code 126")
