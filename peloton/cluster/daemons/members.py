"""An all-active job manager process: a member of the job partitions, not a leader.

With `jobmgr.partitions` set (docs/design/all-active-jobmgr.md) every job manager process
runs one JobManager for its whole life and drives the job partitions it holds:

* `PartitionMember` (peloton/common/membership.py) joins `<root>/jobmanager/members` and
  calls `acquire_partition(p, epoch)` / `release_partition(p)` as ZooKeeper's assignment
  says (one at a time, on its loop);
* the job manager writes each job through its partition's fence (`PartitionFences`,
  live only while the ZooKeeper connection is up, so writes stop when it is SUSPENDED),
  stamps its calls to the resource and host managers with its partitions' epochs
  (term_fence.stamped_by_partition), and reads the status stream as `jobmgr@<member id>`;
* any member answers any call: one about a job another member drives is forwarded to it
  (peloton/jobmgr/servicers/forwarding.py, one hop), its owner found in a
  `MemberDirectory` (ZooKeeper's partition holders and member addresses kept in memory
  under watches), a client's Watch is answered by every member, merged, or by its one
  job's owner (servicers/watch_fanin.py), and a job created without an id gets one this
  member drives; the owner authorizes the original caller, named by this member under
  its own internal identity;
* the `jobmanager/leader` election still runs, for discovery only: clients that want one
  address (the CLI's default, Aurora's client) dial its winner, which has no extra power;
* without ZooKeeper the process is the only member and holds every partition from the
  start, each claimed with a solo epoch (the stored one + 1), as a solo leader does.

Start order: the member directory (lookups read ZooKeeper until its watches are set),
the job manager (it recovers nothing yet: it holds nothing), the membership (each
partition acquired is driven at once and recovered in a greenlet of its own, its jobs
loaded first by any call about one meanwhile), the discovery candidate.  Stop is the
reverse, so SIGTERM is the graceful leave: the member node goes, every partition is
released (its work stopped, its node deleted, its new owner starting at once) and only
then does the job manager stop; last, before the gRPC server stops, its watch streams
end cleanly (what the other members' Watch fan-ins take for a leave, not a failure).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError

from peloton.api.grpc_server import ServiceHost
from peloton.api.ports_grpc.term_fence import stamped_by_partition
from peloton.api.tls_grpc import open_channel
from peloton.cluster.daemons.config import JobmgrProcessConfig
from peloton.cluster.daemons.roles import Runtime
from peloton.common.components import Component, FunctionComponent
from peloton.common.leader import JOB_MANAGER, Candidate, LeaderId
from peloton.common.member_directory import MemberDirectory, PartitionClaim
from peloton.common.membership import LEAVE_TIMEOUT, PARTITIONS, PartitionMember, role_path
from peloton.core.errors import FailedPrecondition
from peloton.core.partitions import partition_of
from peloton.jobmgr.servicers.forwarding import MemberForwarder, update_job_from
from peloton.jobmgr.servicers.watch_fanin import WatchFanIn, leave_grace
from peloton.storage.partition_fences import PartitionFences

if TYPE_CHECKING:
    from peloton.jobmgr.app import JobManager
    from peloton.storage.leader_store import LeaderEpochStore

log = logging.getLogger(__name__)

#: The store fence name of a job manager that leads alone (process.py claims it as its role).
JOB_MANAGER_FENCE = "jobmgr"


def member_id(config: JobmgrProcessConfig, grpc_port: int) -> str:
    """This process's member id: configured, else `<hostname>:<grpc port>`."""
    return config.jobmgr.member_id or f"{socket.gethostname()}:{grpc_port}"


def jobmgr_member(rt: Runtime, grpc: ServiceHost, me: LeaderId,
                  grpc_port: int) -> list[Component]:
    """The components of an all-active job manager process, in start order (see the module
    docstring); the job manager's services are registered on `grpc` at once."""
    from peloton.jobmgr.app import JobManager

    assert isinstance(rt.config, JobmgrProcessConfig)
    config, store, zk = rt.config, rt.the_store(), rt.zk
    name = member_id(config, grpc_port)
    count = config.partitions
    # The membership's callbacks and the forwarder name `jm`, built below: they run only
    # once the components start, when it exists.
    member = None if zk is None else PartitionMember(
        zk, name, me, on_acquire=lambda p, epoch: _acquire(jm, p, epoch),
        on_release=lambda p: _release(jm, p), on_release_many=lambda ps: _release_many(jm, ps),
        on_acquire_many=lambda epochs: jm.acquire_partitions(epochs, behind=True),
        count=count, root=config.election.root)
    # A partition's writes stop as soon as the ZooKeeper connection is not up (before the
    # session can expire and its node go to another member).
    fences = PartitionFences(store, name, count=count, live=_live(member))
    resmgr, hostmgr = rt.resmgr(), rt.hostmgr()
    forwarder = directory = None
    if zk is not None and member is not None:
        tls = rt.security.tls
        directory = MemberDirectory.of(zk, member)
        # A client's Watch is answered by every member, merged: each publishes only the
        # jobs it drives; a Watch of one job by its owner.  Calls to other members present
        # this member's internal identity and name the caller (so the owner authorizes
        # the caller, not this member's certificate).  Another member's leave is waited
        # for as long as the members' stop and session timeouts say one can take (every
        # member of a cluster runs with the same jobmgr settings).
        fan_in = WatchFanIn(directory.members, name, me.grpc_address,
                            owner=_job_owner(directory), claim_here=_claim_here(fences),
                            identity=rt.security.internal,
                            connect=lambda address: open_channel(address, tls),
                            leave_grace=leave_grace(config.session_timeout, LEAVE_TIMEOUT))
        directory.add_listener(fan_in.wake)
        forwarder = MemberForwarder(
            lambda job_id: jm.ownership.owns(job_id), directory,
            update_job_from(store.get_update),
            connect=lambda address: open_channel(address, tls), watch_fan_in=fan_in,
            holds_none=lambda: jm.ownership.holds_none(), identity=rt.security.internal)
        rt.closers.extend([forwarder, fan_in])
    jm = JobManager(store, stamped_by_partition(resmgr, fences.epochs),
                    stamped_by_partition(hostmgr, fences.epochs), config.jobmgr, grpc=grpc,
                    fences=fences, member=name, forwarder=forwarder,
                    # The resource manager daemon fences a member's stamped calls, and
                    # ends its placement poll once a partition it asked for moved.
                    fenced_polls=True)
    # A resource or host manager that started over (a new leader term, empty) is handed
    # back what this member holds.
    resmgr.channel.add_term_listener(lambda old, new: jm.resync.restarted(resmgr=True))
    hostmgr.channel.add_term_listener(lambda old, new: jm.resync.restarted(hostmgr=True))
    if zk is None or member is None or directory is None:
        return [jm, _solo(jm, count)]
    # The election stays for discovery only: tools that want one address dial its winner.
    discovery = Candidate(zk, JOB_MANAGER, me, on_gained=lambda _epoch: None,
                          on_lost=lambda: None, root=config.election.root)
    path = member.partitions_path

    def fence_out() -> None:
        fence_out_single_leader(zk, store, path, count, name)

    fence = FunctionComponent("jobmgr:fence-out-leader", fence_out, lambda: None)
    # Stopped after the membership has released every partition and the job manager has
    # stopped, just before the gRPC server: this member's watch streams end cleanly, so
    # the other members' fan-ins tell this leave from a failure (watch_fanin.py).
    watch_leave = FunctionComponent("jobmgr:watch-leave", lambda: None, jm.watch.leave)
    return [watch_leave, directory, jm, fence, member, discovery]


