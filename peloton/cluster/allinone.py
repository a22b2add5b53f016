"""`peloton up`: the whole cluster in one process on one machine.

One gRPC server answers on the job manager's, resource manager's and host
manager's default ports (5392, 5394, 5391), so every client — the CLI, a
Peloton client built from Peloton's protos, the Aurora bridge — finds each
API where it expects it.  The daemons are wired to each other directly
(the ports in peloton/core/ports.py); local agents register over gRPC like
separate ones would, so an agent started elsewhere with `peloton agent
--hostmgr <this host>:5391` joins the same cluster.

Start order: storage (schema checked), host manager (agents can
register), resource manager, placement engine, job manager (recovery
needs the other three), agents, Aurora bridge, with `zk` the ZooKeeper
presence and the announcer (peloton/cluster/zk_presence.py), archiver, web UI.  Stop is the reverse;
then, unless `keep_tasks`, the local agents' tasks are stopped too
(peloton/agent/reap.py), so Ctrl-C leaves no process behind.  Kept tasks
run on in their supervisors and are adopted on the next start; one that
no agent adopts within `orphan_secs` is stopped by its supervisor.

Security (README, Security): `--auth FILE` turns authentication on for
every front; without it the cluster must bind a loopback address (or be
told `--insecure`).  Either way the data dir is private (0711, files 0600:
tasks may pass through to their sandboxes but read nothing else), the
process's own calls between its parts authenticate as a process-local
internal user, and local agents reach the host manager with it too.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from peloton.agent.reap import live_runs, stop_runs
from peloton.api.auth_jobs import GUARDED_PREFIXES, JobGuard
from peloton.api.auth_service import serve_auth
from peloton.api.grpc_server import GrpcServer
from peloton.api.unserved import register_unserved
from peloton.cluster.job_facts import StoreJobFacts
from peloton.common.auth import build_security, check_bind
from peloton.common.components import Component, FunctionComponent, Lifecycle
from peloton.common.shutdown import stop_on_signals
from peloton.common.tls import TlsFiles
from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources
from peloton.hostmgr.backends.base import HostBackend
from peloton.hostmgr.backends.k8s_config import KubeConfig as KubeConfig
from peloton.storage import Store, StoreOptions, check_schema, open_store

if TYPE_CHECKING:
    from archiver.app import Archiver
    from aurorabridge.app import AuroraBridge
    from peloton.cluster.forecast import LiveState
    from peloton.cluster.zk_presence import ClusterPresence
    from ui.server import UiServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpConfig:
    """Options of `peloton up`."""

    host: str = "127.0.0.1"
    jobmgr_port: int = 5392
    resmgr_port: int = 5394
    hostmgr_port: int = 5391
    #: Aurora Thrift endpoint port; -1 disables the bridge.
    aurora_port: int = 5396
    #: Storage URL; default: SQLite under `data_dir`.
    store: str = ""
    data_dir: Path = Path(".peloton")
    #: Local agents started in this process (0: none; agents may join from elsewhere).
    agents: int = 1
    #: Resources of each local agent (zero: this machine's, divided between the agents).
    agent_resources: Resources = Resources()
    agent_labels: tuple[Label, ...] = ()
    #: Host attributes of the local agents (`--agent-attributes`): (agent index, label), the
    #: index None for every agent.  Placement constraints match them (Peloton host-label
    #: constraints, Aurora `constraints` on an attribute), as Mesos agents' attributes.
    agent_attributes: tuple[tuple[int | None, Label], ...] = ()
    #: Slack cpu each local agent (or simulated host) offers to revocable tasks.
    agent_revocable_cpus: float = 0.0
    #: Local agents also offer the cpu their non-revocable runs were given but do not use.
    agent_slack_from_usage: bool = False
    #: Local agents apply tasks' fdLimit (Peloton on Mesos never did).
    agent_enforce_fd_limit: bool = False
    #: Dynamic ports the local agents hand out, split between them: below Linux's default
    #: ephemeral range (32768-60999), where an outgoing connection may hold a task's port.
    agent_ports: tuple[int, int] = (31000, 32767)
    #: "local" (real processes), "sim:<hosts>[:<task secs>[:<cpus>[:<start secs>]]]" (virtual
    #: hosts whose tasks are RUNNING <start secs> after launch and succeed <task secs> later;
    #: for demos and benchmarks), "mesos:<master>" (an Apache Mesos master: http://host:port,
    #: host:port or zk://host:port/mesos) or "k8s:<kubeconfig>" / "k8s:in-cluster" (a
    #: Kubernetes cluster's nodes, with `kubernetes` for the rest of its settings).
    backend: str = "local"
    kubernetes: KubeConfig = KubeConfig()
    extra_ports: tuple[int, ...] = field(default_factory=tuple)
    #: Archive URL (dir:///path, sqlite:///file.db, postgresql://...); empty: no archiver.
    archive: str = ""
    #: Web UI HTTP port; -1 disables the UI.
    ui_port: int = 5292
    #: More names the UI's Host header may carry (a Kubernetes Service, a proxy, a DNS name).
    ui_allowed_hosts: tuple[str, ...] = ()
    #: Wall seconds a UI page's forecast may spend (ui/reads.py FORECAST_WALL_S).
    ui_forecast_wall_secs: float = 10.0
    #: Job environments the Aurora bridge accepts (a regular expression; empty: any).
    aurora_environments: str = ""
    #: The Aurora bridge's rules where Aurora and Peloton's bridge differ
    #: (aurorabridge/config.py HandlerSettings: unfit_jobs, concurrent_updates, watch_time).
    aurora_unfit_jobs: str = "queue"
    aurora_concurrent_updates: str = "reject"
    aurora_watch_time: str = "aurora"
    #: On exit, leave the local agents' tasks running for the next start to adopt (a task
    #: nobody adopts within `orphan_secs` is stopped by its supervisor); by default they stop.
    keep_tasks: bool = False
    orphan_secs: float = 3600.0
    #: The users file (`--auth`); empty: authentication off (loopback only, or `insecure`).
    auth: str = ""
    #: Serve a non-loopback address without authentication anyway.
    insecure: bool = False
    #: TLS for every server and client of the cluster (mutual with a CA).
    tls: TlsFiles | None = None
    #: Agents may run tasks as root (a job naming user root); off by default.
    allow_root_tasks: bool = False
    #: ZooKeeper servers (`h1:2181,...`): announce the daemons (leader nodes under `zk_root`)
    #: and the Aurora endpoint (`aurora_zk_path`) there, and run the announcer (service
    #: discovery of announced jobs under `announcer_root`); empty: none of that.
    zk: str = ""
    zk_root: str = "/peloton"
    aurora_zk_path: str = "/aurora/scheduler"
    announcer_root: str = "/aurora"
    #: Announce hosts by address instead of by name.
    announcer_use_ip: bool = False


class AllInOne:
    """Every daemon of a one-machine cluster; `start()` then `stop()`."""

    def __init__(self, config: UpConfig) -> None:
        self.config = config
        self.store: Store | None = None
        private_dir(config.data_dir)
        self.security = build_security(config.auth or None, config.tls,
                                       data_dir=config.data_dir.resolve(), embedded=True)
        check_bind(config.host, self.security, insecure=config.insecure, what="peloton up")
        self.grpc = GrpcServer(f"{config.host}:{config.jobmgr_port}", security=self.security)
        self.ports = {"jobmgr": self.grpc.port}
        for name, port in (("resmgr", config.resmgr_port), ("hostmgr", config.hostmgr_port)):
            self.ports[name] = self.grpc.add_port(f"{config.host}:{port}")
        self._lifecycle: Lifecycle | None = None
        self.agents: list[object] = []
        self.bridge: AuroraBridge | None = None
        self.archiver: Archiver | None = None
        self.ui: UiServer | None = None
        self.presence: ClusterPresence | None = None
        #: What the forecast service reads (set by `start`).
        self.forecast: LiveState | None = None

    def store_url(self) -> str:
        """The storage URL in use."""
        if self.config.store:
            return self.config.store
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        db = (self.config.data_dir / "state.db").resolve()
        for path in (db, db.with_name("state.db-wal"), db.with_name("state.db-shm")):
            if path.exists():
                path.chmod(0o600)  # a database made before the data dir was private
        return f"sqlite:///{db}"

    def start(self) -> None:
        """Build and start everything (see the module docstring for the order)."""
        from peloton.api.ports_grpc.hostmgr_servicer import serve_host_manager
        from peloton.cluster.forecast import rotation_of, serve_forecast
        from peloton.hostmgr.app import HostManager
        from peloton.hostmgr.config import HostManagerConfig
        from peloton.jobmgr.app import JobManager
        from peloton.placement.app import PlacementEngine
        from peloton.resmgr.app import ResourceManager

        store = open_store(self.store_url(), StoreOptions(bootstrap=True))
        check_schema(store)
        self.store = store
        views = self._fenced_views(store)
        backend = self._backend(views["hostmgr"])
        hostmgr = HostManager(views["hostmgr"], backend,
                              HostManagerConfig(consumers=("jobmgr", "resmgr")), grpc_server=self.grpc)
        resmgr = ResourceManager(views["resmgr"], hostmgr, grpc=self.grpc)
        placement = PlacementEngine(resmgr, hostmgr)
        # Both run here, so the forecast copies the host order placement breaks ties by.
        self.forecast = serve_forecast(self.grpc, resmgr, hostmgr, store,
                                       rotation=rotation_of(hostmgr, placement))
        jobmgr = JobManager(views["jobmgr"], resmgr, hostmgr, grpc=self.grpc)
        # The host manager's service, as a separate one serves it: clients (the Aurora bridge's
        # task reconciliation triggers) reach the host backends' reconciliation through it.
        serve_host_manager(self.grpc, hostmgr, hostmgr.events)
        register_unserved(self.grpc)
        serve_auth(self.grpc, self.security)
        guard = JobGuard(StoreJobFacts(store))
        for prefix in GUARDED_PREFIXES:
            self.grpc.auth.add_guard(prefix, guard)
        self.hostmgr, self.resmgr, self.jobmgr = hostmgr, resmgr, jobmgr
        parts: list[Component] = [
            FunctionComponent("grpc", self.grpc.start, self.grpc.stop),
            hostmgr, resmgr, placement, jobmgr,
            FunctionComponent("agents", self._start_agents, self._stop_agents),
        ]
        if self.config.aurora_port >= 0:
            parts.append(FunctionComponent("aurorabridge", self._start_bridge, self._stop_bridge))
        if self.config.zk:
            parts += self._zookeeper_parts()
        if self.config.archive:
            parts.append(FunctionComponent("archiver", self._start_archiver, self._stop_archiver))
        if self.config.ui_port >= 0:
            parts.append(FunctionComponent("ui", self._start_ui, self._stop_ui))
        parts.append(FunctionComponent("store", lambda: None, store.close))
        parts.append(FunctionComponent("audit", lambda: None, self.security.close))
        self._lifecycle = Lifecycle(parts[::-1][::-1], name="peloton-up")
        self._lifecycle.start()

    def _fenced_views(self, store: Store) -> dict[str, Store]:
        """Each daemon's view of the store, fenced to this process's claim of its role: a
        second `peloton up` on the same store takes the roles over, and from then on the
        store refuses this one's writes (peloton/storage/leader_store.py)."""
        holder = f"{socket.gethostname()}:{os.getpid()}"
        views = {}
        for role in ("hostmgr", "resmgr", "jobmgr"):
            views[role] = store.with_fencing(role, _constant(store.claim_leadership(role, None, holder)))
        return views

    def _backend(self, hostmgr_store: Store) -> HostBackend:
        from peloton.hostmgr.backends.registry import BackendEnv, open_backend

        # The store keeps the Mesos framework id, so a restarted cluster comes back as the
        # same Mesos framework and its tasks keep running; it is written through the host
        # manager's fenced view, as every host manager write.
        return open_backend(self.config.backend, BackendEnv(
            grpc=self.grpc, frameworks=hostmgr_store,
            sim_revocable_cpus=self.config.agent_revocable_cpus, tls=self.config.tls,
            kubernetes=self.config.kubernetes))

    # -- agents ------------------------------------------------------------------------
    def _start_agents(self) -> None:
        if self.config.backend.strip() != "local" or self.config.agents <= 0:
            return
        from peloton.agent.app import AgentApp
        from peloton.agent.config import AgentConfig

        n = self.config.agents
        each = self.config.agent_resources
        if each.is_zero():
            each = AgentConfig(work_dir=self.config.data_dir).effective_resources().split(n)
        for i in range(n):
            name = "localhost" if n == 1 else f"localhost-{i}"
            labels = (*self.config.agent_labels,
                      *(lb for at, lb in self.config.agent_attributes if at in (None, i)),
                      Label("peloton/agent", str(i)))
            # Agents on one machine share its ports: each gets its own slice of the
            # dynamic range, so two "hosts" never hand the same port to two tasks.
            first, last = self.config.agent_ports
            span = max(1, (last - first + 1) // n)
            begin = first + i * span
            cfg = AgentConfig(work_dir=(self.config.data_dir / "agents" / name).resolve(),
                              name=name, hostmgr=f"127.0.0.1:{self.ports['hostmgr']}",
                              host=self.config.host, resources=each, labels=labels,
                              ports=(PortRange(begin, begin + span - 1),),
                              revocable_cpus=self.config.agent_revocable_cpus,
                              slack_from_usage=self.config.agent_slack_from_usage,
                              enforce_fd_limit=self.config.agent_enforce_fd_limit,
                              orphan_secs=self.config.orphan_secs,
                              credentials=self.security.internal, tls=self.config.tls,
                              allow_root_tasks=self.config.allow_root_tasks)
            agent = AgentApp(cfg)
            agent.start()
            self.agents.append(agent)

    def _stop_agents(self) -> None:
        for agent in reversed(self.agents):
            agent.stop()  # type: ignore[attr-defined]
        self.agents.clear()

    # -- Aurora bridge ----------------------------------------------------------------
    def _start_bridge(self) -> None:
        from aurorabridge.app import AuroraBridge
        from aurorabridge.config import BridgeConfig, HandlerSettings, ValidationSettings
        from peloton.api.client import PelotonClient

        address = f"127.0.0.1:{self.ports['jobmgr']}"
        config = BridgeConfig(host=self.config.host, port=self.config.aurora_port,
                              jobmgr=address, resmgr=f"127.0.0.1:{self.ports['resmgr']}",
                              hostmgr=f"127.0.0.1:{self.ports['hostmgr']}",
                              insecure=self.config.insecure,
                              validation=ValidationSettings(
                                  allowed_environments=self.config.aurora_environments),
                              handlers=HandlerSettings(
                                  unfit_jobs=self.config.aurora_unfit_jobs,
                                  concurrent_updates=self.config.aurora_concurrent_updates,
                                  watch_time=self.config.aurora_watch_time))
        client = PelotonClient(jobmgr=config.jobmgr, resmgr=config.resmgr,
                               hostmgr=config.hostmgr, caller="peloton-aurorabridge",
                               headers=dict(self.security.internal), tls=self.config.tls)
        self.bridge = AuroraBridge(config, client, security=self.security)
        self.bridge.start()

    def _stop_bridge(self) -> None:
        if self.bridge is not None:
            self.bridge.stop()
            self.bridge = None

    # -- ZooKeeper: leader nodes, the bridge's ServerSet member, the announcer ----------------
    def _zookeeper_parts(self) -> list[Component]:
        from announcer.app import Announcer
        from announcer.config import AnnouncerConfig
        from peloton.api.client import PelotonClient
        from peloton.cluster.zk_presence import ClusterPresence, ZkPresence

        cfg = self.config
        self.presence = ClusterPresence(ZkPresence(cfg.zk, cfg.zk_root, cfg.aurora_zk_path), cfg.host,
                                        self.ports, lambda: self.bridge.port if self.bridge else None)
        client = PelotonClient(jobmgr=f"127.0.0.1:{self.ports['jobmgr']}",
                               hostmgr=f"127.0.0.1:{self.ports['hostmgr']}", caller="peloton-announcer",
                               headers=dict(self.security.internal), tls=cfg.tls)
        announcer = Announcer(AnnouncerConfig(ensemble=cfg.zk, root=cfg.announcer_root,
                                              use_ip=cfg.announcer_use_ip, election_root=cfg.zk_root),
                              client)
        return [self.presence, announcer, FunctionComponent("announcer-client", lambda: None, client.close)]

    # -- archiver (talks to the job manager over gRPC, like a separate one) ---------------
    def _start_archiver(self) -> None:
        from archiver.app import Archiver
        from archiver.config import ArchiverConfig
        from archiver.sinks import open_sink
        from peloton.api.client import PelotonClient

        client = PelotonClient(jobmgr=f"127.0.0.1:{self.ports['jobmgr']}", caller="peloton-archiver",
                               headers=dict(self.security.internal), tls=self.config.tls)
        self.archiver = Archiver(ArchiverConfig(), client, open_sink(self.config.archive))
        self.archiver.start()
        self._archiver_client = client

    def _stop_archiver(self) -> None:
        if self.archiver is not None:
            self.archiver.stop()
            self.archiver.sink.close()
            self._archiver_client.close()
            self.archiver = None

    # -- web UI (a front like the CLI: it talks to the daemons over gRPC) -----------------
    def _start_ui(self) -> None:
        from peloton.api.client import PelotonClient
        from ui.server import UiServer

        # No credentials of its own: with authentication on, each browser session's calls
        # carry that session's login token.
        client = PelotonClient(jobmgr=f"127.0.0.1:{self.ports['jobmgr']}",
                               resmgr=f"127.0.0.1:{self.ports['resmgr']}",
                               hostmgr=f"127.0.0.1:{self.ports['hostmgr']}", caller="peloton-ui",
                               tls=self.config.tls)
        self.ui = UiServer(client, self.config.host, self.config.ui_port,
                           auth=self.security.enabled, tls=self.config.tls,
                           allowed_hosts=self.config.ui_allowed_hosts,
                           audit=self.security.audit,
                           forecast_wall_secs=self.config.ui_forecast_wall_secs)
        self.ui.start()
        self._ui_client = client

    def _stop_ui(self) -> None:
        if self.ui is not None:
            self.ui.stop()
            self._ui_client.close()
            self.ui = None

    def stop(self) -> None:
        """Stop everything, newest first."""
        if self._lifecycle is not None:
            self._lifecycle.stop()
            self._lifecycle = None

    def agent_work_dirs(self) -> list[Path]:
        """Work dirs of this cluster's local agents (present or past, under the data dir)."""
        if self.config.backend != "local":
            return []
        root = (self.config.data_dir / "agents").resolve()
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def addresses(self) -> list[str]:
        """What `peloton up` prints: every address it serves."""
        host = self.config.host
        lines = [
            f"job manager   gRPC {host}:{self.ports['jobmgr']}  (v0 JobManager/TaskManager/"
            "UpdateService, v1alpha JobService/PodService/WatchService/AdminService)",
            f"res. manager  gRPC {host}:{self.ports['resmgr']}  (v0 ResourceManager)",
            f"host manager  gRPC {host}:{self.ports['hostmgr']}  (v0 HostService, agents)",
        ]
        if self.bridge is not None:
            lines.append(f"aurora bridge HTTP http://{host}:{self.bridge.port}/api  "
                         "(Aurora Thrift: binary and JSON)")
        for agent in self.agents:
            lines.append(f"agent         {agent.config.name} gRPC {agent.address}  "  # type: ignore[attr-defined]
                         f"work dir {agent.work_dir}")  # type: ignore[attr-defined]
        if self.presence is not None:
            lines.append(self.presence.describe())
            lines.append(f"announcer     ServerSets of announced jobs under {self.config.announcer_root}")
        if self.archiver is not None:
            lines.append(f"archiver      into {self.archiver.sink.url}")
        if self.ui is not None:
            lines.append(f"web UI        {self.ui.url}")
        lines.append(f"storage       {self.store.url if self.store else self.store_url()}")
        if self.security.enabled:
            lines.append(f"auth          on ({self.config.auth}); log in with `peloton login`")
        else:
            lines.append("auth          off (this machine only; `--auth FILE` turns it on)")
        return lines


def _constant(epoch: int) -> Callable[[], int | None]:
    return lambda: epoch


def private_dir(path: Path) -> None:
    """Make `path` the cluster's private data dir: files created from now on are 0600
    (umask 077; tasks get 022 back from their supervisor), the dir itself 0711."""
    os.umask(0o077)
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o711)


