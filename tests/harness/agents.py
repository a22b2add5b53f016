"""Host-backend test helpers: a recording listener, a host manager side, agent processes."""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import CommandSpec, HealthCheckSpec, PortSpec, TaskSpec
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.base import BackendHost, StatusUpdate
from tests.harness.procs import PELOTON, OutputTail, free_port, stop, wait_for


class Recorder:
    """A HostEventListener that keeps everything it is told (and can acknowledge it)."""

    def __init__(self, backend: object | None = None, auto_ack: bool = True) -> None:
        self.backend = backend
        self.auto_ack = auto_ack
        self.hosts: dict[str, BackendHost] = {}
        self.host_ups: list[str] = []
        self.gone: list[tuple[str, str]] = []
        self.seen: list[str] = []
        self.updates: list[StatusUpdate] = []
        self._lock = threading.Lock()

    def host_up(self, host: BackendHost) -> None:
        with self._lock:
            self.hosts[host.hostname] = host
            self.host_ups.append(host.hostname)

    def host_gone(self, hostname: str, reason: str) -> None:
        with self._lock:
            self.gone.append((hostname, reason))

    def host_seen(self, hostname: str) -> None:
        with self._lock:
            self.seen.append(hostname)

    def status_update(self, update: StatusUpdate) -> None:
        with self._lock:
            self.updates.append(update)
        if self.auto_ack and self.backend is not None:
            self.backend.acknowledge([update])  # type: ignore[attr-defined]

    def status_updates(self, updates: Sequence[StatusUpdate]) -> None:
        for update in updates:
            self.status_update(update)

    def of(self, run_id: str) -> list[StatusUpdate]:
        """Every delivery for one run, re-deliveries included."""
        with self._lock:
            return [u for u in self.updates if u.run_id == run_id]

    def states(self, run_id: str) -> list[TaskState]:
        """The run's states in delivery order, consecutive repeats collapsed."""
        out: list[TaskState] = []
        for u in self.of(run_id):
            if not out or out[-1] is not u.state:
                out.append(u.state)
        return out

    def last(self, run_id: str) -> StatusUpdate | None:
        updates = self.of(run_id)
        return updates[-1] if updates else None

    def health(self, run_id: str) -> list[HealthState]:
        """Health values reported for the run, consecutive repeats collapsed."""
        out: list[HealthState] = []
        for u in self.of(run_id):
            if u.healthy is not None and (not out or out[-1] is not u.healthy):
                out.append(u.healthy)
        return out

    def has(self, run_id: str, state: TaskState) -> bool:
        return any(u.state is state for u in self.of(run_id))

    def wait_state(self, run_id: str, state: TaskState, timeout: float = 20) -> StatusUpdate:
        """The first update of `run_id` in `state`, waiting for it."""
        wait_for(lambda: self.has(run_id, state), timeout,
                 f"{run_id} {state} (seen {self.states(run_id)})")
        return next(u for u in self.of(run_id) if u.state is state)


def run_id(instance: int = 0, run: int = 1, job: str | None = None) -> str:
    """A fresh, valid run id."""
    return f"{job or uuid.uuid4()}-{instance}-{run}"


def task(command: str, *, rid: str | None = None, mem_mb: float = 0.0, grace: float = 5.0,
         ports: Sequence[PortSpec] = (), assigned: Sequence[tuple[str, int]] = (),
         env: Sequence[tuple[str, str]] = (), health: HealthCheckSpec | None = None,
         fd_limit: int = 0) -> LaunchSpec:
    """A shell-command run."""
    spec = TaskSpec(name="test", resources=Resources(cpu=0.1, mem_mb=mem_mb),
                    command=CommandSpec(value=command, environment=tuple(env)), ports=tuple(ports),
                    health_check=health, kill_grace_period_secs=grace, fd_limit=fd_limit)
    return LaunchSpec(rid or run_id(), spec, tuple(assigned))


class AgentProcess:
    """`peloton agent` as a real process, stopped by PID."""

    def __init__(self, work_dir: Path, hostmgr: str, name: str = "agent-1",
                 extra_env: dict[str, str] | None = None,
                 extra_args: Sequence[str] = ()) -> None:
        self.work_dir, self.hostmgr, self.name = work_dir, hostmgr, name
        self.port = free_port()
        self.extra_env = extra_env or {}
        self.extra_args = tuple(extra_args)
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> AgentProcess:
        env = {**os.environ, **self.extra_env}
        self.proc = subprocess.Popen(
            [PELOTON, "agent", "--name", self.name, "--hostmgr", self.hostmgr, "--port",
             str(self.port), "--work-dir", str(self.work_dir), "--cpus", "2", "--mem-mb", "2048",
             "--label", "rack=r1", *self.extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.tail = OutputTail(self.proc)
        self.tail.wait_for("serving on", timeout=30)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, sig: int = 15) -> int:
        assert self.proc is not None
        return stop(self.proc, sig)


def sandbox(work_dir: Path, rid: str) -> Path:
    """A run's sandbox under an agent work dir (where `sandboxes` leads, when the agent keeps
    them elsewhere because tasks could not reach the work dir)."""
    return (work_dir / "sandboxes").resolve() / rid


def wait_file(path: Path, timeout: float = 20) -> str:
    """The content of a file once it exists and is non-empty."""
    wait_for(lambda: path.exists() and path.stat().st_size > 0, timeout, f"{path}")
    return path.read_text()

