"""The announcer: registers every running instance of an announced job in a ZooKeeper ServerSet.

It stands beside the Aurora bridge as a front of Peloton: it sees the cluster
only through the Peloton API client (WatchService, ListJobs, QueryPods, GetJob,
QueryHosts), so it runs wherever the bridge runs (`peloton aurorabridge
--announcer-ensemble`) and inside `peloton up --zk`.  It keeps its own
ZooKeeper session, which owns the ephemeral member nodes.

Several announcers may run (one per bridge): they elect one (`announcer` under
Peloton's election root), and only the leader writes members, so an instance is
never listed twice.  On losing leadership (or the connection) it stops
following and deletes its nodes if it still can; the next leader, or this one
again, reads everything and makes the members anew (reusing nodes that still
match).

Pieces: members.py (pod status -> member), follower.py (the API side),
registry.py (the ZooKeeper side).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kazoo.client import KazooClient

from announcer.config import AnnouncerConfig
from announcer.follower import PodFollower
from announcer.members import MemberResolver
from announcer.registry import MemberRegistry
from peloton.common.leader import Candidate, LeaderId, new_client
from peloton.core.errors import Unavailable

log = logging.getLogger(__name__)

#: The election role of announcers (`<root>/announcer/leader`).
ANNOUNCER_ROLE = "announcer"
#: How long `start()` waits for ZooKeeper.
CONNECT_TIMEOUT = 30.0


def _gevent_patched() -> bool:
    from gevent import monkey

    return bool(monkey.is_module_patched("socket"))


class Announcer:
    """A `Component`: `start()` joins the election; the leader follows pods and writes members."""

    name = "announcer"

    def __init__(self, config: AnnouncerConfig, peloton: Any, zk: KazooClient | None = None) -> None:
        self.config = config
        self._own_client = zk is None
        self.zk = zk if zk is not None else new_client(config.ensemble,
                                                       session_timeout=config.session_timeout,
                                                       use_gevent=_gevent_patched())
        self.registry = MemberRegistry(self.zk)
        self._resolver = MemberResolver(peloton, config.root, use_ip=config.use_ip)
        self._peloton = peloton
        self._follower: PodFollower | None = None
        self._candidate = Candidate(self.zk, ANNOUNCER_ROLE, LeaderId.local(http=0, grpc=0),
                                    on_gained=self._gained, on_lost=self._lost,
                                    root=config.election_root)
        #: Set after each full read the leader handed to the registry (tests wait on it).
        self.synced = threading.Event()

    @property
    def leading(self) -> bool:
        """Whether this announcer writes the members."""
        return self._candidate.is_leader

    def start(self) -> None:
        """Connect (our own session) and join the election."""
        if self._own_client:
            try:
                self.zk.start(timeout=CONNECT_TIMEOUT)
            except Exception as exc:
                self.zk.close()
                raise Unavailable(f"announcer: cannot connect to ZooKeeper at "
                                  f"{self.config.ensemble}: {exc}") from None
        self._candidate.start()
        log.info("announcer: announcing under %s through ZooKeeper %s", self.config.root,
                 self.config.ensemble or "(shared client)")

    def stop(self) -> None:
        """Leave the election, delete our members, close our session."""
        self._candidate.stop()
        self._lost()
        self.registry.close()
        if self._own_client:
            self.zk.stop()
            self.zk.close()

    def _gained(self, epoch: int) -> None:
        log.info("announcer: leading (epoch %d): following pods", epoch)
        self.registry.activate()
        self._follower = PodFollower(self._peloton, self._resolver, self.registry,
                                     resync_secs=self.config.resync_secs, on_synced=self._synced)
        self._follower.start()

    def _lost(self) -> None:
        follower, self._follower = self._follower, None
        if follower is not None:
            follower.stop()
            log.info("announcer: no longer leading")
        self.registry.deactivate()
        self.synced.clear()

    def _synced(self, count: int) -> None:
        log.info("announcer: %d member(s) after a full read", count)
        self.synced.set()
