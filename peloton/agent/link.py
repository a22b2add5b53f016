"""The agent's connection to the host manager: register, heartbeat, report.

The link registers (with the latest status of every run it has), then
heartbeats at the interval the host manager asked for.  Whenever the host
manager is unreachable or answers "reregister" (it restarted and does not
know us), the link goes back to registering, with capped backoff.  Tasks
are never touched by any of this: they keep running while the host
manager is away, and their updates wait in the reporter.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc

from peloton.agent.model import Update
from peloton.agent.reporter import StatusReporter
from peloton.agent.wire import update_to_pb
from peloton.api.gen.peloton.private.agent import agent_pb2 as pb
from peloton.api.gen.peloton.private.agent import agent_pb2_grpc as pb_grpc
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

    def to_pb(self) -> pb.AgentInfo:
        """As sent in RegisterRequest."""
        c = self.capacity
        return pb.AgentInfo(
            hostname=self.hostname, agent_id=self.agent_id,
            capacity=pb.Resources(cpu=c.cpu, mem_mb=c.mem_mb, disk_mb=c.disk_mb, gpu=c.gpu),
            ports=[pb.PortRange(begin=r.begin, end=r.end) for r in self.ports],
            labels=[pb.Label(key=lb.key, value=lb.value) for lb in self.labels],
            address=self.address, version=self.version, file_address=self.file_address)


class HostmgrLink:
    """Registration and heartbeat loop; also the reporter's transport."""

    def __init__(self, target: str, identity: AgentIdentity, snapshot: Callable[[], list[Update]],
                 reporter: StatusReporter, *, call_timeout: float = 10.0,
                 max_backoff_secs: float = 5.0) -> None:
        self.target = target
        self.identity = identity
        self._snapshot = snapshot
        self._reporter = reporter
        self.call_timeout = call_timeout
        self.max_backoff_secs = max_backoff_secs
        self.heartbeat_secs = 1.0
        self.registered = threading.Event()
        self._stop = threading.Event()
        self._kick = threading.Event()  # wakes the loop to re-register at once
        self._channel = grpc.insecure_channel(target)
        self._stub = pb_grpc.AgentRegistryStub(self._channel)

    def start(self) -> None:
        """Start registering in the background."""
        threading.Thread(target=self._loop, name="hostmgr-link", daemon=True).start()

    def stop(self) -> None:
        """Stop heartbeating and close the channel."""
        self._stop.set()
        self._kick.set()
        self._channel.close()

    def send(self, updates: Sequence[Update]) -> bool:
        """Deliver one batch (the reporter's transport); False if the host manager did not take it."""
        if not self.registered.is_set():
            return False
        request = pb.ReportStatusRequest(hostname=self.identity.hostname,
                                         agent_id=self.identity.agent_id,
                                         updates=[update_to_pb(u) for u in updates])
        try:
            reply = self._stub.ReportStatus(request, timeout=self.call_timeout)
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
        request = pb.RegisterRequest(agent=self.identity.to_pb(),
                                     runs=[update_to_pb(u) for u in self._snapshot()])
        try:
            reply = self._stub.Register(request, timeout=self.call_timeout)
        except grpc.RpcError as exc:
            log.debug("register with %s: %s", self.target, exc.code().name)
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
        request = pb.HeartbeatRequest(hostname=self.identity.hostname, agent_id=self.identity.agent_id)
        try:
            reply = self._stub.Heartbeat(request, timeout=self.call_timeout)
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
                    self._stop.wait(backoff)
                    backoff = min(self.max_backoff_secs, backoff * 2)
                    continue
            self._kick.wait(self.heartbeat_secs)
            if self._kick.is_set():
                self._kick.clear()
                continue
            self._heartbeat()
