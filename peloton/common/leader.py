"""ZooKeeper leader election with a fencing epoch, and leader discovery (Peloton's pkg/common/leader).

Layout, as in Peloton: the persistent node `<root>/<role>/leader` (root
default `/peloton`) holds the current leader's ID JSON `{"hostname", "ip",
"http", "grpc", "version"}`; under it each candidate owns an ephemeral
sequential node `candidate_<uuid>_<seq>`.  The oldest candidate is the leader.
The uuid lets a candidate find its own node after a create whose reply was
lost, instead of leaving an orphan that would win elections for nobody.

Winning: the new leader writes its ID into the leader node in one
transaction with a check that its candidate node still exists, so a leader
whose session has already expired cannot overwrite its successor.  The
transaction's zxid (the leader node's `mzxid`) is the **epoch**: ZooKeeper
zxids only grow, so every term of every role gets a larger epoch than all
before it, even if the leader node is deleted and re-created.  Daemons stamp
writes with it and storage rejects writes carrying a smaller one.
Discovery reports the same number, read from the node's stat.

Callbacks: `on_gained(epoch)` and `on_lost()` run one at a time on the
candidate's own greenlet (thread with kazoo's threading handler), never
concurrently, and every `on_gained` is followed by exactly one `on_lost`,
when the connection is SUSPENDED or LOST (kazoo reports that after 2/3 of
the session timeout without a reply, before the server can expire us, so
a partitioned leader stops before a successor starts), when another
candidate is ahead, on `resign()`/`stop()`, or when `on_gained` raised (then
the candidate also rejoins at the back after a backoff, as Peloton resigns).
`is_leader` turns false as soon as the connection drops, even while a slow
`on_gained` is still running.  The loop itself (wake-ups, connection states, backoff,
stopping) is `peloton.common.role_loop.RoleLoop`, shared with membership.py.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.gevent import SequentialGeventHandler
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.retry import KazooRetry

from peloton.common.retry import RetryPolicy
from peloton.common.role_loop import RoleLoop
from peloton.core.errors import DataCorruption, InvalidArgument

ROOT = "/peloton"
JOB_MANAGER = "jobmanager"
RESOURCE_MANAGER = "resourcemanager"
HOST_MANAGER = "hostmanager"
AURORA_SCHEDULER = "aurora/scheduler"
CANDIDATE_PREFIX = "candidate_"

#: Spacing of re-tries after ZooKeeper errors or a failed `on_gained` (Peloton waits a flat 30 s).
ELECTION_RETRY = RetryPolicy(initial_delay=0.5, max_delay=30.0, multiplier=2.0, jitter=0.2)
#: A re-check of the candidates even without a watch firing; a safety net, not the mechanism.
RECHECK_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    """The `election` config section (Peloton: `election.zk_servers`, `election.root`)."""

    zk_servers: tuple[str, ...] = ()
    root: str = ROOT
    session_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.root.startswith("/"):
            raise InvalidArgument(f"root must be an absolute path, got {self.root!r}", field="root")
        if self.session_timeout <= 0:
            raise InvalidArgument("session_timeout must be positive", field="session_timeout")

    @property
    def hosts(self) -> str:
        """The kazoo connection string."""
        return ",".join(self.zk_servers)


@dataclass(frozen=True, slots=True)
class LeaderId:
    """What a leader publishes about itself (Peloton's `leader.ID`)."""

    hostname: str
    ip: str
    http: int
    grpc: int
    version: str = ""

    @property
    def grpc_address(self) -> str:
        """`ip:grpc`, what Peloton's discovery dials."""
        return f"{self.ip}:{self.grpc}"

    def to_json(self) -> bytes:
        """Compact JSON in Go's field order, byte-compatible with Peloton's."""
        fields = {"hostname": self.hostname, "ip": self.ip, "http": self.http, "grpc": self.grpc,
                  "version": self.version}
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LeaderId:
        """Parse a leader node's data; DataCorruption if it is not an ID."""
        try:
            raw = json.loads(data)
            return cls(hostname=str(raw["hostname"]), ip=str(raw["ip"]), http=int(raw["http"]),
                       grpc=int(raw["grpc"]), version=str(raw.get("version", "")))
        except (ValueError, TypeError, KeyError) as exc:
            raise DataCorruption(f"leader ID is not valid JSON: {data[:80]!r}") from exc

    @classmethod
    def local(cls, http: int, grpc: int, version: str = "") -> LeaderId:
        """This host's ID, with the address other machines are most likely to reach."""
        return cls(hostname=socket.gethostname(), ip=listen_ip(), http=http, grpc=grpc, version=version)


def listen_ip() -> str:
    """The best address of this host: IPv4 +300, not loopback +100, interface up +100 (as Peloton)."""
    stats = psutil.net_if_stats()
    best, best_score = "127.0.0.1", -1
    for name, addrs in psutil.net_if_addrs().items():
        up = name in stats and stats[name].isup
        for addr in addrs:
            if addr.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            ip = addr.address.split("%")[0]
            loopback = ip.startswith("127.") or ip == "::1"
            score = (300 if addr.family == socket.AF_INET else 0) + (0 if loopback else 100 + 100 * up)
            if score > best_score:
                best, best_score = ip, score
    return best


def leader_path(root: str, role: str) -> str:
    """`<root>/<role>/leader`."""
    return "/".join(["", *(p for p in f"{root}/{role}/leader".split("/") if p)])


def new_client(servers: str | Sequence[str], *, session_timeout: float = 10.0,
               use_gevent: bool = True) -> KazooClient:
    """An unstarted kazoo client that reconnects forever, at most ~1 s apart (kazoo's default is 1 h)."""
    handler = SequentialGeventHandler() if use_gevent else SequentialThreadingHandler()
    hosts = servers if isinstance(servers, str) else ",".join(servers)
    reconnect = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0,
                           sleep_func=handler.sleep_func)
    return KazooClient(hosts=hosts, timeout=session_timeout, handler=handler, connection_retry=reconnect)


