"""Settings of one agent, with this machine's resources as defaults."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources

#: Ports offered to tasks unless --ports says otherwise (Mesos' default range).
DEFAULT_PORTS = PortRange(31000, 32000)


def machine_resources(work_dir: Path | None = None) -> Resources:
    """This machine's cpus, memory and free disk (under `work_dir`); gpus are not probed."""
    disk = psutil.disk_usage(str(work_dir if work_dir and work_dir.exists() else "/"))
    return Resources(cpu=float(os.cpu_count() or 1),
                     mem_mb=float(psutil.virtual_memory().total // (1 << 20)),
                     disk_mb=float(disk.free // (1 << 20)), gpu=0.0)


def parse_ports(text: str) -> tuple[PortRange, ...]:
    """`31000-32000` or `8000-8099,9000-9099` (inclusive ranges)."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        begin, sep, end = part.partition("-")
        try:
            out.append(PortRange(int(begin), int(end if sep else begin)))
        except ValueError:
            raise InvalidArgument(f"bad port range {part!r}, expected BEGIN-END", field="ports") from None
    return tuple(out)


def parse_label(text: str) -> Label:
    """`key=value` (value may be empty)."""
    key, _, value = text.partition("=")
    if not key:
        raise InvalidArgument(f"bad label {text!r}, expected key=value", field="label")
    return Label(key, value)


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything `peloton agent` can be told; zero resources mean "this machine's"."""

    work_dir: Path
    name: str = field(default_factory=socket.gethostname)
    #: host:port of the host manager; several, comma-separated, are tried in turn.
    hostmgr: str = "127.0.0.1:5391"
    #: ZooKeeper servers: register with the host manager leader published there (and follow
    #: it across failovers); `hostmgr` is used while no leader is known.
    zk_servers: tuple[str, ...] = ()
    zk_root: str = "/peloton"
    host: str = "127.0.0.1"
    port: int = 0
    #: HTTP port of the sandbox file server (0: a free port).
    files_port: int = 0
    resources: Resources = Resources()
    ports: tuple[PortRange, ...] = (DEFAULT_PORTS,)
    labels: tuple[Label, ...] = ()
    #: Re-send an unacknowledged update after this long.
    resend_secs: float = 10.0
    #: How often the sandbox scanner runs (see watch.py).
    scan_secs: float = 2.0
    #: Acknowledged sandboxes are removed after this long.
    sandbox_ttl_secs: float = 7 * 86400.0
    #: Apply each task's fdLimit as RLIMIT_NOFILE (Peloton on Mesos never did; off by default).
    enforce_fd_limit: bool = False
    #: Revocable (slack) cpus offered on top of `resources`, like Mesos' fixed resource
    #: estimator (`--oversubscribed_resources=cpus:N`).
    revocable_cpus: float = 0.0
    #: Also offer as revocable the cpu that running non-revocable tasks were allocated but do
    #: not use (what a usage-based Mesos resource estimator reports); see slack.py.
    slack_from_usage: bool = False
    #: A task whose agent has been gone this long is stopped by its supervisor: its
    #: cluster is taken to be gone for good (0: tasks outlive their agent for ever).
    orphan_secs: float = 3600.0

    def effective_resources(self) -> Resources:
        """Configured resources, each kind left at zero filled from the machine."""
        machine = machine_resources(self.work_dir)
        r = self.resources
        return Resources(cpu=r.cpu or machine.cpu, mem_mb=r.mem_mb or machine.mem_mb,
                         disk_mb=r.disk_mb or machine.disk_mb, gpu=r.gpu)

    def agent_id(self) -> str:
        """Stable across restarts with the same work dir (stored in it on first start)."""
        path = self.work_dir / "agent_id"
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            new = str(uuid.uuid4())
            path.write_text(new + "\n")
            return new
