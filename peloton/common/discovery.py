"""Find a role's current leader through ZooKeeper, as Peloton's clients and apiserver do.

A `LeaderDiscovery` watches `<root>/<role>/leader`: its data is the leader's
ID JSON (written by `peloton.common.leader.Candidate`), its children are the
live candidates.  The leader is known when the data parses and at least one
candidate is alive; a leader node left behind by a dead cluster therefore
reads as "no leader" instead of an address that will never answer.  Go's
`NewZkServiceDiscovery` reads the data only.

Watches are kazoo `DataWatch`/`ChildrenWatch`, which re-arm themselves after
a reconnect or a new session, so a discovery object follows the leader for
as long as its client lives.  Callbacks run on kazoo's callback thread or
greenlet; `on_change` must not block.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from peloton.common.leader import CANDIDATE_PREFIX, ROOT, LeaderId, leader_path
from peloton.core.errors import DataCorruption, Unavailable


class LeaderDiscovery:
    """Follows one role's leader; a `Component` (start sets the watches)."""

    def __init__(self, client: KazooClient, role: str, *, root: str = ROOT,
                 on_change: Callable[[LeaderId | None], None] | None = None,
                 log: logging.Logger | None = None) -> None:
        self.role = role
        self.path = leader_path(root, role)
        self.name = f"discovery:{role}"
        self._client = client
        self._on_change = on_change
        self._log = log or logging.getLogger("peloton.discovery")
        self._changed = client.handler.event_object()
        self._started = False
        self._stopped = False
        self._id: LeaderId | None = None
        self._epoch: int | None = None
        self._candidates = 0
        self._current: LeaderId | None = None

    def start(self) -> None:
        """Create the leader node if missing and watch it; blocks until connected."""
        if self._started:
            return
        self._started, self._stopped = True, False
        self._client.ensure_path(self.path)
        self._client.DataWatch(self.path, self._on_data)
        self._client.ChildrenWatch(self.path, self._on_children)

    def stop(self) -> None:
        """Stop following (the watches unregister on their next event)."""
        self._stopped = True
        self._started = False

    def leader(self) -> LeaderId | None:
        """The current leader's ID, or None when there is none (or it is unknown yet)."""
        return self._current

    def address(self) -> str | None:
        """The leader's `ip:grpc`, or None."""
        current = self._current
        return current.grpc_address if current is not None else None

    @property
    def epoch(self) -> int | None:
        """The current leader's fencing epoch (the leader node's mzxid), or None."""
        return self._epoch if self._current is not None else None

    def wait_for_leader(self, timeout: float,
                        accept: Callable[[LeaderId], bool] = lambda _: True) -> LeaderId:
        """Block until there is a leader that `accept`s, or raise Unavailable after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            self._changed.clear()
            current = self._current
            if current is not None and accept(current):
                return current
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unavailable(f"no {self.role} leader in ZooKeeper at {self.path} after {timeout}s")
            self._changed.wait(min(left, 1.0))

    def _on_data(self, data: bytes | None, stat: Any) -> bool | None:
        if self._stopped:
            return False
        self._id, self._epoch = None, None
        if data:
            try:
                self._id = LeaderId.from_json(data)
                self._epoch = int(stat.mzxid)
            except DataCorruption:
                self._log.warning("discovery %s: unreadable leader data %r", self.role, data[:80])
        self._update()
        return None

    def _on_children(self, children: list[str]) -> bool | None:
        if self._stopped:
            return False
        self._candidates = sum(1 for c in children if c.startswith(CANDIDATE_PREFIX))
        self._update()
        return None

    def _update(self) -> None:
        current = self._id if self._candidates > 0 else None
        if current == self._current:
            return
        self._current = current
        self._log.info("discovery %s: leader is %s", self.role,
                       current.grpc_address if current is not None else "unknown")
        self._changed.set()
        if self._on_change is not None:
            try:
                self._on_change(current)
            except Exception:
                self._log.exception("discovery %s: on_change failed", self.role)
