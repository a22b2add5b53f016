"""Settings of one agent, with this machine's resources as defaults."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from peloton.agent.identity import DEFAULT_DYNAMIC_UIDS, IdentityPolicy
from peloton.agent.remote_volumes import DEFAULT_BUDGET_MB, DEFAULT_MAX_MB
from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources

#: Ports offered to tasks unless --ports says otherwise (Mesos' default range).
DEFAULT_PORTS = PortRange(31000, 32000)
#: Sandboxes of agents whose work dir other users cannot reach (see sandbox_root).
SHARED_SANDBOXES = Path("/var/lib/peloton/sandboxes")


def _reachable(path: Path) -> bool:
    """Whether every directory from / down to `path` lets other users through (o+x)."""
    current = path.resolve()
    for directory in (current, *current.parents):
        try:
            if not directory.stat().st_mode & stat.S_IXOTH:
                return False
        except FileNotFoundError:
            continue  # made later, by us, with o+x
    return True


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


#: Where Linux says which local ports it picks for outgoing connections.
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> PortRange | None:
    """The machine's ephemeral port range (None: not Linux, or unreadable)."""
    try:
        low, high = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return None
    return PortRange(low, high)


def ephemeral_overlap(ports: tuple[PortRange, ...], ephemeral: PortRange | None
                      ) -> list[PortRange]:
    """The parts of `ports` inside the ephemeral range.  Any outgoing connection on the
    machine may hold such a port: a task given it fails to bind ("Address already in
    use").  Placement draws a retry's ports elsewhere in the host's free ones
    (core/placement/portpool.py), so only that run fails, but each run that draws a held
    port does."""
    if ephemeral is None:
        return []
    out = []
    for r in ports:
        begin, end = max(r.begin, ephemeral.begin), min(r.end, ephemeral.end)
        if begin <= end:
            out.append(PortRange(begin, end))
    return out


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
    #: Metadata of this agent's calls to the host manager: its credentials (Peloton's
    #: `username`/`password`); empty when authentication is off or TLS identifies it.
    credentials: tuple[tuple[str, str], ...] = ()
    #: TLS files for the AgentService, the file server and the calls to the host manager.
    tls: TlsFiles | None = None
    #: Who tasks may run as (peloton/agent/identity.py).
    allow_root_tasks: bool = False
    task_users: tuple[str, ...] = ()
    dynamic_uids: tuple[int, int] = DEFAULT_DYNAMIC_UIDS
    #: The largest file a task's URI may fetch (remote_volumes.py), in MB.
    fetch_max_mb: float = DEFAULT_MAX_MB
    #: What the cache of immutable remote volumes may hold before its least recently used
    #: entries no run holds are evicted (remote_volumes.py), in MB.
    fetch_cache_mb: float = DEFAULT_BUDGET_MB

    def sandbox_root(self) -> Path:
        """Where sandboxes live: `<work dir>/sandboxes`, unless tasks (other users) could not
        reach it there because an ancestor of the work dir is closed to others (a repository
        under /root, mode 0700): then /var/lib/peloton/sandboxes/<hash of the work dir>, with
        `<work dir>/sandboxes` a symlink to it.  A task must be able to walk to its sandbox by
        its absolute path ($MESOS_SANDBOX, a web server's document root)."""
        inside = self.work_dir / "sandboxes"
        if os.geteuid() != 0 or (inside.is_dir() and not inside.is_symlink()) or _reachable(self.work_dir):
            return inside
        digest = hashlib.sha256(str(self.work_dir.resolve()).encode()).hexdigest()[:16]
        return SHARED_SANDBOXES / digest

    def identity_policy(self) -> IdentityPolicy:
        """The task identity rules of this agent."""
        return IdentityPolicy(allow_root=self.allow_root_tasks, system_users=self.task_users,
                              dynamic_uids=self.dynamic_uids)

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
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(new + "\n")
            return new
