"""Two `peloton agent` processes on one machine never give one dynamic uid to tasks of both
at once (issue 23, item 5: two clusters' tasks ran as 70000-70003 twice and could signal each
other).  Both agents get the same four uids, so without the machine-wide lock they would hand
out the same ones (tests/unit/agent/test_uid_claims.py shows the rule failing without it).

The range, 61000-61003, is outside the default one, so other clusters on the machine never
compete for it; the test looks only at the tasks and agents it started.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.agent.identity import IdentityPolicy
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from tests.harness.agents import AgentProcess, sandbox, task, wait_file
from tests.harness.procs import wait_for
from tests.integration.test_agent import Hostmgr, start_hostmgr

UIDS = range(61000, 61004)
#: Writes the uid it runs as, then runs until told to stop (a `go` file in its sandbox).
HOLD = "id -u > uid; while [ ! -e go ]; do sleep 0.05; done"

pytestmark = pytest.mark.skipif(not IdentityPolicy().can_switch,
                                reason="only an agent running as root hands out dynamic uids")


@pytest.fixture()
def hostmgr() -> Iterator[Hostmgr]:
    hm = start_hostmgr()
    yield hm
    hm.stop()


def start(hostmgr: Hostmgr, work: Path, name: str) -> AgentProcess:
    agent = AgentProcess(work, hostmgr.address, name=name,
                         extra_args=("--dynamic-uids", f"{UIDS[0]}-{UIDS[-1]}")).start()
    wait_for(lambda: name in hostmgr.recorder.hosts, 20, f"{name} registration")
    return agent


def test_two_agents_on_one_machine_never_share_a_dynamic_uid(hostmgr: Hostmgr, tmp_path: Path) -> None:
    rec = hostmgr.recorder
    a = start(hostmgr, tmp_path / "a", "uid-agent-a")
    b = start(hostmgr, tmp_path / "b", "uid-agent-b")
    live: dict[str, tuple[AgentProcess, LaunchSpec]] = {}  # run id -> where it runs

    def launch(agent: AgentProcess) -> LaunchSpec:
        spec = task(HOLD, grace=0.1)
        hostmgr.backend.launch(agent.name, [spec])
        return spec

    def running(agent: AgentProcess) -> tuple[LaunchSpec, int]:
        spec = launch(agent)
        rec.wait_state(spec.run_id, TaskState.RUNNING)
        live[spec.run_id] = (agent, spec)
        return spec, int(wait_file(sandbox(agent.work_dir, spec.run_id) / "uid"))

    def refused(agent: AgentProcess) -> None:
        failed = rec.wait_state(launch(agent).run_id, TaskState.FAILED)
        assert "no free dynamic uid" in failed.message, failed.message

    def end(agent: AgentProcess, spec: LaunchSpec) -> None:
        (sandbox(agent.work_dir, spec.run_id) / "go").touch()
        wait_file(sandbox(agent.work_dir, spec.run_id) / "status.exit")
        del live[spec.run_id]

    try:
        a1, a2, b1, b2 = running(a), running(a), running(b), running(b)
        of_a, of_b = {a1[1], a2[1]}, {b1[1], b2[1]}
        assert of_a.isdisjoint(of_b), (of_a, of_b)
        assert of_a | of_b == set(UIDS)
        refused(a)  # every uid of the range is some live task's, on this agent or the other

        end(b, b1[0])  # a uid comes back when its run ends
        rec.wait_state(b1[0].run_id, TaskState.SUCCEEDED)
        assert running(a)[1] == b1[1]

        # An agent killed with kill -9 leaves its task running: the uid stays that task's.
        b.stop(signal.SIGKILL)
        refused(a)
        end(b, b2[0])  # the task ends while its agent is away
        assert running(a)[1] == b2[1]
    finally:
        for agent, spec in list(live.values()):
            (sandbox(agent.work_dir, spec.run_id) / "go").touch()
        for agent, spec in list(live.values()):
            wait_file(sandbox(agent.work_dir, spec.run_id) / "status.exit", timeout=10)
        a.stop()
        b.stop()
