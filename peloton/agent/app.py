"""The agent's composition root: config -> objects -> server, and start/stop.

Start order matters for adoption after a crash: the notification pipe is
opened before anything can launch, existing sandboxes are adopted before
the AgentService accepts calls, and only then does the agent register, so
its first registration already lists every run it has.  `stop()` leaves
tasks running (an agent restarted with the same work dir adopts them)
unless asked to kill them.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path
from typing import Any

from gevent import monkey as gevent_monkey

from peloton.agent.caps import SandboxCaps, new_call_token
from peloton.agent.config import AgentConfig, ephemeral_overlap, ephemeral_range
from peloton.agent.executor import Executor
from peloton.agent.files import FileServer
from peloton.agent.isolation import detect
from peloton.agent.launcher import Spawner, supervisor_command
from peloton.agent.link import AgentIdentity, HostmgrLink, HostmgrTargets
from peloton.agent.remote_volumes import RemoteCache, remote_root
from peloton.agent.reporter import StatusReporter
from peloton.agent.sandbox import AGENT_LOCK, Sandboxes
from peloton.agent.service import SERVICE_NAME, AgentServicer, CallTokenInterceptor
from peloton.agent.slack import SlackEstimator
from peloton.agent.uidlocks import UidLockDir, machine_dir
from peloton.agent.uidpool import UidClaims, Unshared
from peloton.agent.volumes import Volumes, volumes_root
from peloton.agent.watch import Watcher
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2_grpc as pb_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.common.auth import Security
from peloton.core.errors import FailedPrecondition

log = logging.getLogger(__name__)


def _lock_work_dir(work: Path) -> int:
    """Hold <work-dir>/agent.lock for the agent's life: two agents on one work dir would
    steal each other's notifications and adopt each other's runs.  The kernel drops
    the lock when the process dies, so a restart after `kill -9` is never blocked."""
    fd = os.open(work / AGENT_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    # Supervisors probe the lock for a moment every few seconds (to stop orphaned tasks):
    # a few tries tell such a probe from another agent.
    for attempt in range(20):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if attempt < 19:
                time.sleep(0.05)
    os.close(fd)
    raise FailedPrecondition(f"another agent is using the work dir {work}")


class AgentApp:
    """One local agent: runs tasks, reports them to a host manager."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        work = config.work_dir
        work.mkdir(parents=True, exist_ok=True)
        # Tasks reach their sandbox through the work dir but may not list or read the
        # agent's own files in it (agent id, acknowledgement log, notification pipe).
        os.chmod(work, 0o711)
        self._lock_fd = _lock_work_dir(work)
        try:
            self._build(config)
        except BaseException:
            os.close(self._lock_fd)  # a failed start must not keep the work dir locked
            raise

    def _build(self, config: AgentConfig) -> None:
        work = config.work_dir
        self.sandboxes = Sandboxes(work, config.sandbox_root())
        if self.sandboxes.root != work / "sandboxes":
            log.warning("agent %s: its work dir %s is closed to other users, so tasks could not "
                        "reach their sandboxes there; sandboxes are in %s", config.name, work,
                        self.sandboxes.root)
        self.isolation = detect(config.name, work_dir=work)
        self.spawner = Spawner(supervisor_command(work / "bin"), work / "supervisor.log")
        self.fifo = work / "notify"
        self.call_token = new_call_token()
        self.caps = SandboxCaps()
        self.server = GrpcServer(f"{config.host}:{config.port}", security=Security(tls=config.tls),
                                 interceptors=[CallTokenInterceptor(self.call_token)])
        self.reporter = StatusReporter(lambda batch: self.link.send(batch), resend_secs=config.resend_secs)
        self.identities = config.identity_policy()
        # Dynamic uids are claimed machine-wide (uidlocks.py); an agent that is not root runs
        # every task as itself and hands out none.
        self.uid_locks = UidLockDir(machine_dir()) if self.identities.can_switch else None
        claims: UidClaims = self.uid_locks or Unshared()
        self.executor = Executor(sandboxes=self.sandboxes, isolation=self.isolation,
                                 spawner=self.spawner, reporter=self.reporter, fifo=self.fifo,
                                 enforce_fd_limit=config.enforce_fd_limit,
                                 orphan_secs=config.orphan_secs, identities=self.identities,
                                 uid_claims=claims,
                                 volumes=Volumes(volumes_root(work, self.sandboxes.root)),
                                 remote=RemoteCache(remote_root(work, self.sandboxes.root),
                                                    max_mb=config.fetch_max_mb,
                                                    budget_mb=config.fetch_cache_mb))
        self.watcher = Watcher(self.executor, self.fifo, scan_secs=config.scan_secs,
                               sandbox_ttl_secs=config.sandbox_ttl_secs)
        self.files = FileServer(self.sandboxes, self.caps, config.host, config.files_port,
                                tls=config.tls)
        identity = AgentIdentity(
            hostname=config.name, agent_id=config.agent_id(),
            capacity=config.effective_resources(), ports=config.ports, labels=config.labels,
            address=f"{config.host}:{self.server.port}", file_address=self.files.address,
            call_token=self.call_token)
        self.zk: Any = None
        self.discovery: Any = None
        targets = HostmgrTargets(config.hostmgr, self._leader if config.zk_servers else None)
        self.slack = SlackEstimator(config.revocable_cpus, from_usage=config.slack_from_usage,
                                    runs=self.executor.regular_running)
        self.link = HostmgrLink(targets, identity, self.executor.snapshot, self.reporter,
                                slack=self.slack.estimate, credentials=config.credentials,
                                tls=config.tls)
        pb_grpc.add_AgentServiceServicer_to_server(
            AgentServicer(self.executor, self.reporter, self.caps), self.server.server)
        self.server.register_names([SERVICE_NAME])

    def _leader(self) -> str | None:
        """The host manager leader's address from ZooKeeper (None until known)."""
        return self.discovery.address() if self.discovery is not None else None

    def _follow_leader(self) -> None:
        """Watch the host manager's leader znode; a new leader wakes the link at once."""
        from peloton.common.discovery import LeaderDiscovery
        from peloton.common.leader import HOST_MANAGER, new_client

        patched = bool(gevent_monkey.is_module_patched("socket"))
        self.zk = new_client(self.config.zk_servers, use_gevent=patched)
        self.zk.start(timeout=30)
        self.discovery = LeaderDiscovery(self.zk, HOST_MANAGER, root=self.config.zk_root,
                                         on_change=lambda _leader: self.link.kick())
        self.discovery.start()

    @property
    def address(self) -> str:
        """host:port of this agent's AgentService."""
        return self.link.identity.address

    @property
    def work_dir(self) -> Path:
        """Where sandboxes and the agent's own files live."""
        return self.config.work_dir

    def start(self) -> None:
        """Adopt what is on disk, serve, then register with the host manager."""
        if self.spawner.python_fallback:
            log.error("*** peloton agent %s: using the slow PYTHON task supervisor ***", self.config.name)
        self.watcher.open_pipe()
        adopted = self.watcher.adopt_all()
        self.executor.release_remote_of_dead_runs()
        self.watcher.start()
        self.reporter.start()
        self.server.start()
        self.files.start()
        if self.config.zk_servers:
            self._follow_leader()
        self.link.start()
        log.info("agent %s serving on %s (%s; %d runs adopted); host manager %s", self.config.name,
                 self.address, self.isolation.kind, adopted, self.config.hostmgr)
        if self.uid_locks is not None:
            log.info("agent %s: dynamic uids %d-%d, claimed machine-wide in %s", self.config.name,
                     *self.identities.dynamic_uids, self.uid_locks.directory)
        if not self.identities.can_switch:
            log.warning("agent %s does not run as root: every task runs as this agent's own "
                        "user, with no isolation between tasks", self.config.name)
        shared = ephemeral_overlap(self.config.ports, ephemeral_range())
        if shared:
            log.warning("agent %s: task ports %s lie in this machine's ephemeral range "
                        "(net.ipv4.ip_local_port_range): an outgoing connection can hold one, "
                        "and a task given it fails to bind; offer ports below it (--ports)",
                        self.config.name, ",".join(f"{r.begin}-{r.end}" for r in shared))

    def stop(self, kill_tasks: bool = False, grace_secs: float = 5.0) -> None:
        """Stop serving and reporting; tasks keep running unless `kill_tasks`."""
        if kill_tasks:
            live = [run_id for run_id, run in self.executor.tasks() if not run.state.terminal]
            self.executor.kill(live, grace_secs)
        self.reporter.stop()
        self.link.stop()
        if self.zk is not None:
            self.discovery.stop()
            self.zk.stop()
            self.zk.close()
        self.server.stop()
        self.files.stop()
        self.executor.stop()
        self.watcher.stop()
        self.spawner.stop()
        self.isolation.release()
        if self.uid_locks is not None:
            self.uid_locks.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