def run(config: UpConfig, announce: bool = True) -> None:
    """Run until SIGINT/SIGTERM, then stop cleanly."""
    stop = threading.Event()
    stop_on_signals(stop)  # a second signal ends the process at once
    cluster = AllInOne(config)
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    if announce:
        print(f"peloton up (pid {os.getpid()}): cluster running", flush=True)
        for line in cluster.addresses():
            print("  " + line, flush=True)
        print("press Ctrl-C to stop", flush=True)
    try:
        while not stop.wait(0.5):
            pass
        if announce:  # the signal was heard; the clean stop may take a grace period
            print("peloton up: stopping (a second Ctrl-C or SIGTERM ends it at once)", flush=True)
    finally:
        cluster.stop()
        work_dirs = cluster.agent_work_dirs()
        if config.keep_tasks:
            kept = sum(len(live_runs(w)) for w in work_dirs)
            note = (f"; {kept} task(s) left running for the next `peloton up` with this data "
                    f"dir to adopt (stopped by their supervisors if none does within "
                    f"{config.orphan_secs:g} s)") if kept else ""
        else:
            stopped = sum(len(stop_runs(w)) for w in work_dirs)
            note = f"; {stopped} task(s) stopped" if stopped else ""
        if announce:
            print(f"peloton up: stopped{note}", flush=True)