def _sequence(name: str) -> int:
    return int(name[-10:]) if name[-10:].isdigit() else -1


class Candidate:
    """Campaigns for leadership of `role`; a `Component` (see the module docstring)."""

    def __init__(self, client: KazooClient, role: str, me: LeaderId, *,
                 on_gained: Callable[[int], None], on_lost: Callable[[], None],
                 root: str = ROOT, retry: RetryPolicy = ELECTION_RETRY,
                 rand: Callable[[], float] = random.random, log: logging.Logger | None = None) -> None:
        self.role = role
        self.me = me
        self.path = leader_path(root, role)
        self.name = f"election:{role}"
        self._client = client
        self._on_gained = on_gained
        self._on_lost = on_lost
        self._log = log or logging.getLogger("peloton.leader")
        self._prefix = f"{CANDIDATE_PREFIX}{uuid.uuid4().hex}_"
        self._loop = RoleLoop(client, self._step, self._leave, label=f"election {role}",
                              retry=retry, recheck=RECHECK_SECONDS, rand=rand,
                              expected=(_GainFailed,), log=self._log)
        self._resign_requested = False
        self._leader = False
        self._epoch: int | None = None

    @property
    def is_leader(self) -> bool:
        """True while this candidate leads and its ZooKeeper connection is up."""
        return self._leader and self._loop.connected

    @property
    def epoch(self) -> int | None:
        """The fencing epoch of the current term while leader, else None."""
        return self._epoch if self.is_leader else None

    def start(self) -> None:
        """Join the election; returns at once (the connection may still be coming up)."""
        self._loop.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Leave the election: `on_lost` if leading, delete the candidate node, end the loop."""
        self._loop.stop(timeout)

    def resign(self) -> None:
        """Give up leadership (if held) and rejoin at the back of the line."""
        self._resign_requested = True
        self._loop.wake()

    def _leave(self) -> None:  # the loop's last act, however it ends
        self._demote("leaving the election")
        self._drop_node()

    def _step(self) -> None:
        if not self._loop.connected:
            self._demote("ZooKeeper connection suspended or lost")
            return
        if self._loop.take_interrupted():  # even if it came back since: someone may have led meanwhile
            self._demote("ZooKeeper connection was interrupted")
        if self._resign_requested:
            self._resign_requested = False
            self._demote("resigned")
            self._drop_node()
        self._client.ensure_path(self.path)
        children = self._client.get_children(self.path, watch=self._loop.wake)
        mine = sorted((c for c in children if c.startswith(self._prefix)), key=_sequence)
        if not mine:
            self._demote("candidate node is gone")
            self._client.create(f"{self.path}/{self._prefix}", self.me.to_json(), ephemeral=True,
                                sequence=True)
            self._loop.wake()
            return
        for duplicate in mine[1:]:  # left by a create retried after a lost reply
            self._client.delete(f"{self.path}/{duplicate}")
        contenders = sorted((c for c in children if c.startswith(CANDIDATE_PREFIX)), key=_sequence)
        if contenders[0] != mine[0]:
            self._demote(f"{contenders[0]} is ahead")
        elif not self._leader:
            self._promote(f"{self.path}/{mine[0]}")

    def _promote(self, node: str) -> None:
        tx = self._client.transaction()
        tx.check(node, -1)
        tx.set_data(self.path, self.me.to_json())
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            raise _GainFailed(f"could not claim {self.path}: {results}")
        self._epoch = int(results[1].mzxid)
        self._leader = True
        self._log.info("election %s: gained leadership, epoch %d", self.role, self._epoch)
        try:
            self._on_gained(self._epoch)
        except Exception as exc:
            self._log.exception("election %s: on_gained failed; resigning", self.role)
            self._demote("on_gained failed")
            self._drop_node()
            raise _GainFailed(f"on_gained failed: {exc}") from exc

    def _demote(self, reason: str) -> None:
        if not self._leader:
            return
        self._leader = False
        self._epoch = None
        self._log.warning("election %s: lost leadership: %s", self.role, reason)
        try:
            self._on_lost()
        except Exception:
            self._log.exception("election %s: on_lost failed", self.role)

    def _drop_node(self) -> None:
        if not self._loop.connected:
            return  # the session will take the node with it
        try:
            for child in self._client.get_children(self.path):
                if child.startswith(self._prefix):
                    self._client.delete(f"{self.path}/{child}")
        except NoNodeError:
            pass
        except KazooException:
            self._log.warning("election %s: could not delete candidate node", self.role, exc_info=True)


class _GainFailed(Exception):
    """Claiming the leader node or the `on_gained` callback failed; retried after a backoff."""
