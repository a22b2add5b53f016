"""What each daemon process builds: its peers' port clients and its leader-only objects.

Each stateful role gives `Leadership` a `TermBuilder` that makes one term's
objects exactly as `peloton up` makes them (peloton/cluster/allinone.py),
except that the other daemons are gRPC clients of their leaders
(peloton.api.ports_grpc) and storage is fenced to the term:

* resmgr: ResourceManager + the private ResourceManagerService; it calls
  the host manager for capacity and reads its status stream;
* hostmgr: HostManager over a fresh backend from the host backend registry
  (`backend:` local - agents register with the leader -, sim, or mesos) +
  the private HostManagerService;
* jobmgr: JobManager; when the resource or host manager's term changes (it
  started over with empty state), the job manager hands its runs back;
* placement: no election, one PlacementEngine for the process (Peloton runs
  placement engines active-active).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from peloton.api.ports_grpc.channel import LeaderTarget, PeerSecurity, StaticTarget, Target
from peloton.api.ports_grpc.hostmgr_client import GrpcHostManager
from peloton.api.ports_grpc.hostmgr_servicer import serve_host_manager
from peloton.api.ports_grpc.resmgr_client import GrpcResourceManager
from peloton.api.ports_grpc.resmgr_servicer import serve_resource_manager
from peloton.api.ports_grpc.term_fence import EpochWatermark, stamped, term_epoch
from peloton.cluster.daemons.config import (
    DaemonConfig,
    HostmgrProcessConfig,
    JobmgrProcessConfig,
    PlacementProcessConfig,
    ResmgrProcessConfig,
)
from peloton.cluster.daemons.leadership import Term, TermBuilder
from peloton.common.auth import Security
from peloton.common.components import Component
from peloton.common.discovery import LeaderDiscovery
from peloton.common.fencing import Fence, fenced
from peloton.common.leader import HOST_MANAGER, JOB_MANAGER, RESOURCE_MANAGER
from peloton.common.metrics import Metrics
from peloton.storage import Store

#: Consumers of the host manager's status stream in every cluster: the job manager and
#: the resource manager (nothing is acknowledged to agents before both have it).
STREAM_CONSUMERS = ("jobmgr", "resmgr")


@dataclass
class Runtime:
    """What the process gives a role's builder."""

    role: str
    config: DaemonConfig
    store: Store | None
    zk: KazooClient | None
    metrics: Metrics
    #: Things to close when the process stops (peer clients, discoveries).
    closers: list[Any] = field(default_factory=list)
    #: How the process authenticates callers and proves itself to its peers.
    security: Security = field(default_factory=Security)
    #: The newest job manager epochs its term fence admitted (resource and host managers
    #: with a store; term_fence.py), for the long polls that must end when one moves.
    watermark: EpochWatermark | None = None

    @property
    def caller(self) -> str:
        """The YARPC caller name this process sends (`peloton-resmgr`, ...)."""
        return f"peloton-{self.role}"

    def the_store(self) -> Store:
        """The store (stateful roles only)."""
        assert self.store is not None, f"{self.role} has no store"
        return self.store

    def target(self, zk_role: str, static: tuple[str, ...]) -> Target:
        """Where a peer role's leader is: its ZooKeeper leader znode, else fixed addresses."""
        if self.zk is None:
            return StaticTarget(static)
        discovery = LeaderDiscovery(self.zk, zk_role, root=self.config.election.root)
        discovery.start()
        self.closers.append(discovery)
        return LeaderTarget(discovery)

    def resmgr(self) -> GrpcResourceManager:
        """A client of the resource manager's leader."""
        peers = self.config.peers
        client = GrpcResourceManager(self.target(RESOURCE_MANAGER, peers.resmgr),
                                     caller=self.caller, timeout=peers.call_timeout,
                                     security=PeerSecurity.of(self.security))
        self.closers.append(client)
        return client

    def hostmgr(self) -> GrpcHostManager:
        """A client of the host manager's leader."""
        peers = self.config.peers
        client = GrpcHostManager(self.target(HOST_MANAGER, peers.hostmgr), caller=self.caller,
                                 timeout=peers.call_timeout, security=PeerSecurity.of(self.security))
        self.closers.append(client)
        return client


def term_store(store: Store, role: str, term: Term) -> Store:
    """`store` with every write checked by the store against the term's epoch."""
    return store.with_fencing(role, lambda: term.epoch)


