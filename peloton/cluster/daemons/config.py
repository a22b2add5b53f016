"""The config of one daemon process: YAML files (later ones win), then the environment.

Every daemon's file has the same common sections, as Peloton's
`config/<daemon>/base.yaml` do, plus one section of its own knobs:

    election:                 # ZooKeeper; empty zk_servers = a single process, no election
      zk_servers: [127.0.0.1:2181]
      root: /peloton
      session_timeout: 10     # seconds; a dead leader is replaced after about this long
    grpc:
      host: 127.0.0.1         # bind address
      port: 5394              # default per daemon: jobmgr 5392, resmgr 5394, hostmgr 5391,
                              # placement 5393
      advertise: ""           # address published in the leader znode (default: host, or
                              # this machine's best address when host is 0.0.0.0)
    storage:
      url: sqlite:///.peloton/state.db
      bootstrap: false        # create the schema in an empty database
    peers:                    # where the other daemons are without ZooKeeper
      resmgr: [127.0.0.1:5394]
      hostmgr: [127.0.0.1:5391]
      call_timeout: 10        # seconds a call to a peer may retry UNAVAILABLE
    logging:
      level: INFO
    security:                 # README, Security
      auth: ""                # users file: authentication on (else loopback only)
      insecure: false         # serve a non-loopback address without auth anyway
      tls_cert: ""            # TLS (mutual with tls_ca) for the server and peer calls
      tls_key: ""
      tls_ca: ""
    resmgr: {...}             # ResourceManagerConfig (peloton/resmgr/config.py)

The host manager also has `backend:` (local | sim:... | mesos:MASTER | k8s:KUBECONFIG |
k8s:in-cluster, as `peloton up --backend`; `peloton hostmgr --backend` overrides it),
`mesos:` (MesosConfig, less its master) and `kubernetes:` (KubeConfig: namespace, default_image, ...).

The own sections are the daemons' config dataclasses: `jobmgr`
(JobManagerConfig), `resmgr` (ResourceManagerConfig), `hostmgr`
(HostManagerConfig, plus `agents` for the local-agent backend) and
`placement` (PlacementEngineConfig).  Every key can be set from the
environment as PELOTON_<SECTION>_<KEY> (PELOTON_GRPC_PORT=6394), and
Peloton's ELECTION_ZK_SERVERS works too (see peloton/common/config.py).
Examples: docs/config/*.yaml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from peloton.common.config import load_config
from peloton.common.leader import ElectionConfig
from peloton.core.errors import InvalidArgument
from peloton.core.partitions import DEFAULT_PARTITIONS
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.mesos_config import MesosConfig
from peloton.hostmgr.config import HostManagerConfig
from peloton.jobmgr.config import JobManagerConfig
from peloton.placement.config import PlacementEngineConfig
from peloton.resmgr.config import ResourceManagerConfig

C = TypeVar("C", bound="DaemonConfig")

#: Peloton's default gRPC ports (api-compat.md §2).
DEFAULT_PORTS = {"jobmgr": 5392, "resmgr": 5394, "hostmgr": 5391, "placement": 5393}


@dataclass(frozen=True)
class GrpcConfig:
    """Where the daemon serves, and what it tells ZooKeeper."""

    host: str = "127.0.0.1"
    #: 0 picks a free port; each daemon's schema sets Peloton's default.
    port: int = 0
    advertise: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidArgument(f"port must be in 0..65535, got {self.port}", field="port")


@dataclass(frozen=True)
class StorageConfig:
    """The store every stateful daemon opens (the same database for all of them)."""

    url: str = "sqlite:///.peloton/state.db"
    bootstrap: bool = False


@dataclass(frozen=True)
class PeersConfig:
    """The other daemons' addresses when there is no ZooKeeper to find their leaders."""

    resmgr: tuple[str, ...] = ("127.0.0.1:5394",)
    hostmgr: tuple[str, ...] = ("127.0.0.1:5391",)
    #: Seconds a call to a peer may keep retrying UNAVAILABLE (a failover in progress).
    call_timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.call_timeout <= 0:
            raise InvalidArgument("call_timeout must be > 0", field="call_timeout")


@dataclass(frozen=True)
class SecurityConfig:
    """Authentication, TLS, and whether a non-loopback bind without them is accepted."""

    auth: str = ""
    insecure: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""