def refuse_to_lead_members(zk: KazooClient, root: str) -> None:
    """A job manager about to lead the whole cluster alone (`jobmgr.partitions: 0`) raises
    FailedPrecondition if all-active members have joined this cluster (their partition
    count is recorded in ZooKeeper): the two modes would drive the same jobs."""
    path = role_path(root, JOB_MANAGER, PARTITIONS)
    found = zk.exists(path)
    if found is not None:
        count = zk.get(path)[0].decode(errors="replace")
        raise FailedPrecondition(
            f"this cluster's job managers are all-active members of {count} job partitions "
            f"({path} in ZooKeeper): a job manager with jobmgr.partitions 0 will not lead it; "
            f"configure jobmgr.partitions {count} (or leave it unset), or stop every member and "
            f"delete {path} to go back to a single leader", field="jobmgr.partitions")


def fence_out_single_leader(zk: KazooClient, store: LeaderEpochStore, path: str, count: int,
                            name: str) -> int:
    """Before a member drives any partition: end the term of a job manager that leads the
    whole cluster alone (`jobmgr.partitions: 0`, or a process from before partitions were
    the default, still running in a rolling upgrade), so no job is driven by both.

    The partition-count node (`path`) is recorded first, so a single-leader job manager
    that wins its election from now on refuses to lead (process.py); then the `jobmgr`
    leader fence is claimed in the store with the zxid of a write to that node, newer than
    any leader's epoch, so a single leader elected before it is refused its next write.
    Returns the epoch claimed (0 when the node holds another count: the membership then
    refuses to join, naming both)."""
    want = str(count).encode()
    while True:
        try:
            zk.create(path, want, makepath=True)
        except NodeExistsError:
            pass
        data, stat = zk.get(path)
        if data and data != want:
            return 0
        try:
            stat = zk.set(path, want, version=stat.version)
        except BadVersionError:  # another member wrote it meanwhile: read again
            continue
        epoch = int(stat.mzxid)
        store.claim_leadership(JOB_MANAGER_FENCE, epoch, f"members:{name}")
        log.info("job partitions: the single-leader fence %r claimed at epoch %d",
                 JOB_MANAGER_FENCE, epoch)
        return epoch


def _job_owner(directory: MemberDirectory) -> Callable[[str], PartitionClaim | None]:
    """The claim of a job's partition (None while it has none), from memory."""
    return lambda job_id: directory.claim(partition_of(job_id, directory.count))


def _claim_here(fences: PartitionFences) -> Callable[[str], tuple[int, int | None] | None]:
    """This member's current claim of a job's partition: (epoch, the epoch it took over
    from), None while it holds none."""
    def claim(job_id: str) -> tuple[int, int | None] | None:
        term = fences.term(partition_of(job_id, fences.count))
        return None if term is None else (term.epoch, term.after)
    return claim


def _live(member: PartitionMember | None) -> Callable[[], bool]:
    return (lambda: True) if member is None else (lambda: member.connected)


def _acquire(jm: JobManager, partition: int, epoch: int) -> None:
    # The recovery runs behind: the membership's greenlet goes back to ZooKeeper at once
    # (calls about the partition's jobs load them first meanwhile).
    jm.acquire_partition(partition, epoch, behind=True)


def _release(jm: JobManager, partition: int) -> None:
    jm.release_partition(partition)


def _release_many(jm: JobManager, partitions: list[int]) -> None:
    jm.release_partitions(partitions)


def _solo(jm: JobManager, count: int) -> Component:
    """Without ZooKeeper: hold every partition from start to stop."""

    def start() -> None:
        for partition in range(count):
            jm.acquire_partition(partition)

    def stop() -> None:
        jm.release_partitions(range(count))

    return FunctionComponent("partitions:solo", start, stop)
