"""`peloton up --jobmgrs N` (peloton/cluster/processes.py) without starting processes: what
it would start and the configs it writes, checked against the daemons' own config schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.cluster import processes
from peloton.cluster.daemons.config import HostmgrProcessConfig, load
from peloton.cluster.processes import ProcessCluster, ProcessesConfig


class _Exited:
    """A stand-in for a started process that has already exited (so stop() skips it)."""

    returncode = 0

    def poll(self) -> int:
        return 0


def _started(monkeypatch: pytest.MonkeyPatch, config: ProcessesConfig) -> list[str]:
    """Start `config` with spawning faked; the names of the processes it would start."""
    names: list[str] = []

    def spawn(self: ProcessCluster, base: Path, name: str, cmd: list[str]) -> processes._Proc:
        names.append(name)
        return processes._Proc(name, _Exited(), base / f"{name}.log")  # type: ignore[arg-type]

    monkeypatch.setattr(ProcessCluster, "_spawn", spawn)
    monkeypatch.setattr(processes, "_wait_for_line", lambda *_: None)
    ProcessCluster(config).start()
    return names


def test_a_simulated_backend_goes_to_the_host_manager_and_no_agent_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _started(monkeypatch, ProcessesConfig(
        jobmgrs=2, data_dir=tmp_path, zk="127.0.0.1:2181", agents=3, backend="sim:100:1:1"))
    assert names == ["resmgr", "hostmgr", "placement", "jobmgr-1", "jobmgr-2"]
    hostmgr = load(HostmgrProcessConfig, [tmp_path / "procs" / "hostmgr.yaml"], env={})
    assert hostmgr.backend == "sim:100:1:1"


def test_the_local_backend_is_the_default_and_starts_the_agents(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _started(monkeypatch, ProcessesConfig(
        jobmgrs=1, data_dir=tmp_path, zk="127.0.0.1:2181", agents=2))
    assert names[-2:] == ["agent-0", "agent-1"]
    hostmgr = load(HostmgrProcessConfig, [tmp_path / "procs" / "hostmgr.yaml"], env={})
    assert hostmgr.backend == "local"
