"""Who the live job manager members are and which one holds each partition, in memory.

Routing a call about another member's job (peloton/jobmgr/servicers/forwarding.py)
needs the owner of the job's partition and that owner's gRPC address: two ZooKeeper
reads per call if asked of ZooKeeper each time (membership.py's `owner` and `member`).
This directory keeps both in memory, kept current by kazoo watches on the nodes
membership.py writes (docs/design/all-active-jobmgr.md, "ZooKeeper layout"):

* a `ChildrenWatch` on `members/` (who is live) and, per live member, a `DataWatch` on
  its node (its published LeaderId, so its gRPC address);
* a `DataWatch` on each partition node `partitions/<n>` (the holder's member id, None
  while the partition is between owners, and the node's `czxid`: the claim's epoch, so
  a partition that went away and came back to the same holder is told apart from one
  that stayed; a one-job Watch needs that, peloton/jobmgr/servicers/watch_fanin.py).

It is a cache: it may lag ZooKeeper by a watch delivery (milliseconds; longer while the
connection is down).  Nothing relies on it for correctness: a member answers a call
itself only when its own ownership says it drives the job, a member receiving a
forwarded call for a job it does not drive refuses it (the forwarder's NOT_OWNER), and
a stale owner's writes are refused by its partition fence.  So a stale entry costs one
more hop: the forwarder asks again with `fresh=True` (forget the entry, read ZooKeeper
now) and tries once more.

Two rules keep the cache from holding a stale value for good:

* every watched value was read with its watch set, so any later change delivers another
  event (kazoo's DataWatch re-reads and re-arms on each event, and after a lost session);
* a value read directly (before a key's watch first delivered, after a `fresh` lookup)
  is kept only if the key is watched and no event for it arrived while the read was in
  flight (a generation per key): a slow direct read never overwrites a newer watched
  value, and an unwatched value is never cached.

Lookups are safe from any thread or greenlet; watch callbacks run on kazoo's callback
thread (or greenlet), one at a time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from peloton.common.leader import LeaderId
from peloton.common.membership import PartitionMember
from peloton.core.errors import DataCorruption, Unavailable
from peloton.core.partitions import partition_of

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

#: Longest pause between attempts to set the watches while ZooKeeper is unreachable.
MAX_SETUP_DELAY = 5.0


class PartitionClaim(NamedTuple):
    """Who holds a partition, and which of its claims this is: the epoch (the partition
    node's czxid, membership.py), new with every claim, the same holder's included."""

    holder: str
    epoch: int


class MemberDirectory:
    """Partition owners and member addresses, cached under ZooKeeper watches; a
    `Component`.  See the module docstring.

    `me` is this process's member id: a partition it holds has no *other* owner to
    forward to, so `address_of` answers None for it (the caller answers here or waits).
    Before `start()` (and for keys whose watch has not delivered yet) every lookup reads
    ZooKeeper, as an uncached lookup would.
    """

    def __init__(self, client: KazooClient, members_path: str, partitions_path: str,
                 count: int, me: str) -> None:
        self.name = "member-directory"
        self.members_path = members_path
        self.partitions_path = partitions_path
        self.count = count
        self.me = me
        self._client = client
        self._lock = threading.Lock()
        self._closed = False
        self._started = False
        # partition -> its claim (None: no node); member id -> LeaderId (None: no node).
        # A missing key is unknown: read ZooKeeper.
        self._owners: dict[int, PartitionClaim | None] = {}
        self._members: dict[str, LeaderId | None] = {}
        self._live: frozenset[str] = frozenset()
        self._watching: set[str] = set()  # member ids with a DataWatch set
        self._watched: set[tuple[str, Any]] = set()  # keys whose watch has delivered
        self._generation: dict[tuple[str, Any], int] = {}
        self._listeners: list[Callable[[], None]] = []
        #: Lookups answered from memory, and by reading ZooKeeper (tests, logs).
        self.hits = 0
        self.reads = 0

    @classmethod
    def of(cls, client: KazooClient, member: PartitionMember) -> MemberDirectory:
        """The directory of `member`'s cluster (its paths, partition count and id), read
        through `client` (the member's own)."""
        return cls(client, member.members_path, member.partitions_path, member.count,
                   member.member_id)

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after each change of the live members, their addresses or a
        partition's holder (on kazoo's callback thread: it must not block; `members()` and
        `owner()` have the new view)."""
        self._listeners.append(listener)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Set the watches, on a greenlet (or thread) of the client's handler: returns at
        once, even while ZooKeeper is unreachable (lookups read it directly meanwhile)."""
        if self._started:
            return
        self._started = True
        self._closed = False
        self._client.handler.spawn(self._watch)

    def stop(self) -> None:
        """Stop caching: every watch ends at its next event, lookups read ZooKeeper."""
        with self._lock:
            self._closed = True
            self._owners.clear()
            self._members.clear()
            self._watched.clear()
            self._watching.clear()
        self._started = False

    def _watch(self) -> None:
        delay = 0.1
        while not self._closed:
            try:
                # ChildrenWatch stops for good on a missing node: make sure it is there.
                self._client.ensure_path(self.members_path)
                break
            except KazooException as exc:
                log.info("member directory: cannot watch %s yet (%s); retrying in %.1fs",
                         self.members_path, type(exc).__name__, delay)
                self._client.handler.sleep_func(delay)
                delay = min(delay * 2, MAX_SETUP_DELAY)
        if self._closed:
            return
        # kazoo's watches re-arm themselves after a lost session, so they are set once.
        # A DataWatch retries its first read until it succeeds; a ChildrenWatch whose first
        # read fails sets itself again when the connection next comes up.
        try:
            self._client.ChildrenWatch(self.members_path, self._on_members)
        except KazooException:
            log.warning("member directory: the watch on %s is not set yet; member addresses "
                        "are read from ZooKeeper until it is", self.members_path, exc_info=True)
        for partition in range(self.count):
            self._client.DataWatch(f"{self.partitions_path}/{partition}",
                                   partial(self._on_partition, partition))

    # -- watch callbacks (kazoo's callback thread, one at a time) ------------------------------
    def _on_members(self, children: list[str]) -> bool | None:
        with self._lock:
            if self._closed:
                return False
            self._live = frozenset(children)
            new = [m for m in children if m not in self._watching]
            self._watching.update(new)
            for gone in [m for m in self._members if m not in self._live]:
                self._drop(("member", gone))
                del self._members[gone]
        # A member's DataWatch ends itself at its first event once the member is no longer
        # live (below); one that left and came back before its watch noticed keeps it.  So
        # a departed member's watch waits on its missing node until the id is seen again:
        # one idle watch per member id ever seen, and member ids are stable (host:port).
        for member_id in new:
            self._client.DataWatch(f"{self.members_path}/{member_id}",
                                   partial(self._on_member, member_id))
        self._notify()
        return None

    def _on_member(self, member_id: str, data: bytes | None, _stat: Any) -> bool | None:
        published = _leader_id(member_id, data)
        key = ("member", member_id)
        with self._lock:
            if self._closed or member_id not in self._live:
                self._watching.discard(member_id)
                self._members.pop(member_id, None)
                self._drop(key)
                return False
            self._bump(key)
            self._members[member_id] = published
            self._watched.add(key)
        self._notify()
        return None

    def _on_partition(self, partition: int, data: bytes | None, stat: Any) -> bool | None:
        key = ("partition", partition)
        claim = _claim(data, stat)
        with self._lock:
            if self._closed:
                return False
            self._bump(key)
            changed = self._owners.get(partition, "") != claim
            self._owners[partition] = claim
            self._watched.add(key)
        if changed:  # a one-job Watch follows its job's owner (watch_fanin.py)
            self._notify()
        return None

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # a listener's bug must not end the watch
                log.exception("member directory: a membership listener failed")

    def _bump(self, key: tuple[str, Any]) -> None:
        self._generation[key] = self._generation.get(key, 0) + 1

    def _drop(self, key: tuple[str, Any]) -> None:
        self._bump(key)
        self._watched.discard(key)

    # -- lookups -------------------------------------------------------------------------------
    def owner(self, partition: int, *, fresh: bool = False) -> str | None:
        """The member id holding `partition`, None while it is between owners; `fresh`
        reads ZooKeeper now (and keeps what it read if no newer event came meanwhile).
        Unavailable when ZooKeeper must be read and cannot be."""
        claim = self.claim(partition, fresh=fresh)
        return None if claim is None else claim.holder

    def claim(self, partition: int, *, fresh: bool = False) -> PartitionClaim | None:
        """The current claim of `partition` (its holder and epoch), None while it is
        between owners; as `owner`."""
        path = f"{self.partitions_path}/{partition}"
        return self._lookup(("partition", partition), self._owners, partition, fresh,
                            lambda: _claim(*self._read(path, f"the owner of partition {partition}")))

    def member(self, member_id: str, *, fresh: bool = False) -> LeaderId | None:
        """The published LeaderId of a live member, None if it is not live; as `owner`."""
        path = f"{self.members_path}/{member_id}"
        return self._lookup(("member", member_id), self._members, member_id, fresh,
                            lambda: _leader_id(member_id, self._read(path, f"member {member_id}")[0]))

    def address_of(self, job_id: str, fresh: bool = False) -> str | None:
        """The gRPC address of the member other than this one holding `job_id`'s partition,
        None while it has none (between owners, or held here).  `fresh`: read ZooKeeper
        now (after an owner answered that it does not drive the job)."""
        holder = self.owner(partition_of(job_id, self.count), fresh=fresh)
        if holder is None or holder == self.me:
            return None
        published = self.member(holder, fresh=fresh)
        return None if published is None else published.grpc_address

    def forget(self, job_id: str) -> None:
        """Drop the cached owner of `job_id`'s partition: the next lookup reads ZooKeeper
        (an owner's call failed, so the entry may be stale)."""
        key = ("partition", partition_of(job_id, self.count))
        with self._lock:
            claim = self._owners.pop(key[1], None)
            self._bump(key)
            if claim is not None:
                self._members.pop(claim.holder, None)
                self._bump(("member", claim.holder))

    def members(self) -> dict[str, str]:
        """The live members' gRPC addresses as last seen by the watches, by member id
        (this one's included); empty before the watches first deliver (never read from
        ZooKeeper here: the Watch fan-in calls it for every merge, often)."""
        with self._lock:
            return {m: p.grpc_address for m, p in self._members.items()
                    if p is not None and m in self._live}

    def _lookup(self, key: tuple[str, Any], cache: dict[K, V], name: K, fresh: bool,
                read: Callable[[], V]) -> V:
        with self._lock:
            if fresh:
                cache.pop(name, None)
                self._bump(key)
            elif name in cache:
                self.hits += 1
                return cache[name]
            generation = self._generation.get(key, 0)
        value = read()
        with self._lock:
            self.reads += 1
            if (not self._closed and key in self._watched
                    and self._generation.get(key, 0) == generation):
                cache[name] = value
        return value

    def _read(self, path: str, what: str) -> tuple[bytes | None, Any]:
        """The data and stat of `path` read now, (None, None) if there is no such node;
        Unavailable (naming `what`) when ZooKeeper cannot be read."""
        try:
            data, stat = self._client.get(path)
        except NoNodeError:
            return None, None
        except KazooException as exc:
            raise Unavailable(f"cannot read {what} from ZooKeeper ({type(exc).__name__}); "
                              "try again") from exc
        return bytes(data), stat


def _claim(data: bytes | None, stat: Any) -> PartitionClaim | None:
    """A partition node's claim: its holder (the data) and epoch (the stat's czxid); None
    for no node or an empty one."""
    holder = (bytes(data).decode() or None) if data else None
    return None if holder is None or stat is None else PartitionClaim(holder, int(stat.czxid))


def _leader_id(member_id: str, data: bytes | None) -> LeaderId | None:
    """A member node's LeaderId; None (with a warning) for a node without a readable one,
    so it is treated as not live rather than breaking the watch."""
    if not data:
        return None
    try:
        return LeaderId.from_json(data)
    except DataCorruption:
        log.warning("member directory: member %s published an unreadable address: %r",
                    member_id, data[:200])
        return None
