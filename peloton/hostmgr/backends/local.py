"""The HostBackend over our own agents (`peloton agent`), spoken to over gRPC.

Agents call in (AgentRegistry, served on the host manager's GrpcServer via
`register_on`): they register, heartbeat and report status.  The backend
calls out to each agent's AgentService to launch, kill, acknowledge,
reconcile and browse sandboxes.

- An agent silent for `heartbeat_timeout_secs` is reported `host_gone`;
  its runs are not reported LOST here (the agent keeps them running and
  re-reports them when it comes back; reconciliation settles the rest).
- Every heartbeat and status report of a registered agent is reported
  `host_seen`, so a host a launch could not reach is offered again at once.
- Acknowledgements are batched per agent by one flusher thread.
- Slack: an agent offers revocable cpu when it registers and with each
  heartbeat (peloton/agent/slack.py); a changed amount re-announces its host
  (`host_up`), so the host manager's books and the cluster's slack capacity
  follow it.
- `reconcile()` answers LOST only for runs that no agent has, and only
  after agents had `reregister_grace_secs` since the backend started to
  come back, so a host manager restart does not declare the world LOST.

Trust: an agent registers as an authenticated principal (with
authentication on: a user whose role accepts AgentRegistry, by password or
client certificate).  The first identity that registers a host name owns it
for the backend's life: a registration, heartbeat or status report for that
host from another identity is refused (PERMISSION_DENIED) and logged, so a
forged agent can neither take a host over nor forge its tasks' status.
Every call to an agent carries the call token the agent sent in its
registration, without which the agent refuses to launch or kill anything.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import grpc

from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as pb
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2_grpc as pb_grpc
from peloton.api.tls_grpc import open_channel
from peloton.common.tls import TlsFiles
from peloton.core.errors import NotFound, PermissionDenied, Unavailable
from peloton.core.model.resources import to_units
from peloton.core.model.sched import LaunchSpec
from peloton.hostmgr.backends.base import BackendHost, HostEventListener, StatusUpdate
from peloton.hostmgr.backends.local_registry import AgentRegistryServicer, lost_update
from peloton.hostmgr.backends.local_wire import host_from_pb, launch_to_pb

#: Metadata key of the agent's call token (peloton/agent/caps.py; not imported from the
#: agent package: the host manager does not depend on it).
TOKEN_KEY = "peloton-agent-token"

log = logging.getLogger(__name__)


class GrpcServerLike(Protocol):
    """What `register_on` needs of peloton.api.grpc_server.GrpcServer."""

    @property
    def server(self) -> grpc.Server:
        """The grpc.Server to add servicers to."""

    def register_names(self, names: Sequence[str]) -> None:
        """Announce added services to health and reflection."""


@dataclass(slots=True)
class _Agent:
    host: BackendHost
    channel: grpc.Channel
    stub: pb_grpc.AgentServiceStub
    last_seen: float
    metadata: tuple[tuple[str, str], ...] = ()


class LocalBackend:
    """Hosts are registered agents; runs are real processes on them."""

    name = "local"

    def __init__(self, *, heartbeat_secs: float = 1.0, heartbeat_timeout_secs: float = 10.0,
                 reregister_grace_secs: float | None = None, call_timeout_secs: float = 10.0,
                 resend_secs: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 tls: TlsFiles | None = None) -> None:
        self.heartbeat_secs = heartbeat_secs
        self.heartbeat_timeout_secs = heartbeat_timeout_secs
        self.reregister_grace_secs = (heartbeat_timeout_secs if reregister_grace_secs is None
                                      else reregister_grace_secs)
        self.call_timeout_secs = call_timeout_secs
        self.resend_secs = resend_secs
        self._clock = clock
        self._lock = threading.Lock()
        self._agents: dict[str, _Agent] = {}
        self._listener: HostEventListener | None = None
        self._started_at = 0.0
        self._stop = threading.Event()
        self._acks: dict[str, list[str]] = {}  # hostname -> uuids to acknowledge
        self._acks_ready = threading.Condition(self._lock)
        #: LOST updates this backend made itself (no agent to re-send them): uuid -> (update, sent at)
        self._own: dict[str, tuple[StatusUpdate, float]] = {}
        #: hostname -> the identity that first registered it (see the module docstring).
        self._owners: dict[str, str] = {}
        self._tls = tls
        self.servicer = AgentRegistryServicer(self)

    # -- wiring -------------------------------------------------------------
    def register_on(self, server: GrpcServerLike) -> None:
        """Serve AgentRegistry on the host manager's GrpcServer (before it starts)."""
        pb_grpc.add_AgentRegistryServicer_to_server(self.servicer, server.server)
        server.register_names(["pelotonpy.internal.agent.AgentRegistry"])

    def start(self, listener: HostEventListener) -> None:
        """Accept agents and report to `listener`."""
        self._listener = listener
        self._started_at = self._clock()
        self._stop.clear()
        threading.Thread(target=self._monitor, name="local-backend-monitor", daemon=True).start()
        threading.Thread(target=self._flush_acks, name="local-backend-acks", daemon=True).start()

    def stop(self) -> None:
        """Stop reporting and drop every agent connection; tasks keep running."""
        self._stop.set()
        with self._lock:
            self._acks_ready.notify_all()
            agents, self._agents = list(self._agents.values()), {}
            self._listener = None
        for agent in agents:
            agent.channel.close()

    @property
    def listener(self) -> HostEventListener | None:
        """Who receives events (None while stopped)."""
        return self._listener

    def hosts(self) -> list[BackendHost]:
        """Every registered agent's host."""
        with self._lock:
            return [a.host for a in self._agents.values()]

    # -- called by the AgentRegistry servicer ----------------------------------
    def agent_registered(self, info: pb.AgentInfo, identity: str = "") -> None:
        """An agent (re-)registered as `identity`: (re)connect to it and announce its host.

        PermissionDenied if another identity registered this host before."""
        host = host_from_pb(info)
        with self._lock:
            owner = self._owners.setdefault(host.hostname, identity)
        if owner != identity:
            log.warning("refused a registration of host %s by %s from %s: the host belongs to "
                        "%s", host.hostname, identity or "(anonymous)", host.address,
                        owner or "(anonymous)")
            raise PermissionDenied(f"host {host.hostname} is registered by another identity; "
                                   f"{identity or '(anonymous)'} may not take it over")
        channel = open_channel(host.address, self._tls)
        metadata = ((TOKEN_KEY, info.call_token),) if info.call_token else ()
        with self._lock:
            old = self._agents.pop(host.hostname, None)
            self._agents[host.hostname] = _Agent(host, channel, pb_grpc.AgentServiceStub(channel),
                                                 self._clock(), metadata)
            listener = self._listener
        if old is not None:
            old.channel.close()
        log.info("agent %s (%s) registered from %s", host.hostname, host.agent_id, host.address)
        if listener is not None:
            listener.host_up(host)

    def agent_seen(self, hostname: str, agent_id: str, slack: float | None = None,
                   identity: str = "") -> bool:
        """Record a sign of life (reported `host_seen`); False if this agent is not registered
        (it must re-register).
        PermissionDenied if another identity registered this host (as for `agent_registered`):
        one agent identity may not keep another's host alive nor report its tasks' status.

        `slack` is the revocable cpu the agent offers now (None: unchanged); a change
        re-announces the host with it, so the cluster's slack capacity follows.
        """
        with self._lock:
            owner = self._owners.get(hostname, identity)
            if owner != identity:
                raise PermissionDenied(f"host {hostname} is registered by another identity; "
                                       f"{identity or '(anonymous)'} may not report for it")
            agent = self._agents.get(hostname)
            listener = self._listener
            if agent is None or agent.host.agent_id != agent_id or listener is None:
                return False
            agent.last_seen = self._clock()
            changed = slack is not None and to_units(max(0.0, slack)) != to_units(
                agent.host.revocable_cpu)
            if changed:
                assert slack is not None
                agent.host = replace(agent.host, revocable_cpu=max(0.0, slack))
                host = agent.host
        if changed:
            log.info("agent %s offers %g revocable cpus", hostname, host.revocable_cpu)
            listener.host_up(host)
        listener.host_seen(hostname)
        return True

    # -- HostBackend ---------------------------------------------------------------
    def _agent(self, hostname: str) -> _Agent:
        with self._lock:
            agent = self._agents.get(hostname)
        if agent is None:
            raise NotFound(f"no agent registered as {hostname!r}")
        return agent

    def _call(self, hostname: str, method: str, request: object) -> object:
        agent = self._agent(hostname)
        try:
            return getattr(agent.stub, method)(request, timeout=self.call_timeout_secs,
                                               metadata=agent.metadata)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(exc.details() or "not found") from None
            raise Unavailable(f"agent {hostname}: {method} failed: {exc.code().name} "
                              f"{exc.details() or ''}".strip()) from None

    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Start runs on one agent (a run id it already has is not started twice)."""
        self._call(hostname, "Launch", pb.LaunchRequest(tasks=[launch_to_pb(t) for t in tasks]))

    def kill(self, hostname: str, run_ids: Sequence[str], grace_secs: float) -> None:
        """SIGTERM then SIGKILL after `grace_secs`; unknown or ended runs are ignored."""
        self._call(hostname, "Kill", pb.KillRequest(run_ids=list(run_ids), grace_secs=grace_secs))

    def acknowledge(self, updates: Sequence[StatusUpdate]) -> None:
        """Queue acks to the agents that sent these updates (backend-made ones are just dropped)."""
        with self._lock:
            for update in updates:
                if self._own.pop(update.uuid, None) is None:
                    self._acks.setdefault(update.hostname, []).append(update.uuid)
            self._acks_ready.notify_all()

    def reconcile(self, run_ids: Sequence[str] | None = None) -> None:
        """Agents re-report the runs (all when None); runs no agent has are reported LOST.

        Asynchronous: answers arrive as status updates.  Re-reports carry the
        uuid of the run's latest update, so a consumer that has it already
        sees a duplicate.
        """
        if run_ids is not None and not run_ids:
            return
        threading.Thread(target=self._reconcile, args=(list(run_ids or []),),
                         name="local-backend-reconcile", daemon=True).start()

    def list_sandbox(self, hostname: str, run_id: str, path: str = "") -> list[tuple[str, int]]:
        """(name, size) of the entries under a sandbox path."""
        return self.sandbox_listing(hostname, run_id, path)[1]

    def sandbox_listing(self, hostname: str, run_id: str,
                        path: str = "") -> tuple[str, list[tuple[str, int]]]:
        """The agent's capability to read the sandbox from its file server, and the entries.

        The host manager puts the capability in the paths BrowseSandbox answers, so only a
        caller the job APIs let browse the sandbox can fetch its files."""
        reply = self._call(hostname, "ListSandbox", pb.ListSandboxRequest(run_id=run_id, path=path))
        assert isinstance(reply, pb.ListSandboxResponse)
        return reply.capability, [(e.name, e.size) for e in reply.entries]

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Bytes of a sandbox file."""
        reply = self._call(hostname, "ReadSandboxFile", pb.ReadSandboxFileRequest(
            run_id=run_id, path=path, offset=offset, length=length))
        assert isinstance(reply, pb.ReadSandboxFileResponse)
        return bytes(reply.data)

    def destroy_volumes(self, hostname: str, volume_ids: Sequence[str]) -> list[str]:
        """Remove persistent volumes from an agent; returns those a live run there still uses."""
        reply = self._call(hostname, "DestroyVolumes",
                           pb.DestroyVolumesRequest(volume_ids=list(volume_ids)))
        assert isinstance(reply, pb.DestroyVolumesResponse)
        return list(reply.in_use)

    # -- background ---------------------------------------------------------------
    def _reconcile(self, run_ids: list[str]) -> None:
        wait = self._started_at + self.reregister_grace_secs - self._clock()
        if run_ids and wait > 0 and self._stop.wait(wait):
            return
        unknown = set(run_ids)
        with self._lock:
            hostnames = list(self._agents)
        for hostname in hostnames:
            try:
                reply = self._call(hostname, "Reconcile", pb.ReconcileRequest(run_ids=run_ids))
            except (NotFound, Unavailable) as exc:
                log.warning("reconcile: %s; reporting nothing LOST this round", exc)
                return
            assert isinstance(reply, pb.ReconcileResponse)
            unknown &= set(reply.unknown)
        for run_id in sorted(unknown):
            self._deliver_own(lost_update(run_id))

    def _deliver_own(self, update: StatusUpdate) -> None:
        with self._lock:
            self._own[update.uuid] = (update, self._clock())
            listener = self._listener
        if listener is not None:
            listener.status_update(update)

    def _monitor(self) -> None:
        while not self._stop.wait(min(self.heartbeat_secs, self.heartbeat_timeout_secs / 4)):
            now = self._clock()
            with self._lock:
                gone = [a for a in self._agents.values()
                        if now - a.last_seen > self.heartbeat_timeout_secs]
                for agent in gone:
                    del self._agents[agent.host.hostname]
                due = [u for u, sent in self._own.values() if now - sent >= self.resend_secs]
                for update in due:
                    self._own[update.uuid] = (update, now)
                listener = self._listener
            if listener is None:
                continue
            for agent in gone:
                agent.channel.close()
                log.warning("agent %s silent for %.1f s: host gone", agent.host.hostname,
                            now - agent.last_seen)
                listener.host_gone(agent.host.hostname,
                                   f"no heartbeat for {self.heartbeat_timeout_secs:g} s")
            for update in due:
                listener.status_update(update)

    def _flush_acks(self) -> None:
        while True:
            with self._lock:
                while not self._acks and not self._stop.is_set():
                    self._acks_ready.wait()
                if self._stop.is_set():
                    return
                batches, self._acks = self._acks, {}
            for hostname, uuids in batches.items():
                try:
                    self._call(hostname, "Acknowledge", pb.AcknowledgeRequest(uuids=uuids))
                except (NotFound, Unavailable) as exc:
                    # The agent keeps the updates and re-sends them; they get acked then.
                    log.info("acknowledge to %s dropped: %s", hostname, exc)

