"""ZooKeeper membership of all-active job managers, and ownership of their job partitions.

Layout (docs/design/all-active-jobmgr.md), beside the election's `<root>/<role>/leader`:

    <root>/<role>/members/<member id>    ephemeral; the member's LeaderId JSON
    <root>/<role>/partitions             persistent; data: the partition count (ASCII)
    <root>/<role>/partitions/<n>         ephemeral; data: the owner's member id

The members are the children of `members/`; partition `n` should belong to
`assign(members, count).owner(n)` (rendezvous hashing, peloton/core/partitions.py) and
belongs to whoever created `partitions/<n>`.  A partition's **epoch** is that node's
`czxid` (the create's zxid, returned by the create itself): zxids only grow, so each
claim of a partition has a larger epoch than every claim before it, as a leader term's
does.  The owner claims the epoch in the store (peloton/storage/partition_fences.py)
before it writes.

One loop per member (peloton/common/role_loop.py, as the election's: a greenlet, or a
thread with kazoo's threading handler), woken by watches and connection changes,
re-checking every few seconds as a safety net; each pass
*releases* the partitions held but no longer assigned (`on_release`, then the node is
deleted), then *acquires* the partitions assigned but not held whose node is free
(create the node, then `on_acquire(partition, epoch)`, or, for several at once with
`on_acquire_many`, every free node first and then one `on_acquire_many({partition:
epoch})`; a partition another member still holds is waited for with a watch on its
node).  So a partition has at most one holder at a time, and the holder always learns of
its loss (or ends its work) before the next one begins.

Callbacks run one at a time on the loop, never concurrently; every `on_acquire` is
followed by exactly one `on_release` of that partition: when it is assigned elsewhere, when
the connection is SUSPENDED or LOST (before ZooKeeper can expire the session and free the
node for someone else; `held` turns empty at once, even before the loop runs), on
`stop()`, or when `on_acquire` raised (then the node is deleted and the claim retried after
a backoff).  `stop()` is the graceful leave (SIGTERM): the member node goes first, so the
others compute the assignment without it, then each partition is released and its node
deleted, so its new owner starts at once instead of after the session timeout.

A member id must be unique among live processes.  A member node left by an earlier
session of the same id (a process restarted within its session timeout) is waited for:
two processes with one id never run at once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from peloton.common.leader import ELECTION_RETRY, JOB_MANAGER, RECHECK_SECONDS, ROOT, LeaderId
from peloton.common.retry import RetryPolicy
from peloton.common.role_loop import RoleLoop
from peloton.core.errors import FailedPrecondition, InvalidArgument
from peloton.core.partitions import DEFAULT_PARTITIONS, Assignment, assign, handover

MEMBERS = "members"
#: How long a graceful leave (`stop`) may take to release every partition (seconds); what
#: is still held then goes when the session ends.
LEAVE_TIMEOUT = 10.0
PARTITIONS = "partitions"


def role_path(root: str, role: str, *parts: str) -> str:
    """`<root>/<role>/<parts...>`, normalised (no doubled or trailing slashes)."""
    return "/".join(["", *(p for p in "/".join([root, role, *parts]).split("/") if p)])


class PartitionCountMismatch(FailedPrecondition):
    """The cluster's partition count in ZooKeeper differs from this member's configuration."""

    kind = "partition_count_mismatch"


class PartitionMember:
    """One job manager's membership and the partitions it holds; a `Component`."""

    def __init__(self, client: KazooClient, member_id: str, me: LeaderId, *,
                 on_acquire: Callable[[int, int], None], on_release: Callable[[int], None],
                 on_release_many: Callable[[list[int]], None] | None = None,
                 on_acquire_many: Callable[[dict[int, int]], Collection[int]] | None = None,
                 count: int = DEFAULT_PARTITIONS, role: str = JOB_MANAGER, root: str = ROOT,
                 retry: RetryPolicy = ELECTION_RETRY, rand: Callable[[], float] = random.random,
                 recheck: float = RECHECK_SECONDS, log: logging.Logger | None = None) -> None:
        if not member_id or "/" in member_id:
            raise InvalidArgument(f"member id must be non-empty and have no '/': {member_id!r}",
                                  field="member_id")
        self.member_id = member_id
        self.me = me
        self.count = count
        self.name = f"membership:{role}"
        self.members_path = role_path(root, role, MEMBERS)
        self.partitions_path = role_path(root, role, PARTITIONS)
        self._my_path = f"{self.members_path}/{member_id}"
        self._client = client
        self._on_acquire = on_acquire
        self._on_release = on_release
        # Several partitions let go at once (a leave, a lost session, a rebalance) are handed
        # over in one call when the owner can: each release waits for a launch round in
        # flight, and one wait for all is what lets a SIGTERM'd member's partitions move
        # within a second instead of a round per partition.
        self._on_release_many = on_release_many
        # Likewise several partitions taken over at once (a member left or died) are taken in
        # one call when the owner can: their nodes claimed first, then one call that claims
        # them in the store, announces them and recovers their jobs in one pass (one per
        # partition took 40-100 ms each, so a dead member's 30 partitions 1-3 s).  It returns
        # the partitions it could not take (a newer owner fenced it), which are let go.
        self._on_acquire_many = on_acquire_many
        self._log = log or logging.getLogger("peloton.membership")
        self._loop = RoleLoop(client, self._step, self._leave, label=f"membership {member_id}",
                              retry=retry, recheck=recheck, rand=rand,
                              expected=(_Expected, PartitionCountMismatch), log=self._log)
        # partition -> epoch; replaced, never mutated, as other threads read it (`held`)
        self._held: dict[int, int] = {}
        self._assignment: Assignment | None = None

    # -- what the rest of the process reads ------------------------------------------------
    @property
    def connected(self) -> bool:
        """The ZooKeeper connection is up (a partition's writes stop as soon as it is not)."""
        return self._loop.connected

    @property
    def held(self) -> frozenset[int]:
        """The partitions this member holds now (none while the connection is down)."""
        return frozenset(self._held) if self._loop.connected else frozenset()

    def epoch(self, partition: int) -> int | None:
        """The epoch of `partition` while this member holds it, else None."""
        return self._held.get(partition) if self._loop.connected else None

    @property
    def assignment(self) -> Assignment | None:
        """The assignment computed from the last membership seen (None before the first)."""
        return self._assignment

    def owner(self, partition: int) -> str | None:
        """The member holding `partition` now according to ZooKeeper (a read), or None
        while it is between owners: whom to forward a write of its jobs to."""
        try:
            data, _ = self._client.get(f"{self.partitions_path}/{partition}")
        except NoNodeError:
            return None
        return data.decode() or None

    def member(self, member_id: str) -> LeaderId | None:
        """The published address of a live member (a read), or None if it is not live."""
        try:
            data, _ = self._client.get(f"{self.members_path}/{member_id}")
        except NoNodeError:
            return None
        return LeaderId.from_json(data)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Join; returns at once (the connection may still be coming up)."""
        self._loop.start()

    def stop(self, timeout: float = LEAVE_TIMEOUT) -> None:
        """Leave gracefully: the member node first, then every partition is released and its
        node deleted (each one's new owner can start at once), then the loop ends."""
        self._loop.stop(timeout)

    # -- the loop's step -------------------------------------------------------------------------
    def _session(self) -> int:
        return int(self._client.client_id[0]) if self._client.client_id else -1

    def _step(self) -> None:
        if not self._loop.connected:
            self._release_all("ZooKeeper connection suspended or lost", delete=False)
            return
        if self._loop.take_interrupted():  # our nodes may be gone with the session: start afresh
            self._release_all("ZooKeeper connection was interrupted", delete=False)
        self._check_count()
        if not self._join():
            return
        members = self._client.get_children(self.members_path, watch=self._loop.wake)
        self._assignment = assignment = assign(members, self.count)
        plan = handover(self.member_id, self._held, assignment)
        self._release_many(sorted(plan.release), lambda p: f"assigned to {assignment.owner(p)}",
                           delete=True)
        if self._on_acquire_many is not None and len(plan.acquire) > 1:
            self._acquire_many(sorted(plan.acquire))
            return
        for partition in sorted(plan.acquire):
            self._acquire(partition)

    def _check_count(self) -> None:
        want = str(self.count).encode()
        try:
            self._client.create(self.partitions_path, want, makepath=True)
            return
        except NodeExistsError:
            pass
        data, stat = self._client.get(self.partitions_path)
        if not data:  # made by a tool's ensure_path: record ours
            self._client.set(self.partitions_path, want, version=stat.version)
        elif data != want:
            raise PartitionCountMismatch(
                f"the cluster has {data.decode(errors='replace')} job partitions in ZooKeeper "
                f"({self.partitions_path}); this job manager is configured with {self.count}")

    def _join(self) -> bool:
        """Our member node exists and is this session's (created if missing)."""
        self._client.ensure_path(self.members_path)
        stat = self._client.exists(self._my_path, watch=self._loop.wake)
        if stat is None:
            try:
                self._client.create(self._my_path, self.me.to_json(), ephemeral=True)
            except NodeExistsError:
                return False  # raced with an earlier session of ours; the watch wakes us
            self._log.info("membership %s: joined %s", self.member_id, self.members_path)
            return True
        if stat.ephemeralOwner == self._session():
            return True
        self._log.warning("membership %s: a member node of an earlier session is still there; "
                          "waiting for it to expire", self.member_id)
        return False

    def _claim_node(self, partition: int) -> int | None:
        """Create (or adopt) the partition's node; its epoch, or None while another member
        still holds it (the watch wakes us when it lets go)."""
        path = f"{self.partitions_path}/{partition}"
        stat = self._client.exists(path, watch=self._loop.wake)
        if stat is not None and stat.ephemeralOwner != self._session():
            return None
        if stat is None:
            try:
                _, stat = self._client.create(path, self.member_id.encode(), ephemeral=True,
                                              include_data=True)
            except NodeExistsError:
                self._client.exists(path, watch=self._loop.wake)
                return None
        # else: ours already (kept through a connection blip within the session): adopt it
        return self._note_claimed(partition, int(stat.czxid))

    def _note_claimed(self, partition: int, epoch: int) -> int:
        self._held = {**self._held, partition: epoch}
        self._log.info("membership %s: acquired partition %d (epoch %d)", self.member_id,
                       partition, epoch)
        return epoch

    def _claim_nodes(self, partitions: list[int]) -> dict[int, int]:
        """`_claim_node` of several partitions, pipelined: every node's look is sent before
        the first answer is read, then every free node's create, so taking a leaver's
        partitions costs two round trips to ZooKeeper, not two per partition (thirty one
        by one took its successor 0.1-0.5 s).  Partition -> epoch of those claimed."""
        client, wake, session = self._client, self._loop.wake, self._session()
        paths = {p: f"{self.partitions_path}/{p}" for p in partitions}
        looks = [(p, client.exists_async(paths[p], watch=wake)) for p in partitions]
        claimed: dict[int, int] = {}
        free: list[int] = []
        for partition, look in looks:
            stat = look.get()
            if stat is None:
                free.append(partition)
            elif stat.ephemeralOwner == session:  # ours already (adopt, as `_claim_node`)
                claimed[partition] = self._note_claimed(partition, int(stat.czxid))
        data = self.member_id.encode()
        creates = [(p, client.create_async(paths[p], data, ephemeral=True, include_data=True))
                   for p in free]
        for partition, create in creates:
            try:
                _, stat = create.get()
            except NodeExistsError:  # taken meanwhile: watch it, as `_claim_node` does
                client.exists(paths[partition], watch=wake)
                continue
            claimed[partition] = self._note_claimed(partition, int(stat.czxid))
        return claimed

    def _acquire_many(self, partitions: list[int]) -> None:
        take = self._on_acquire_many
        assert take is not None
        claimed: dict[int, int] = {}
        pending = list(partitions)
        while pending:  # again over those still held: freed while we looked (a leaver's
            # nodes go in one transaction, maybe midway through this pass)
            got = self._claim_nodes(pending)
            if not got:
                break
            claimed.update(got)
            pending = [p for p in pending if p not in got]
        if not claimed:
            return
        try:
            refused = sorted(set(take(claimed)) & set(claimed))
        except Exception as exc:
            self._log.exception("membership %s: on_acquire_many(%s) failed; letting them go",
                                self.member_id, sorted(claimed))
            self._release_many(sorted(claimed), "on_acquire_many failed", delete=True)
            raise _Expected(f"on_acquire_many({sorted(claimed)}) failed: {exc}") from exc
        if refused:
            self._release_many(refused, "a newer owner holds it in the store", delete=True)
            raise _Expected(f"partitions {refused} could not be taken; retrying")

    def _acquire(self, partition: int) -> None:
        epoch = self._claim_node(partition)
        if epoch is None:
            return
        try:
            self._on_acquire(partition, epoch)
        except Exception as exc:
            self._log.exception("membership %s: on_acquire(%d) failed; letting it go",
                                self.member_id, partition)
            self._release(partition, "on_acquire failed", delete=True)
            raise _Expected(f"on_acquire({partition}) failed: {exc}") from exc

    def _release(self, partition: int, reason: str, *, delete: bool) -> None:
        if partition not in self._held:
            return
        self._held = {p: e for p, e in self._held.items() if p != partition}
        self._log.info("membership %s: releasing partition %d: %s", self.member_id, partition,
                       reason)
        try:
            self._on_release(partition)
        except Exception:
            self._log.exception("membership %s: on_release(%d) failed", self.member_id,
                                partition)
        if delete:
            self._delete_if_mine(f"{self.partitions_path}/{partition}")

    def _release_all(self, reason: str, *, delete: bool) -> None:
        self._release_many(sorted(self._held), reason, delete=delete)

    def _release_many(self, partitions: list[int], reason: str | Callable[[int], str], *,
                      delete: bool) -> None:
        """Release `partitions` (those held): with `on_release_many`, one call for all of
        them, then their nodes deleted; else one `_release` each."""
        partitions = [p for p in partitions if p in self._held]
        if not partitions:
            return
        why = reason if callable(reason) else (lambda _p: reason)
        if self._on_release_many is None or len(partitions) == 1:
            for partition in partitions:
                self._release(partition, why(partition), delete=delete)
            return
        gone = set(partitions)
        self._held = {p: e for p, e in self._held.items() if p not in gone}
        for partition in partitions:  # one line each, as a single release logs it
            self._log.info("membership %s: releasing partition %d: %s", self.member_id,
                           partition, why(partition))
        try:
            self._on_release_many(partitions)
        except Exception:
            self._log.exception("membership %s: on_release_many(%s) failed", self.member_id,
                                partitions)
        if delete:
            self._delete_all_if_mine([f"{self.partitions_path}/{p}" for p in partitions])

    def _delete_all_if_mine(self, paths: list[str]) -> None:
        """Delete those of `paths` this session holds in one transaction, so a member taking
        them over finds them all free at once and takes them in one call (one by one, it
        woke for each and took them in many small batches); node by node if that fails."""
        if not self._loop.connected:
            return  # the session will take the nodes with it
        try:
            # Every look sent before the first answer is read: thirty looks one after
            # another held a leaver's handover back by 30-80 ms.
            session = self._session()
            looks = [(path, self._client.exists_async(path)) for path in paths]
            mine = [(path, stat.version) for path, look in looks
                    if (stat := look.get()) is not None and stat.ephemeralOwner == session]
            if len(mine) > 1:
                tx = self._client.transaction()
                for path, version in mine:
                    tx.delete(path, version=version)
                if not any(isinstance(r, Exception) for r in tx.commit()):
                    return
        except KazooException:
            self._log.warning("membership %s: could not delete %d partition nodes at once",
                              self.member_id, len(paths), exc_info=True)
        for path in paths:
            self._delete_if_mine(path)

    def _delete_if_mine(self, path: str) -> None:
        if not self._loop.connected:
            return  # the session will take the node with it
        try:
            stat = self._client.exists(path)
            if stat is not None and stat.ephemeralOwner == self._session():
                self._client.delete(path, version=stat.version)
        except NoNodeError:
            pass
        except KazooException:
            self._log.warning("membership %s: could not delete %s", self.member_id, path,
                              exc_info=True)

    def _leave(self) -> None:  # the loop's last act, however it ends
        self._delete_if_mine(self._my_path)  # first: the others reassign without us
        self._release_all("leaving", delete=True)
        self._assignment = None


class _Expected(Exception):
    """A failure the loop retries after a backoff without a stack trace."""
