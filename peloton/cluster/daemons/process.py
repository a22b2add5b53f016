"""One daemon process: `peloton jobmgr|resmgr|hostmgr|placement --config FILE ...`.

Start order: storage (schema checked; stateful roles), ZooKeeper (when
configured), the gRPC server bound, the role's objects (the first term is
built before serving, so the leader gate knows every service name), the
server started, then leadership: the election joined (or, without
ZooKeeper, the only instance leads at once).  A job manager with job partitions
(`jobmgr.partitions`, 64 by default with ZooKeeper) is a member of an all-active cluster
instead (members.py): it serves at once and drives the job partitions it holds; one with
`jobmgr.partitions: 0` leads alone, and refuses to while members have joined the cluster.
Placement has no election: its engine starts right after the server.  Stop is the reverse; tasks keep
running on their agents.

The process prints `peloton <role> (pid N): serving gRPC on host:port` when
it serves (a standby serves too, answering UNAVAILABLE until it leads).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import sys
import threading
from collections.abc import Sequence

from peloton.api.auth_jobs import GUARDED_PREFIXES, JobGuard
from peloton.api.auth_service import serve_auth
from peloton.api.grpc_server import GrpcServer
from peloton.api.ports_grpc.term_fence import EpochWatermark, TermFenceInterceptor
from peloton.api.unserved import register_unserved
from peloton.cluster.daemons.config import (
    SCHEMAS,
    DaemonConfig,
    HostmgrProcessConfig,
    JobmgrProcessConfig,
    load,
)
from peloton.cluster.daemons.leadership import Leadership
from peloton.cluster.daemons.members import jobmgr_member, refuse_to_lead_members
from peloton.cluster.daemons.roles import ELECTED, Runtime, placement_engine
from peloton.cluster.job_facts import StoreJobFacts
from peloton.common.auth import build_security, check_bind
from peloton.common.components import Component, FunctionComponent, Lifecycle
from peloton.common.leader import LeaderId, listen_ip, new_client
from peloton.common.metrics import Metrics
from peloton.common.shutdown import stop_on_signals
from peloton.common.tls import TlsFiles
from peloton.core.errors import InvalidArgument, Unavailable
from peloton.storage import StoreOptions, check_schema, open_store

log = logging.getLogger(__name__)

#: How long a process waits for ZooKeeper at start before giving up (seconds).
ZK_CONNECT_TIMEOUT = 30.0


class DaemonProcess:
    """Everything one daemon process runs; `start()` then `stop()`."""

    def __init__(self, role: str, config: DaemonConfig) -> None:
        if role not in SCHEMAS:
            raise ValueError(f"unknown daemon {role!r}")
        self.role = role
        self.config = config
        self.grpc: GrpcServer | None = None
        self.leadership: Leadership | None = None
        self.runtime: Runtime | None = None
        self._lifecycle: Lifecycle | None = None

    @property
    def address(self) -> str:
        """host:port the gRPC server serves on."""
        assert self.grpc is not None
        return f"{self.config.grpc.host}:{self.grpc.port}"

    def advertised(self) -> LeaderId:
        """What this process publishes as leader: an address other machines can dial."""
        assert self.grpc is not None
        g = self.config.grpc
        ip = g.advertise or (g.host if g.host not in ("", "0.0.0.0", "::") else listen_ip())
        return LeaderId(hostname=socket.gethostname(), ip=ip, http=0, grpc=self.grpc.port,
                        version=_version())

    def start(self) -> None:
        """Build and start everything (see the module docstring for the order)."""
        cfg = self.config
        store = None
        if self.role in ELECTED:
            store = open_store(cfg.storage.url, StoreOptions(bootstrap=cfg.storage.bootstrap))
            check_schema(store)
        zk = None
        if cfg.election.zk_servers:
            zk = new_client(cfg.election.zk_servers, session_timeout=cfg.session_timeout,
                            use_gevent=_gevent_patched())
            try:
                zk.start(timeout=ZK_CONNECT_TIMEOUT)
            except Exception as exc:
                zk.close()
                raise Unavailable(f"cannot connect to ZooKeeper at {cfg.election.hosts}: "
                                  f"{exc}") from None
        sec = cfg.security
        security = build_security(sec.auth or None,
                                  TlsFiles.from_options(sec.tls_cert, sec.tls_key, sec.tls_ca))
        check_bind(cfg.grpc.host, security, insecure=sec.insecure, what=f"peloton {self.role}")
        if security.enabled and not security.internal and self.role != "hostmgr":
            raise InvalidArgument(f"{sec.auth}: peloton {self.role} calls its peers as the internal "
                                  "user: set internal_user and internal_password_file",
                                  field="security.auth")
        # The resource and host managers refuse the calls of a job manager term older than
        # one they have heard from (a leader paused and resumed), as the store refuses its
        # writes (peloton/api/ports_grpc/term_fence.py).
        watermark = EpochWatermark(store.leader_epoch) \
            if store is not None and self.role in ("resmgr", "hostmgr") else None
        fences = [TermFenceInterceptor(watermark)] if watermark is not None else []
        self.grpc = grpc = GrpcServer(f"{cfg.grpc.host}:{cfg.grpc.port}", security=security,
                                      interceptors=fences)
        serve_auth(grpc, security)
        if self.role == "jobmgr" and store is not None:
            guard = JobGuard(StoreJobFacts(store))
            for prefix in GUARDED_PREFIXES:
                grpc.auth.add_guard(prefix, guard)
        rt = self.runtime = Runtime(self.role, cfg, store, zk, Metrics(self.role),
                                    security=security, watermark=watermark)
        parts: list[Component] = []
        if isinstance(cfg, JobmgrProcessConfig) and cfg.partitions > 0:
            # All-active: every job manager drives the job partitions it holds, and serves
            # from the start (peloton/cluster/daemons/members.py).
            register_unserved(grpc)
            parts = [FunctionComponent("grpc", grpc.start, grpc.stop),
                     *jobmgr_member(rt, grpc, self.advertised(), grpc.port)]
        elif self.role in ELECTED:
            zk_role, terms = ELECTED[self.role]
            holder = f"{socket.gethostname()}:{os.getpid()}"
            the_store = rt.the_store()
            role = self.role
            root = cfg.election.root

            def claim(epoch: int | None) -> int:
                if role == "jobmgr" and zk is not None:
                    refuse_to_lead_members(zk, root)
                return the_store.claim_leadership(role, epoch, holder)

            self.leadership = Leadership(zk_role, terms(rt), client=zk, me=self.advertised(),
                                         root=root, claim=claim)
            self.leadership.gate.install(grpc)
            if self.role == "jobmgr":
                register_unserved(grpc)
            parts = [FunctionComponent("grpc", grpc.start, grpc.stop), self.leadership]
        else:
            parts = [FunctionComponent("grpc", grpc.start, grpc.stop), placement_engine(rt)]
        self._lifecycle = Lifecycle(parts, name=f"peloton-{self.role}")
        self._lifecycle.start()

    def stop(self) -> None:
        """Stop everything, newest first; then close peers, ZooKeeper and storage."""
        if self._lifecycle is not None:
            self._lifecycle.stop()
            self._lifecycle = None
        rt, self.runtime = self.runtime, None
        if rt is None:
            return
        for closer in reversed(rt.closers):
            try:
                (getattr(closer, "close", None) or closer.stop)()
            except Exception:
                log.warning("closing %r failed", closer, exc_info=True)
        if rt.zk is not None:
            rt.zk.stop()
            rt.zk.close()
        if rt.store is not None:
            rt.store.close()
        rt.security.close()


def _gevent_patched() -> bool:
    from gevent import monkey

    return bool(monkey.is_module_patched("socket"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("peloton-py")
    except PackageNotFoundError:
        return ""


def run(role: str, files: Sequence[str], announce: bool = True, backend: str = "") -> None:
    """Run one daemon until SIGINT/SIGTERM, then stop cleanly (`backend`: the host manager's,
    overriding its config)."""
    config = load(SCHEMAS[role], files)
    if backend:
        if not isinstance(config, HostmgrProcessConfig):
            raise InvalidArgument("only the host manager has a backend", field="backend")
        config = dataclasses.replace(config, backend=backend)
    os.umask(0o077)  # what the daemon writes (SQLite files, audit log) is private
    logging.basicConfig(level=config.logging.level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    stop_on_signals(stop)  # a second signal ends the process at once
    process = DaemonProcess(role, config)
    try:
        process.start()
    except Exception:
        process.stop()
        raise
    if announce:
        print(f"peloton {role} (pid {os.getpid()}): serving gRPC on {process.address}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        process.stop()
        if announce:
            print(f"peloton {role}: stopped", flush=True)
