"""The agent's connection to the host manager: register, heartbeat, report.

The link registers (with the latest status of every run it has), then
heartbeats at the interval the host manager asked for.  Whenever the host
manager is unreachable or answers "reregister" (it restarted and does not
know us), the link goes back to registering, with capped backoff.  Tasks
are never touched by any of this: they keep running while the host
manager is away, and their updates wait in the reporter.

Where the host manager is (`HostmgrTargets`): one address, several tried in
turn (a standby answers UNAVAILABLE, so the agent moves on to the next), or
the leader published in ZooKeeper, followed across failovers (a change of
leader wakes the link at once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from peloton.agent.model import Update
from peloton.agent.reporter import StatusReporter
from peloton.agent.wire import update_to_pb
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as pb
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2_grpc as pb_grpc
from peloton.api.tls_grpc import open_channel
from peloton.common.tls import TlsFiles
from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """What the agent tells the host manager about itself."""

    hostname: str
    agent_id: str
    capacity: Resources
    ports: tuple[PortRange, ...]
    labels: tuple[Label, ...]
    address: str
    version: str = "0.1.0"
    file_address: str = ""
    call_token: str = ""

    def to_pb(self, revocable_cpu: float = 0.0) -> pb.AgentInfo:
        """As sent in RegisterRequest, with the slack cpu offered now."""
        c = self.capacity
        return pb.AgentInfo(revocable_cpu=revocable_cpu,
            hostname=self.hostname, agent_id=self.agent_id,
            capacity=pb.Resources(cpu=c.cpu, mem_mb=c.mem_mb, disk_mb=c.disk_mb, gpu=c.gpu),
            ports=[pb.PortRange(begin=r.begin, end=r.end) for r in self.ports],
            labels=[pb.Label(key=lb.key, value=lb.value) for lb in self.labels],
            address=self.address, version=self.version, file_address=self.file_address,
            call_token=self.call_token)


#: Reconnect quickly to a host manager that restarts on the same address (gRPC's default
#: backoff grows to two minutes).
CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.min_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000)]


class HostmgrTargets:
    """Where to register: the ZooKeeper leader if `leader` knows one, else `addresses` in turn."""

    def __init__(self, addresses: str | Sequence[str],
                 leader: Callable[[], str | None] | None = None) -> None:
        listed = addresses.split(",") if isinstance(addresses, str) else list(addresses)
        self.addresses = [a.strip() for a in listed if a.strip()]
        self._leader = leader
        self._at = 0
        if not self.addresses and leader is None:
            raise ValueError("no host manager address")

    def current(self) -> str:
        """The address to register with now."""
        found = self._leader() if self._leader is not None else None
        if found or not self.addresses:
            return found or ""
        return self.addresses[self._at % len(self.addresses)]

    def failed(self, address: str) -> None:
        """`address` did not take us: try the next listed one."""
        if self.addresses and self.addresses[self._at % len(self.addresses)] == address:
            self._at += 1


class HostmgrLink:
    """Registration and heartbeat loop; also the reporter's transport."""

    def __init__(self, target: str | HostmgrTargets, identity: AgentIdentity,
                 snapshot: Callable[[], list[Update]],
                 reporter: StatusReporter, *, call_timeout: float = 10.0,
                 max_backoff_secs: float = 5.0,
                 slack: Callable[[], float] = lambda: 0.0,
                 credentials: Sequence[tuple[str, str]] = (),
                 tls: TlsFiles | None = None) -> None:
        self.targets = target if isinstance(target, HostmgrTargets) else HostmgrTargets(target)
        #: The slack cpu offered now, sent when registering and with every heartbeat.
        self._slack = slack
        self.target = ""
        self.identity = identity
        self._snapshot = snapshot
        self._reporter = reporter
        self.call_timeout = call_timeout
        self.max_backoff_secs = max_backoff_secs
        self._metadata = tuple(credentials)
        self._tls = tls
        self.heartbeat_secs = 1.0
        self.registered = threading.Event()
        self._stop = threading.Event()
        self._kick = threading.Event()  # wakes the loop to re-register at once
        self._channel: Any = None
        self._stub: Any = None
        if first := self.targets.current():
            self._connect(first)

    def _connect(self, address: str) -> None:
        """Talk to `address` from now on (a new channel when it changed)."""
        if address == self.target and self._channel is not None:
            return
        old, self.target = self._channel, address
        self._channel = open_channel(address, self._tls, CHANNEL_OPTIONS)
        self._stub = pb_grpc.AgentRegistryStub(self._channel)
        if old is not None:
            old.close()

    def kick(self) -> None:
        """Look for the host manager again now (its leader changed)."""
        self._kick.set()

    def start(self) -> None:
        """Start registering in the background."""
        threading.Thread(target=self._loop, name="hostmgr-link", daemon=True).start()

    def stop(self) -> None:
        """Stop heartbeating and close the channel."""
        self._stop.set()
        self._kick.set()
        if self._channel is not None:
            self._channel.close()

    def send(self, updates: Sequence[Update]) -> bool:
        """Deliver one batch (the reporter's transport); False if the host manager did not take it."""
        if not self.registered.is_set():
            return False
        request = pb.ReportStatusRequest(hostname=self.identity.hostname,
                                         agent_id=self.identity.agent_id,
                                         updates=[update_to_pb(u) for u in updates])
        try:
            reply = self._stub.ReportStatus(request, timeout=self.call_timeout,
                                            metadata=self._metadata)
        except grpc.RpcError as exc:
            self._lost(f"ReportStatus failed: {exc.code().name}")
            return False
        except ValueError:  # the channel was closed by stop()
            return False
        if reply.reregister:
            self._lost("the host manager does not know this agent")
            return False
        return True

    def _lost(self, why: str) -> None:
        if self._stop.is_set():
            return  # our own stop() cancelled the call
        if self.registered.is_set():
            log.warning("lost the host manager at %s: %s", self.target, why)
        self.registered.clear()
        self._reporter.connected(False)
        self._kick.set()

    def _register(self) -> bool:
        address = self.targets.current()
        if not address:
            log.debug("no host manager leader known yet")
            return False
        self._connect(address)
        request = pb.RegisterRequest(agent=self.identity.to_pb(self._slack()),
                                     runs=[update_to_pb(u) for u in self._snapshot()])
        try:
            reply = self._stub.Register(request, timeout=self.call_timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                log.error("the host manager at %s refused this agent: %s %s", address, code.name,
                          exc.details())
            else:
                log.debug("register with %s: %s", address, code.name)
            self.targets.failed(address)
            return False
        except ValueError:  # the channel was closed by stop()
            return False
        self.heartbeat_secs = reply.heartbeat_interval_secs or self.heartbeat_secs
        self.registered.set()
        log.info("registered with the host manager at %s as %s (%s)", self.target,
                 self.identity.hostname, self.identity.agent_id)
        self._reporter.connected(True)  # re-sends every unacknowledged update
        return True

    def _heartbeat(self) -> None:
        request = pb.HeartbeatRequest(hostname=self.identity.hostname, agent_id=self.identity.agent_id,
                                      revocable_cpu=self._slack())
        try:
            reply = self._stub.Heartbeat(request, timeout=self.call_timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            self._lost(f"Heartbeat failed: {exc.code().name}")
            return
        except ValueError:  # the channel was closed by stop()
            return
        if reply.reregister:
            self._lost("the host manager does not know this agent")

    def _loop(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            if not self.registered.is_set():
                if self._register():
                    backoff = 0.1
                else:
                    self._kick.wait(backoff)  # a new leader (kick) ends the wait early
                    self._kick.clear()
                    backoff = min(self.max_backoff_secs, backoff * 2)
                    continue
            self._kick.wait(self.heartbeat_secs)
            if self._kick.is_set():
                self._kick.clear()
                continue
            self._heartbeat()
