"""A fake HostBackend for host manager tests: hosts and runs in dicts, reports on demand.

Unlike the simulated backend nothing happens by itself: a test adds hosts, then says
what each run reports (`report`), and looks at what the host manager asked for
(`launched`, `killed`, `acked`, `reconciled`).  Updates stay unacknowledged until the
host manager acknowledges them and `redeliver()` sends them again, as a real backend
would.  Kills end runs KILLED at once, like the simulated backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from peloton.core.errors import NotFound, Unavailable
from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from peloton.hostmgr.backends.base import BackendHost, HostEventListener, StatusUpdate


@dataclass
class FakeBackend:
    """See the module docstring."""

    name: str = "fake"
    hosts: dict[str, BackendHost] = field(default_factory=dict)
    #: run id -> (hostname, last state)
    runs: dict[str, tuple[str, TaskState]] = field(default_factory=dict)
    launched: list[tuple[str, list[str]]] = field(default_factory=list)
    killed: list[tuple[str, list[str], float]] = field(default_factory=list)
    acked: list[StatusUpdate] = field(default_factory=list)
    reconciled: list[list[str] | None] = field(default_factory=list)
    unacked: dict[str, StatusUpdate] = field(default_factory=dict)
    #: Raised by launch() and kill() while set (an unreachable agent).
    failure: Exception | None = None
    listener: HostEventListener | None = None
    _seq: int = 0

    # -- test controls ---------------------------------------------------------------------
    def add_host(self, hostname: str, cpu: float = 4.0, mem_mb: float = 4096.0,
                 ports: tuple[PortRange, ...] = (PortRange(31000, 31009),),
                 labels: tuple[Label, ...] = (), revocable_cpu: float = 0.0) -> BackendHost:
        host = BackendHost(hostname, f"agent-{hostname}", Resources(cpu, mem_mb, 10_000.0, 0.0),
                           ports, labels, revocable_cpu, f"10.0.0.{len(self.hosts) + 1}:5051")
        self.hosts[hostname] = host
        if self.listener is not None:
            self.listener.host_up(host)
        return host

    def remove_host(self, hostname: str) -> None:
        self.hosts.pop(hostname, None)
        if self.listener is not None:
            self.listener.host_gone(hostname, "removed by the test")

    def heartbeat(self, hostname: str) -> None:
        """The host gives a sign of life (as our agents' heartbeats do)."""
        if self.listener is not None and hostname in self.hosts:
            self.listener.host_seen(hostname)

    def report(self, run_id: str, state: TaskState, hostname: str = "",
               **extra: object) -> StatusUpdate:
        """The run's host reports a new state (a fresh uuid per report)."""
        host = hostname or self.runs.get(run_id, ("", state))[0]
        self._seq += 1
        update = StatusUpdate(f"u{self._seq}", run_id, state, host, f"agent-{host}",
                              float(self._seq), **extra)  # type: ignore[arg-type]
        self.runs[run_id] = (host, state)
        self.unacked[update.uuid] = update
        if self.listener is not None:
            self.listener.status_update(update)
        return update

    def redeliver(self) -> None:
        """Send every unacknowledged update again, oldest first."""
        for update in list(self.unacked.values()):
            if self.listener is not None:
                self.listener.status_update(update)

    # -- HostBackend -------------------------------------------------------------------------
    def start(self, listener: HostEventListener) -> None:
        self.listener = listener
        for host in self.hosts.values():
            listener.host_up(host)

    def stop(self) -> None:
        self.listener = None

    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        if self.failure is not None:
            raise self.failure
        if hostname not in self.hosts:
            raise NotFound(f"no host {hostname}")
        self.launched.append((hostname, [t.run_id for t in tasks]))
        for task in tasks:
            self.runs.setdefault(task.run_id, (hostname, TaskState.LAUNCHED))

    def kill(self, hostname: str, run_ids: Sequence[str], grace_secs: float) -> None:
        if self.failure is not None:
            raise self.failure
        if hostname not in self.hosts:
            raise Unavailable(f"host {hostname} is not connected")
        self.killed.append((hostname, list(run_ids), grace_secs))
        for run_id in run_ids:
            where = self.runs.get(run_id)
            if where is not None and where[0] == hostname and not where[1].terminal:
                self.report(run_id, TaskState.KILLED, hostname)

    def acknowledge(self, updates: Sequence[StatusUpdate]) -> None:
        for update in updates:
            self.unacked.pop(update.uuid, None)
            self.acked.append(update)

    def reconcile(self, run_ids: Sequence[str] | None = None) -> None:
        self.reconciled.append(None if run_ids is None else list(run_ids))
        for run_id in (list(self.runs) if run_ids is None else run_ids):
            where = self.runs.get(run_id)
            if where is None:
                self.report(run_id, TaskState.LOST, "")
            elif where[1] is not TaskState.LAUNCHED:
                self.report(run_id, where[1], where[0])

    def list_sandbox(self, hostname: str, run_id: str, path: str = "") -> list[tuple[str, int]]:
        return []

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        return b""
