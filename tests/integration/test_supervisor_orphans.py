"""Tasks whose cluster is gone for good do not live for ever (supervisor.c, pysupervisor.py).

Each supervisor checks its run every $PELOTON_SUPERVISOR_CHECK_SECS (1 s here): a deleted
sandbox, or (with -o N) no agent holding WORK_DIR/agent.lock for N seconds, makes it stop
the task as a kill would and record `orphaned=1`.  While an agent holds the lock, the task
runs on.  Both supervisors, the C one and the Python fallback, are run directly.

A sandbox may live outside the work dir (/var/lib/peloton/sandboxes/<hash> when other users
cannot reach the work dir, AgentConfig.sandbox_root): `-l` then names the agent's lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.procs import wait_for

C_SUPERVISOR = str(Path(sys.executable).with_name("peloton-supervisor"))
PY_SUPERVISOR = f"{sys.executable} -m peloton.agent.pysupervisor"
SUPERVISORS = [pytest.param(C_SUPERVISOR, id="c"), pytest.param(PY_SUPERVISOR, id="python")]


def start(supervisor: str, work: Path, *extra: str,
          sandboxes: Path | None = None) -> tuple[subprocess.Popen[bytes], Path]:
    sandbox = (sandboxes or work / "sandboxes") / "job-0-1"
    sandbox.parent.mkdir(parents=True, exist_ok=True)
    (work / "agent.lock").touch()
    proc = subprocess.Popen([*supervisor.split(), "-d", str(sandbox), "-r", "job-0-1", "-g", "300",
                             *extra, "--", "sleep", "sleep", "120"],
                            env={**os.environ, "PELOTON_SUPERVISOR_CHECK_SECS": "1"},
                            start_new_session=True)
    wait_for(lambda: (sandbox / "run.json").exists(), 20, "the task started")
    return proc, sandbox


def task_pid(sandbox: Path) -> int:
    import json

    return int(json.loads((sandbox / "run.json").read_text())["pid"])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("supervisor", SUPERVISORS)
def test_the_task_runs_while_an_agent_holds_the_lock_and_stops_once_none_does(
        supervisor: str, tmp_path: Path) -> None:
    lock = os.open(tmp_path / "agent.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    proc, sandbox = start(supervisor, tmp_path, "-o", "2")
    try:
        pid = task_pid(sandbox)
        time.sleep(4)  # several checks pass with the lock held: nothing happens
        assert alive(pid) and proc.poll() is None
        os.close(lock)  # the agent is gone
        proc.wait(20)
        record = (sandbox / "status.exit").read_text()
        assert "orphaned=1" in record and "killed=1" in record
        wait_for(lambda: not alive(pid), 5, "the task ended")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("supervisor", SUPERVISORS)
def test_a_deleted_sandbox_stops_its_task_even_without_an_orphan_limit(
        supervisor: str, tmp_path: Path) -> None:
    proc, sandbox = start(supervisor, tmp_path)
    try:
        pid = task_pid(sandbox)
        shutil.rmtree(sandbox)  # nothing can ever adopt this run now
        proc.wait(20)
        wait_for(lambda: not alive(pid), 5, "the task ended")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("supervisor", SUPERVISORS)
def test_a_sandbox_outside_the_work_dir_watches_the_lock_it_is_given(
        supervisor: str, tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "var" / "sandboxes" / "0123abcd"
    work.mkdir()
    lock = os.open(work / "agent.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    proc, sandbox = start(supervisor, work, "-o", "2", "-l", str(work / "agent.lock"),
                          sandboxes=elsewhere)
    try:
        pid = task_pid(sandbox)
        time.sleep(4)  # SANDBOX/../../agent.lock does not exist: only -l finds the agent
        assert alive(pid) and proc.poll() is None
        os.close(lock)
        proc.wait(20)
        assert "orphaned=1" in (sandbox / "status.exit").read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