@dataclass(frozen=True)
class LoggingConfig:
    """Log level of the process (logs go to stderr)."""

    level: str = "INFO"


@dataclass(frozen=True)
class AgentsConfig:
    """The host manager's local-agent backend: how often agents heartbeat, when one is gone."""

    heartbeat_secs: float = 1.0
    heartbeat_timeout_secs: float = 10.0


@dataclass(frozen=True)
class DaemonConfig:
    """The sections every daemon process has (see the module docstring)."""

    election: ElectionConfig = ElectionConfig()
    grpc: GrpcConfig = GrpcConfig()
    storage: StorageConfig = StorageConfig()
    peers: PeersConfig = PeersConfig()
    logging: LoggingConfig = LoggingConfig()
    security: SecurityConfig = SecurityConfig()

    @property
    def session_timeout(self) -> float:
        """This process's ZooKeeper session timeout (seconds)."""
        return self.election.session_timeout


@dataclass(frozen=True)
class JobmgrProcessConfig(DaemonConfig):
    """`peloton jobmgr`."""

    grpc: GrpcConfig = GrpcConfig(port=DEFAULT_PORTS["jobmgr"])
    jobmgr: JobManagerConfig = JobManagerConfig()

    @property
    def partitions(self) -> int:
        """The job partitions this process is a member of: `jobmgr.partitions` when set,
        else all-active (DEFAULT_PARTITIONS) with ZooKeeper and one leader (0) without."""
        if self.jobmgr.partitions is not None:
            return self.jobmgr.partitions
        return DEFAULT_PARTITIONS if self.election.zk_servers else 0

    @property
    def session_timeout(self) -> float:
        """A member's own session timeout (`jobmgr.member_session_timeout`), a leader's
        election.session_timeout."""
        return (self.jobmgr.member_session_timeout if self.partitions > 0
                else self.election.session_timeout)


@dataclass(frozen=True)
class ResmgrProcessConfig(DaemonConfig):
    """`peloton resmgr`."""

    grpc: GrpcConfig = GrpcConfig(port=DEFAULT_PORTS["resmgr"])
    resmgr: ResourceManagerConfig = ResourceManagerConfig()


@dataclass(frozen=True)
class HostmgrProcessConfig(DaemonConfig):
    """`peloton hostmgr`: `backend` names the host backend (peloton/hostmgr/backends/registry.py:
    local - agents register with the leader -, sim:..., mesos:MASTER, or k8s:KUBECONFIG)."""

    grpc: GrpcConfig = GrpcConfig(port=DEFAULT_PORTS["hostmgr"])
    hostmgr: HostManagerConfig = field(
        default_factory=lambda: HostManagerConfig(consumers=("jobmgr", "resmgr")))
    backend: str = "local"
    agents: AgentsConfig = AgentsConfig()
    #: The Mesos backend's settings beyond its master (`backend: mesos:MASTER`).
    mesos: MesosConfig = MesosConfig()
    #: The Kubernetes backend's settings (`backend: k8s:KUBECONFIG` or `k8s:in-cluster`).
    kubernetes: KubeConfig = KubeConfig()

    def __post_init__(self) -> None:
        from peloton.hostmgr.backends.registry import BackendSpec

        BackendSpec.parse(self.backend)  # InvalidArgument naming the field
        if self.mesos.master:
            # One place names the master, so two cannot disagree.
            raise InvalidArgument("the Mesos master is named by `backend: mesos:MASTER`, "
                                  "not in the mesos section", field="mesos.master")


@dataclass(frozen=True)
class PlacementProcessConfig(DaemonConfig):
    """`peloton placement` (no election: any number run side by side)."""

    grpc: GrpcConfig = GrpcConfig(port=DEFAULT_PORTS["placement"])
    placement: PlacementEngineConfig = PlacementEngineConfig()


SCHEMAS: Mapping[str, type[DaemonConfig]] = {
    "jobmgr": JobmgrProcessConfig, "resmgr": ResmgrProcessConfig,
    "hostmgr": HostmgrProcessConfig, "placement": PlacementProcessConfig,
}


def load(schema: type[C], files: Sequence[str | Path] = (),
         env: Mapping[str, str] | None = None) -> C:
    """A daemon's config from `files` and the environment (`os.environ` unless given)."""
    return load_config(schema, files, env=env)