def resmgr_terms(rt: Runtime) -> TermBuilder:
    """The resource manager's terms."""
    from peloton.cluster.forecast import serve_forecast
    from peloton.resmgr.app import ResourceManager

    assert isinstance(rt.config, ResmgrProcessConfig)
    config, store, hostmgr = rt.config.resmgr, rt.the_store(), rt.hostmgr()

    def build(term: Term, fence: Fence) -> list[Component]:
        rm = ResourceManager(fenced(term_store(store, "resmgr", term), fence), hostmgr, config,
                             grpc=term.recorder, metrics=rt.metrics)
        serve_resource_manager(term.recorder, rm, rt.watermark)
        # The forecast only reads the store (job configs and runtimes): no fencing needed.
        serve_forecast(term.recorder, rm, hostmgr, store)
        return [rm]

    return build


def hostmgr_terms(rt: Runtime) -> TermBuilder:
    """The host manager's terms, each over a fresh backend of the configured kind."""
    from peloton.hostmgr.app import HostManager
    from peloton.hostmgr.backends.registry import BackendEnv, open_backend

    assert isinstance(rt.config, HostmgrProcessConfig)
    config = rt.config
    agents, store = config.agents, rt.the_store()
    hm_config = rt.config.hostmgr
    consumers = tuple(dict.fromkeys((*hm_config.consumers, *STREAM_CONSUMERS)))
    hm_config = dataclasses.replace(hm_config, consumers=consumers)

    def build(term: Term, fence: Fence) -> list[Component]:
        # Fenced twice over: in process (`fence`) and by the store against the term's epoch.
        term_view = fenced(term_store(store, "hostmgr", term), fence)
        # A Mesos backend subscribes with the framework id the previous leader stored, so a
        # new leader is the same framework (and reconciles); the master cuts the old one off.
        backend = open_backend(config.backend, BackendEnv(
            grpc=term.recorder, frameworks=term_view, heartbeat_secs=agents.heartbeat_secs,
            heartbeat_timeout_secs=agents.heartbeat_timeout_secs,
            mesos=config.mesos, tls=rt.security.tls,
            kubernetes=config.kubernetes))
        hm = HostManager(term_view, backend, hm_config, grpc_server=term.recorder,
                         metrics=rt.metrics)
        serve_host_manager(term.recorder, hm, hm.events)
        return [hm]

    return build


def jobmgr_terms(rt: Runtime) -> TermBuilder:
    """The job manager's terms; a peer's new term makes the running one hand its runs back."""
    from peloton.jobmgr.app import JobManager

    assert isinstance(rt.config, JobmgrProcessConfig)
    config, store = rt.config.jobmgr, rt.the_store()
    resmgr, hostmgr = rt.resmgr(), rt.hostmgr()
    latest: list[JobManager] = []  # the newest term's job manager (it ignores reports unless started)

    def resmgr_restarted(old: str, new: str) -> None:
        for jm in latest:
            jm.resync.restarted(resmgr=True)

    def hostmgr_restarted(old: str, new: str) -> None:
        for jm in latest:
            jm.resync.restarted(hostmgr=True)

    resmgr.channel.add_term_listener(resmgr_restarted)
    hostmgr.channel.add_term_listener(hostmgr_restarted)

    def build(term: Term, fence: Fence) -> list[Component]:
        # The term's calls to its peers carry its epoch: a peer that has heard from a newer
        # term refuses them (term_fence.py), as the store refuses its writes.
        epoch = term_epoch(lambda: term.epoch)
        jm = JobManager(fenced(term_store(store, "jobmgr", term), fence),
                        stamped(resmgr, "jobmgr", epoch), stamped(hostmgr, "jobmgr", epoch),
                        config, grpc=term.recorder)
        latest[:] = [jm]
        return [jm]

    return build


def placement_engine(rt: Runtime) -> Component:
    """The placement engine: runs in every placement process, no election."""
    from peloton.placement.app import PlacementEngine

    assert isinstance(rt.config, PlacementProcessConfig)
    return PlacementEngine(rt.resmgr(), rt.hostmgr(), rt.config.placement, metrics=rt.metrics)


#: Stateful roles: their ZooKeeper role name and term builder.
ELECTED = {
    "jobmgr": (JOB_MANAGER, jobmgr_terms),
    "resmgr": (RESOURCE_MANAGER, resmgr_terms),
    "hostmgr": (HOST_MANAGER, hostmgr_terms),
}
