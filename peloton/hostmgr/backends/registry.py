"""Host backends by name: how `peloton up` and the separate host manager daemon pick one.

A backend is named by one string, the same on the CLI (`--backend`) and in
the host manager's config (`backend:`):

    local                                   our agents register with the host manager (gRPC)
    sim[:HOSTS[:TASK_S[:CPUS[:START_S]]]]   virtual hosts whose tasks run START_S after launch
                                            and succeed TASK_S later (demos, benchmarks)
    mesos:MASTER                            an Apache Mesos master: http://host:port, host:port
                                            or zk://host:port,.../mesos
    k8s:KUBECONFIG | k8s:in-cluster         a Kubernetes cluster's nodes (a kubeconfig file, or
                                            the service account of the pod we run in)

`open_backend` builds a fresh backend for one host manager term from a
`BackendEnv` (what the process offers it).  The Mesos backend keeps its
framework id in the store's `frameworks` table, so a restarted `peloton up`
and a new host manager leader subscribe as the same framework.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import Resources
from peloton.core.model.storage_records import FrameworkInfo
from peloton.hostmgr.backends.base import HostBackend
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.mesos_config import MesosConfig

KINDS = ("local", "sim", "mesos", "k8s")


class FrameworkRecords(Protocol):
    """Where a Mesos framework id is kept (the store's FrameworkStore)."""

    def get_framework_info(self, name: str) -> FrameworkInfo | None:
        """The record of framework `name`, or None."""
        ...

    def put_framework_info(self, info: FrameworkInfo) -> None:
        """Write the record of a framework."""
        ...


@dataclass(frozen=True)
class BackendEnv:
    """What the host manager process offers a backend."""

    #: The host manager's gRPC server (or a term's recorder): the local backend serves the
    #: agents' registry on it.
    grpc: Any = None
    #: The store, for the Mesos framework id (None: a new framework every start).
    frameworks: FrameworkRecords | None = None
    heartbeat_secs: float = 1.0
    heartbeat_timeout_secs: float = 10.0
    #: Settings of the Mesos backend beyond its master (MesosConfig fields).
    mesos: MesosConfig | None = None
    #: Revocable (slack) cpus every simulated host offers beside its capacity.
    sim_revocable_cpus: float = 0.0
    #: TLS of the local backend's calls to agents (None: plain; README, Security).
    tls: TlsFiles | None = None
    #: Settings of the Kubernetes backend beyond its credentials (its `source` is replaced by
    #: what follows `k8s:` in the backend's name).
    kubernetes: KubeConfig | None = None


@dataclass(frozen=True)
class BackendSpec:
    """A parsed backend name: its kind and what follows the first ':'."""

    kind: str
    arg: str = ""

    @staticmethod
    def parse(text: str) -> BackendSpec:
        """Parse a backend name; InvalidArgument (field "backend") if it is not one."""
        kind, _, arg = text.strip().partition(":")
        if kind not in KINDS:
            raise InvalidArgument(f"unknown host backend {text!r}: expected local, "
                                  "sim[:HOSTS[:TASK_S[:CPUS[:START_S]]]], mesos:MASTER, "
                                  "k8s:KUBECONFIG or k8s:in-cluster", field="backend")
        if kind == "mesos" and not arg:
            raise InvalidArgument("the mesos backend needs a master: mesos:http://host:5050 "
                                  "or mesos:zk://host:2181/mesos", field="backend")
        if kind == "k8s" and not arg:
            raise InvalidArgument("the k8s backend needs credentials: k8s:/path/to/kubeconfig "
                                  "or k8s:in-cluster", field="backend")
        if kind == "local" and arg:
            raise InvalidArgument(f"the local backend takes no argument, got {text!r}",
                                  field="backend")
        if kind == "sim":
            parts = arg.split(":") if arg else []
            try:
                if len(parts) > 4 or any(float(p) < 0 for p in parts if p):
                    raise ValueError
            except ValueError:
                raise InvalidArgument(f"bad simulated backend {text!r}: expected "
                                      "sim[:HOSTS[:TASK_S[:CPUS[:START_S]]]]",
                                      field="backend") from None
        return BackendSpec(kind, arg)


def open_backend(text: str, env: BackendEnv) -> HostBackend:
    """A new backend named by `text` (see the module docstring)."""
    spec = BackendSpec.parse(text)
    return _FACTORIES[spec.kind](spec.arg, env)


def _local(_: str, env: BackendEnv) -> HostBackend:
    from peloton.hostmgr.backends.local import LocalBackend

    backend = LocalBackend(heartbeat_secs=env.heartbeat_secs,
                           heartbeat_timeout_secs=env.heartbeat_timeout_secs, tls=env.tls)
    if env.grpc is not None:
        backend.register_on(env.grpc)
    return backend


def _sim(arg: str, env: BackendEnv) -> HostBackend:
    from peloton.hostmgr.backends.sim import SimBackend
    from peloton.hostmgr.backends.sim_clock import RealClock

    parts = [*(arg.split(":") if arg else []), "", "", "", ""][:4]
    hosts = int(float(parts[0] or 10))
    cpus = float(parts[2] or 1.0)
    return SimBackend(hosts=hosts, task_secs=float(parts[1] or 1.0),
                      start_secs=float(parts[3] or 0.0), clock=RealClock(),
                      capacity=Resources(cpu=cpus, mem_mb=4096.0 * cpus, disk_mb=16384.0 * cpus),
                      revocable_cpu=env.sim_revocable_cpus)


def _mesos(master: str, env: BackendEnv) -> HostBackend:
    try:
        import urllib3  # noqa: F401  (the optional extra)
    except ImportError:
        raise InvalidArgument("Mesos support is not installed: pip install 'peloton-py[mesos]'",
                              field="backend") from None
    from peloton.hostmgr.backends.mesos import MesosBackend

    config = replace(env.mesos or MesosConfig(), master=master)
    records = env.frameworks
    if records is None:
        return MesosBackend(config)

    def load() -> str:
        info = records.get_framework_info(config.framework_name)
        return info.framework_id if info is not None else ""

    def save(framework_id: str, stream_id: str) -> None:
        records.put_framework_info(FrameworkInfo(
            config.framework_name, framework_id, stream_id, time.time(), socket.gethostname()))

    return MesosBackend(config, load_framework_id=load, save_framework_id=save)


def _k8s(source: str, env: BackendEnv) -> HostBackend:
    try:
        import kubernetes  # noqa: F401  (the optional extra)
    except ImportError:
        raise InvalidArgument("Kubernetes support is not installed: pip install 'peloton-py[k8s]'",
                              field="backend") from None
    from peloton.hostmgr.backends.k8s import KubeBackend

    config = replace(env.kubernetes or KubeConfig(), source=source)
    if config.source != "in-cluster" and not Path(config.source).expanduser().is_file():
        raise InvalidArgument(f"no kubeconfig file {config.source!r} (k8s:PATH or k8s:in-cluster)",
                              field="backend")
    return KubeBackend(config)


_FACTORIES: dict[str, Callable[[str, BackendEnv], HostBackend]] = {
    "local": _local, "sim": _sim, "mesos": _mesos, "k8s": _k8s,
}
