"""The ZooKeeper side: one ephemeral sequential `member_` node per pod that should have a member.

`MemberRegistry` holds what is wanted (pod name -> Member) and the node it
made for each pod, and makes ZooKeeper match, as Twitter's ServerSet.join
and cancel do for Aurora's executor:

* a new member is a new node `<path>/member_<seq>` (EPHEMERAL_SEQUENTIAL) with
  the ServerSet JSON; a changed member (new run, host or ports) gets its new
  node first, then its old node is deleted; an unwanted member's node is deleted;
* the nodes are ephemeral: a lost session (expired) takes them all, and the
  registry makes them again under the new session once connected; after a
  connection that came back within the session, it makes only those that are
  missing;
* while not connected nothing is written (nothing blocks); what could not be
  done is done on reconnect.

`active` is false while this announcer does not lead (announcer/app.py):
then nothing is made, and nodes left from the last term (a connection drop
demotes the leader before the session may have ended) are reused by the next
term where they still match, or deleted when the registry stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from announcer.members import Member
from peloton.common.serverset import MEMBER_PREFIX

log = logging.getLogger(__name__)

#: Seconds one ZooKeeper call may take before it counts as failed (retried on reconnect).
CALL_TIMEOUT = 10.0


class MemberRegistry:
    """Wanted members -> `member_` nodes; see the module docstring."""

    name = "announcer-registry"

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._lock = threading.RLock()
        self._wanted: dict[str, Member] = {}
        #: pod name -> (the member its node holds, the node's path)
        self._nodes: dict[str, tuple[Member, str]] = {}
        #: Nodes of ours that should go but could not be deleted yet.
        self._stale: set[str] = set()
        self._active = False
        self._listening = False

    # -- what the announcer sees ----------------------------------------------------------
    def nodes(self) -> dict[str, str]:
        """Pod name -> path of its node (tests and logs)."""
        with self._lock:
            return {key: node for key, (_, node) in self._nodes.items()}

    def activate(self) -> None:
        """Start making nodes (this announcer leads); listens to the connection from now on."""
        with self._lock:
            if not self._listening:
                self._client.add_listener(self._on_state)
                self._listening = True
            self._active = True

    def deactivate(self) -> None:
        """Stop making nodes and forget what is wanted; delete the nodes if connected."""
        with self._lock:
            self._active = False
            self._wanted = {}
            self._apply(list(self._nodes))

    def close(self) -> None:
        """Deactivate and stop listening (before the client stops)."""
        self.deactivate()
        with self._lock:
            if self._listening:
                self._client.remove_listener(self._on_state)
                self._listening = False

    def replace(self, wanted: Mapping[str, Member]) -> None:
        """Everything that should have a member now (a full resync)."""
        with self._lock:
            self._wanted = dict(wanted)
            self._apply([*self._wanted, *self._nodes])

    def put(self, key: str, member: Member | None) -> None:
        """One pod's member (None: it should have none)."""
        with self._lock:
            if member is None:
                if self._wanted.pop(key, None) is None and key not in self._nodes:
                    return
            else:
                self._wanted[key] = member
            self._apply([key])

    # -- ZooKeeper ------------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: never block here.
        if state == KazooState.LOST:
            with self._lock:
                self._nodes.clear()  # ephemeral: the expired session took them
                self._stale.clear()
        elif state == KazooState.CONNECTED:
            self._client.handler.spawn(self._repair)

    def _repair(self) -> None:
        """After a reconnect: forget nodes that are gone, then make what is missing."""
        with self._lock:
            if not self._client.connected:
                return
            try:
                for key, (_, node) in list(self._nodes.items()):
                    if self._client.exists_async(node).get(timeout=CALL_TIMEOUT) is None:
                        del self._nodes[key]
            except Exception:  # KazooException, or the handler's timeout: on the next reconnect
                log.warning("announcer: checking member nodes failed", exc_info=True)
                return
            if self._active:  # else the next term reuses what still matches
                self._apply([*self._wanted, *self._nodes])

    def _apply(self, keys: Iterable[str]) -> None:
        if not self._client.connected:
            return  # done on reconnect
        for node in list(self._stale):
            self._stale.discard(node)
            self._delete(node)
        for key in dict.fromkeys(keys):
            want = self._wanted.get(key) if self._active else None
            have = self._nodes.get(key)
            if (have[0] if have is not None else None) == want:
                continue  # already right, or nothing to do
            try:
                if want is not None:
                    self._nodes[key] = (want, self._create(want))
                else:
                    del self._nodes[key]
            except Exception:  # KazooException, or the handler's timeout
                log.warning("announcer: could not update the member of %s (again on reconnect)",
                            key, exc_info=True)
                continue
            if have is not None:
                self._delete(have[1])

    def _create(self, member: Member) -> str:
        self._client.ensure_path(member.path)
        node: str = self._client.create_async(f"{member.path}/{MEMBER_PREFIX}", member.data,
                                              ephemeral=True, sequence=True).get(timeout=CALL_TIMEOUT)
        log.info("announcer: %s joined %s (run %s)", node, member.path, member.run)
        return node

    def _delete(self, node: str) -> None:
        """Delete a node we made; one that cannot be deleted now is tried again later."""
        try:
            self._client.delete_async(node).get(timeout=CALL_TIMEOUT)
            log.info("announcer: %s left", node)
        except NoNodeError:
            pass
        except Exception:  # KazooException, or the handler's timeout
            log.warning("announcer: could not delete %s (again on reconnect)", node, exc_info=True)
            self._stale.add(node)
