"""`peloton up --zk HOSTS`: the one-machine cluster shows itself in ZooKeeper as a real one does.

Three things, each where its clients look:

* the daemons: `peloton up` joins the elections of the job, resource and host
  managers (`<root>/<role>/leader`, root `/peloton`) with this process's gRPC
  addresses, so Peloton clients that find the daemons through ZooKeeper
  (`peloton --zk ...`, the Aurora bridge's `--zkservers`, Peloton's own
  clients) reach it;
* the Aurora endpoint: a ServerSet `member_` node under `/aurora/scheduler`
  (Aurora's `scheduler_zk_path`; `aurora_zk_path`), so an Aurora clusters.json
  entry with `zk` and `scheduler_zk_path` finds the bridge;
* the announcer (announcer/): running instances of announced jobs in their
  ServerSets, on its own session.

The first two share one session, owned here; their nodes are ephemeral, so
they vanish when `peloton up` stops or dies.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient

from peloton.common.components import Component
from peloton.common.leader import (
    HOST_MANAGER,
    JOB_MANAGER,
    RESOURCE_MANAGER,
    Candidate,
    LeaderId,
    listen_ip,
    new_client,
)
from peloton.common.serverset import ServerSetMember, ServiceInstance
from peloton.core.errors import Unavailable

log = logging.getLogger(__name__)

#: How long `peloton up` waits for ZooKeeper at start.
CONNECT_TIMEOUT = 30.0
#: Our port names -> the election roles Peloton's clients look up.
ROLES = {"jobmgr": JOB_MANAGER, "resmgr": RESOURCE_MANAGER, "hostmgr": HOST_MANAGER}


@dataclass(frozen=True, slots=True)
class ZkPresence:
    """Where `peloton up --zk` registers."""

    servers: str
    root: str = "/peloton"
    aurora_path: str = "/aurora/scheduler"


def advertised_ip(host: str) -> str:
    """The address to publish for servers bound to `host` (a wildcard: this host's best one)."""
    return host if host not in ("", "0.0.0.0", "::") else listen_ip()


def _gevent_patched() -> bool:
    from gevent import monkey

    return bool(monkey.is_module_patched("socket"))


class ClusterPresence:
    """The daemons' leader nodes and the bridge's ServerSet member; a `Component`."""

    name = "zookeeper"

    def __init__(self, presence: ZkPresence, host: str, ports: dict[str, int],
                 bridge_port: Callable[[], int | None]) -> None:
        self.presence = presence
        self._host = host
        self._ports = ports
        self._bridge_port = bridge_port
        self.client: KazooClient = new_client(presence.servers, use_gevent=_gevent_patched())
        self._parts: list[Component] = []

    def start(self) -> None:
        """Connect, join the daemons' elections, register the bridge."""
        try:
            self.client.start(timeout=CONNECT_TIMEOUT)
        except Exception as exc:
            self.client.close()
            raise Unavailable(f"cannot connect to ZooKeeper at {self.presence.servers}: {exc}") from None
        ip = advertised_ip(self._host)
        for port_name, role in ROLES.items():
            me = LeaderId(hostname=socket.gethostname(), ip=ip, http=0, grpc=self._ports[port_name])
            candidate = Candidate(self.client, role, me, on_gained=lambda epoch: None,
                                  on_lost=lambda: None, root=self.presence.root)
            candidate.start()
            self._parts.append(candidate)
        bridge = self._bridge_port()
        if bridge is not None:
            member = ServerSetMember(self.client, self.presence.aurora_path,
                                     ServiceInstance.for_http(ip, bridge))
            member.start()
            self._parts.append(member)

    def stop(self) -> None:
        """Leave: delete our nodes, close the session."""
        for part in reversed(self._parts):
            try:
                part.stop()
            except Exception:
                log.warning("leaving ZooKeeper: %s failed", part, exc_info=True)
        self._parts.clear()
        self.client.stop()
        self.client.close()

    def describe(self) -> str:
        """What `peloton up` prints about it."""
        return (f"zookeeper     {self.presence.servers}: daemons under {self.presence.root}, Aurora "
                f"scheduler at {self.presence.aurora_path}")
