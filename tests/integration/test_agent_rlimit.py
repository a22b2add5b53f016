"""PELOTON_MEMORY_ISOLATION=rlimit: a real `peloton agent` enforces memory limits with
RLIMIT_AS even where a cgroup memory controller is writable, and says so.

This machine has a writable cgroup v1 hierarchy, so test_agent.py only sees the cgroup
path; here the override forces the other one.  The host manager side runs in the test
process (as in test_agent.py); the agent is a real process on 127.0.0.1, stopped by PID.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.agent.isolation import MODE_ENV, requested_mode
from peloton.core.errors import InvalidArgument
from peloton.core.states import TaskState
from tests.harness.agents import AgentProcess, task
from tests.harness.procs import PELOTON, TASK_PYTHON, free_port, wait_for
from tests.integration.test_agent import Hostmgr, start_hostmgr

NAME = "rlimit-agent"


def allocate(mb: int) -> str:
    """A task that allocates (and touches) `mb` MB, then prints how much it got."""
    return f"{TASK_PYTHON} -c \"x = b'x' * ({mb} << 20); print('got', len(x))\""


@pytest.fixture(scope="module")
def hostmgr() -> Iterator[Hostmgr]:
    hm = start_hostmgr()
    yield hm
    hm.stop()


@pytest.fixture(scope="module")
def agent(hostmgr: Hostmgr, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    proc = AgentProcess(tmp_path_factory.mktemp("agent"), hostmgr.address, name=NAME,
                        extra_env={MODE_ENV: "rlimit"}).start()
    wait_for(lambda: NAME in hostmgr.recorder.hosts, 20, "agent registration")
    yield proc
    proc.stop()


def test_agent_reports_the_forced_mechanism(agent: AgentProcess) -> None:
    agent.tail.wait_for("serving on", timeout=10)
    assert any(f"{MODE_ENV}=rlimit" in line for line in agent.tail.lines), agent.tail.lines
    assert any(f"{NAME} serving on" in line and "(rlimit;" in line
               for line in agent.tail.lines), agent.tail.lines


def test_task_over_its_limit_fails_with_a_clear_message(hostmgr: Hostmgr,
                                                        agent: AgentProcess) -> None:
    over = task(allocate(400), mem_mb=150)
    hostmgr.backend.launch(NAME, [over])
    failed = hostmgr.recorder.wait_state(over.run_id, TaskState.FAILED, timeout=60)
    running = hostmgr.recorder.wait_state(over.run_id, TaskState.RUNNING)
    assert "memory limit 150 MB via RLIMIT_AS (address space)" in running.message
    assert failed.exit_code == 1
    assert failed.message == ("exited with code 1 (memory limited to 150 MB by RLIMIT_AS: "
                              "allocations beyond it fail)")
    assert b"MemoryError" in hostmgr.backend.read_sandbox(NAME, over.run_id, "stderr")
    assert b"got" not in hostmgr.backend.read_sandbox(NAME, over.run_id, "stdout")


def test_task_under_its_limit_runs_to_completion(hostmgr: Hostmgr, agent: AgentProcess) -> None:
    # The control: the same program under the same limit, asking for less, succeeds, so the
    # failure above is the limit and not, say, the interpreter failing to start.
    under = task(allocate(8), mem_mb=150)
    hostmgr.backend.launch(NAME, [under])
    done = hostmgr.recorder.wait_state(under.run_id, TaskState.SUCCEEDED, timeout=60)
    assert done.exit_code == 0
    assert hostmgr.backend.read_sandbox(NAME, under.run_id, "stdout") == b"got 8388608\n"


def test_mode_is_read_from_the_environment() -> None:
    assert requested_mode({}) == "auto"
    assert requested_mode({MODE_ENV: ""}) == "auto"
    assert requested_mode({MODE_ENV: " RLimit "}) == "rlimit"
    assert requested_mode({MODE_ENV: "cgroup"}) == "cgroup"
    with pytest.raises(InvalidArgument) as err:
        requested_mode({MODE_ENV: "cgroups-please"})
    assert MODE_ENV in err.value.message and "auto, cgroup, rlimit" in err.value.message


def test_agent_refuses_an_unknown_mode(hostmgr: Hostmgr, tmp_path: Path) -> None:
    result = subprocess.run(
        [PELOTON, "agent", "--name", "bad-mode", "--hostmgr", hostmgr.address, "--port",
         str(free_port()), "--work-dir", str(tmp_path), "--cpus", "1", "--mem-mb", "512"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, MODE_ENV: "bogus"})
    assert result.returncode != 0
    assert f"{MODE_ENV}='bogus'" in result.stderr and "auto, cgroup, rlimit" in result.stderr
    assert "bad-mode" not in hostmgr.recorder.hosts
