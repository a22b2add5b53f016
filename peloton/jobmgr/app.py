"""The job manager's composition root: config + storage + ports -> running components.

Everything is built here, once, in dependency order, each part given exactly what it
uses (peloton/jobmgr/README.md draws the graph):

1. the goal-state queue (ids and deadlines only) and the job cache (the aggregate:
   every change to a job goes through it, and it schedules the goal-state work);
2. run control (bulk task operations over the resource and host managers);
3. the goal-state actions (job, task, workflow), then the engines that run the queue
   with them;
4. the API operations (jobs, tasks, workflows) and the loops (placement processor,
   status events, evictor, daemon jobs, deadlines), recovery and peer resync.

Start order (reverse on stop): group commit, recovery (its start only reads the
active-job ids and defers them in the cache: it loads them in the background while
everything else runs and serves, and a lookup of a job not loaded yet loads it first,
recovery.py), goal-state engines,
status events, placement processor, evictor, daemon jobs, deadlines, peer resync, the cron
scheduler (cron runs start only once everything else works), volumes, and the
cluster-wide chores (chores.py: run by the holder of partition 0 only).

`ownership` (ownership.py) says which job partitions this job manager drives; alone it
holds all of them and nothing is filtered.  Recovery, the goal-state engines and the
status events handle only owned jobs; `acquire_partition` / `release_partition` are the
handover's two halves (docs/design/all-active-jobmgr.md).  Given `fences` (a member of an
all-active cluster), every write goes through the job's partition's fence
(`PartitionFences.routed()`), acquiring a partition claims it in the store first, releasing
one ends its term before its jobs are dropped, and group-commit batches stay within one
partition.  Given `member` (its member id), it reads the status stream as its own consumer
`jobmgr@<member>`; given `forwarder`, a call about a job another member drives is sent to
that member (servicers/forwarding.py), and a job created without an id gets one this
member drives.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from peloton.api.gen.peloton.api.v0.job import job_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2_grpc
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2_grpc
from peloton.api.gen.peloton.api.v0.volume.svc import volume_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.volume.svc import (
    volume_svc_pb2_grpc as v1_volume_svc_pb2_grpc,
)
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2_grpc
from peloton.api.gen.pelotonpy.api.cron import cron_pb2_grpc
from peloton.api.gen.pelotonpy.api.update import update_pb2_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.service_registry import Forwarder, register
from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.common.components import FunctionComponent, Lifecycle
from peloton.core.partitions import partition_of
from peloton.core.ports import HostManagerPort, ResourceManagerPort, member_consumer
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.chores import Chores
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.cron import CronScheduler, FunctionActions
from peloton.jobmgr.daemon_jobs import DaemonController
from peloton.jobmgr.evictor import Evictor
from peloton.jobmgr.goalstate.engines import GoalStateEngines
from peloton.jobmgr.goalstate.job import JobActions
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.goalstate.task import TaskActions
from peloton.jobmgr.goalstate.update import UpdateActions
from peloton.jobmgr.job_deps import JobDeps, Listeners
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.lifecycle_lock import LifecycleGate
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.peers import PeerResync
from peloton.jobmgr.placement_processor import PlacementProcessor
from peloton.jobmgr.recovery import Recovery
from peloton.jobmgr.runcontrol import RunControl
from peloton.jobmgr.sched import NeedsCache
from peloton.jobmgr.servicers.admin import AdminServicer, ApiLock
from peloton.jobmgr.servicers.cron import CronServicer
from peloton.jobmgr.servicers.update_options import WorkflowOptionsServicer
from peloton.jobmgr.servicers.v0_jobs import JobManagerServicer
from peloton.jobmgr.servicers.v0_tasks import TaskManagerServicer
from peloton.jobmgr.servicers.v0_updates import UpdateServicer
from peloton.jobmgr.servicers.v1_jobs import JobServicer
from peloton.jobmgr.servicers.v1_pods import PodServicer
from peloton.jobmgr.servicers.volumes import V1VolumeServicer, VolumeOps, VolumeServicer
from peloton.jobmgr.servicers.watch import WatchPublisher, WatchServicer
from peloton.jobmgr.sla import DeadlineTracker
from peloton.jobmgr.status_events import StatusEvents
from peloton.jobmgr.task_configs import TaskConfigCache
from peloton.jobmgr.tasks import TaskOps
from peloton.jobmgr.volumes import VolumeKeeper
from peloton.jobmgr.workflows import WorkflowOps
from peloton.storage import GroupCommitter, Store
from peloton.storage.partition_fences import PartitionFences

log = logging.getLogger(__name__)
#: The job manager's status-stream consumer (its members': `jobmgr@<member id>`).
STREAM_CONSUMER = "jobmgr"
#: How much longer than a long poll a released partition waits for a launch round (s).
QUIESCE_SLACK = 5.0


class JobManager:
    """Jobs, tasks and workflows of the cluster, driven toward their goal states."""

    def __init__(self, store: Store, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 config: JobManagerConfig | None = None, grpc: ServiceHost | None = None,
                 clock: Clock = SYSTEM_CLOCK, ownership: Ownership | None = None,
                 fences: PartitionFences | None = None, member: str | None = None,
                 forwarder: Forwarder | None = None, fenced_polls: bool = False) -> None:
        config = self.config = config or JobManagerConfig()
        # A member of an all-active cluster writes every job through its partition's fence
        # (`fences.routed()`), and holds only the partitions it claimed there.
        self.fences = fences
        if fences is not None:
            store = fences.routed()
            ownership = ownership or Ownership(fences.count, fences.held)
        self.ownership = ownership = ownership or Ownership()
        owns = ownership.owns
        # AdminService's Kill / Launch locks: everything that kills or launches uses the gate.
        raw_hostmgr = hostmgr
        hostmgr = self.lifecycle = LifecycleGate(raw_hostmgr)
        self.store, self.resmgr, self.hostmgr, self.clock = store, resmgr, hostmgr, clock
        # 1. what is due, and the aggregate that schedules it
        count = ownership.count
        self.committer = GroupCommitter(  # one transaction checks one partition's fence
            store, batch_key=None if fences is None else lambda w: partition_of(w.job_id, count))
        self.queue = GoalStateQueue(clock, config.runtime_update_interval)
        self.cache = JobCache(JobDeps(store, self.committer, self.queue, clock, Listeners(),
                                      task_configs=TaskConfigCache(config.task_config_cache_bytes)))
        # 2. bulk task operations
        self.control = RunControl(resmgr, hostmgr, clock, config, NeedsCache(), self.queue)
        # 3. goal-state actions, then the engines that run the queue with them
        self.job_actions = JobActions(self.cache, self.control, self.queue)
        self.task_actions = TaskActions(self.cache, self.control, hostmgr, self.queue, clock,
                                        config)
        self.update_actions = UpdateActions(self.cache, self.control, self.queue, store)
        self.engines = GoalStateEngines(self.queue, self.job_actions, self.task_actions,
                                        self.update_actions, config, owns=owns)
        # 4. API operations, loops, recovery
        self.jobs = JobOps(self.cache, store, resmgr, hostmgr, self.queue, clock,
                           new_job_id=ownership.new_job_id)
        self.tasks = TaskOps(self.cache, store, hostmgr, self.control, self.queue)
        self.workflows = WorkflowOps(self.cache, store, self.job_actions, self.update_actions,
                                     resmgr, hostmgr, clock)
        self.recovery = Recovery(self.cache, resmgr, hostmgr, self.control, self.queue,
                                 owns=owns)
        # Orphan runs (of no known task) are killed whatever the Kill lock says.
        # Each member of an all-active cluster reads the status stream under its own name,
        # its partitions' events only (it acknowledges the others unread).
        consumer = STREAM_CONSUMER if member is None else member_consumer(STREAM_CONSUMER,
                                                                          member)
        self.events = StatusEvents(self.cache, raw_hostmgr.subscribe(consumer), raw_hostmgr,
                                   self.queue, config, owns=owns, asked=ownership.asked)
        self.volumes = VolumeKeeper(store, self.cache, hostmgr, clock, owns=owns)
        self.placement = PlacementProcessor(self.cache, resmgr, hostmgr, clock, config,
                                            self.lifecycle, events_behind=self.events.behind,
                                            volumes=self.volumes, ownership=ownership,
                                            fenced_polls=fenced_polls)
        self.evictor = Evictor(self.cache, resmgr, hostmgr, config, clock, ownership)
        self.daemons = DaemonController(self.cache, hostmgr, self.control)
        self.deadlines = DeadlineTracker(self.cache, self.control, clock)
        self.resync = PeerResync(self.recovery)
        jobs = self.jobs
        self.cron = CronScheduler(store, FunctionActions(
            create=lambda spec, job_id: jobs.create(spec, job_id), stop=jobs.stop,
            runtime=lambda job_id: jobs.get(job_id)[1]),
            now_ms=lambda: int(clock.wall() * 1000), ownership=ownership)
        self.chores = Chores(store, ownership)
        self._lifecycle = Lifecycle([
            FunctionComponent("group-commit", self.committer.start, self.committer.stop),
            self.recovery,
            self.engines, self.events, self.placement, self.evictor, self.daemons,
            self.deadlines, self.resync, self.cron, self.volumes, self.chores,
        ], name="jobmgr")
        #: Sends calls about another member's job to its owner (all-active members).
        self.forwarder = forwarder
        # A member keeps its first changes, and each partition's since its claim, for the
        # Watch fan-ins that hear of it late (servicers/watch.py).
        is_member = forwarder is not None
        self.watch = WatchPublisher(self.cache.listeners, journal=is_member,
                                    partition=ownership.partition if is_member else None)
        if grpc is not None:
            self.register(grpc)

    def register(self, grpc: ServiceHost) -> None:
        """Serve the job manager's APIs on `grpc`.

        Every call goes through one hook, the AdminService lockdown check.  Handlers run
        as greenlets of the process's one hub (gRPC's gevent mode), like everything else
        of the job manager (peloton/jobmgr/README.md, "Concurrency").
        """
        cache, store, resmgr, hostmgr = self.cache, self.store, self.resmgr, self.hostmgr
        jobs, tasks, workflows = self.jobs, self.tasks, self.workflows
        self.api_lock = ApiLock()
        hook, fw = self.api_lock, self.forwarder
        register(grpc, job_pb2_grpc.add_JobManagerServicer_to_server,
                 JobManagerServicer(cache, resmgr, jobs, workflows), hook=hook, forward=fw)
        register(grpc, task_pb2_grpc.add_TaskManagerServicer_to_server,
                 TaskManagerServicer(cache, store, resmgr, hostmgr, jobs, tasks), hook=hook, forward=fw)
        register(grpc, update_svc_pb2_grpc.add_UpdateServiceServicer_to_server,
                 UpdateServicer(cache, jobs, workflows), hook=hook, forward=fw)
        register(grpc, stateless_svc_pb2_grpc.add_JobServiceServicer_to_server,
                 JobServicer(cache, store, resmgr, hostmgr, jobs, tasks, workflows), hook=hook, forward=fw)
        register(grpc, pod_svc_pb2_grpc.add_PodServiceServicer_to_server,
                 PodServicer(cache, store, resmgr, hostmgr, jobs, tasks), hook=hook, forward=fw)
        register(grpc, watch_svc_pb2_grpc.add_WatchServiceServicer_to_server,
                 WatchServicer(self.watch), hook=hook, forward=fw)
        register(grpc, admin_svc_pb2_grpc.add_AdminServiceServicer_to_server,
                 AdminServicer(self.engines, self.api_lock, self.lifecycle), hook=hook, forward=fw)
        register(grpc, cron_pb2_grpc.add_CronServiceServicer_to_server,
                 CronServicer(self.store, self.cron,
                              lambda spec: self.resmgr.validate_pool(spec.respool_id),
                              self.cron.now_ms), hook=hook, forward=fw)
        register(grpc, update_pb2_grpc.add_WorkflowOptionsServiceServicer_to_server,
                 WorkflowOptionsServicer(workflows, self.clock), hook=hook, forward=fw)
        volumes = VolumeOps(store, cache, self.volumes)
        register(grpc, volume_svc_pb2_grpc.add_VolumeServiceServicer_to_server,
                 VolumeServicer(volumes), hook=hook, forward=fw)
        register(grpc, v1_volume_svc_pb2_grpc.add_VolumeServiceServicer_to_server,
                 V1VolumeServicer(volumes), hook=hook, forward=fw)

    def acquire_partition(self, partition: int, epoch: int | None = None, *,
                          behind: bool = False) -> int:
        """Begin driving the jobs of `partition` (taken over from another member, whose
        term of it has ended): with fences, claim it in the store from `epoch` on (FencedOut
        if a newer owner holds it: then nothing is loaded), then recover its jobs from
        storage as a start does, hand their runs to the other daemons and evaluate them.
        Its jobs are deferred first, so a call about one while this runs loads it rather
        than missing it (recovery.py).  Returns the jobs loaded; `behind`: the recovery
        runs in a greenlet of its own (the membership's callbacks), and this returns the
        jobs deferred once they are."""
        if self.fences is not None:
            self.fences.claim(partition, epoch)
        return self._drive({partition}, behind=behind)

    def acquire_partitions(self, epochs: Mapping[int, int], *, behind: bool = False) -> list[int]:
        """`acquire_partition` of several partitions at once (a member left or died): all
        claimed in the store in one call, then one announcement to the peers and one recovery pass over
        all of them (`behind`: in a greenlet of its own).  Returns the partitions a newer
        owner holds in the store (FencedOut: not taken, nothing of theirs loaded)."""
        refused = self.fences.claim_many(epochs) if self.fences is not None else []
        for partition in refused:
            log.warning("partition %d: not taken: a newer owner holds it in the store",
                        partition)
        taken = set(epochs) - set(refused)
        if taken:
            self._drive(taken, behind=behind)
        return refused

    def _drive(self, partitions: set[int], *, behind: bool = False) -> int:
        """Start driving `partitions` (claimed): announce, own, recover; the jobs loaded
        (`behind`: deferred, recovered in a greenlet of their own)."""
        ownership, cache, fences = self.ownership, self.cache, self.fences
        for partition in sorted(partitions):  # before any of its jobs can change here
            term = fences.term(partition) if fences is not None else None
            self.watch.claimed(partition, after=term.after if term is not None else None)
        if self.fences is not None:
            self._announce(sorted(partitions))
        # The active jobs are listed before the partitions are owned, and deferred right
        # after, with nothing that yields in between: the list is a store read, and a
        # status event of one of their jobs applied meanwhile would find its job owned but
        # neither cached nor deferred, and kill a live run as an orphan's.  The list misses
        # no job: the partitions are claimed in the store, so only this member writes them,
        # and a job it creates is cached from its create on.
        listed = cache.active_ids()
        for partition in sorted(partitions):
            ownership.acquire(partition)

        def only(job_id: str) -> bool:
            return ownership.partition(job_id) in partitions and job_id not in cache

        recovery = self.recovery
        if behind:
            return recovery.recover_behind(only=only, listed=listed)
        return recovery.recover(only=only, listed=listed)

    def _announce(self, partitions: list[int]) -> None:
        """Make one no-op call to each peer, so they hear the partitions' new epochs now.

        A member's peer calls carry its partitions' epochs and the peers refuse an older
        one only once they have heard a newer one (term_fence.py): a partition's previous
        owner, paused, could otherwise still kill or launch runs of it until this member
        happened to call about one of its jobs (never, for a partition without runs).
        Best effort: a peer that is down hears it with the next call."""
        try:
            self.resmgr.kill_tasks([])
            self.hostmgr.reconcile([])
        except Exception as exc:
            log.warning("partitions %s: could not announce their new epochs to the peers: %s",
                        partitions, exc)

    def release_partition(self, partition: int) -> int:
        """Stop driving the jobs of `partition` (it moves to another member): they leave
        the goal-state queue and the cache, and their events are left to the new owner.
        Nothing is written: the jobs stay active in storage for the next owner's recovery.
        Returns the jobs dropped."""
        return self.release_partitions([partition])

    def release_partitions(self, partitions: Iterable[int]) -> int:
        """`release_partition` of several partitions at once, waiting once for a launch
        round in flight rather than once per partition (a leaving member hands all its
        partitions over within one round)."""
        gone = set(partitions)
        # What the status events kept unstored (a run's STARTING) is stored while the
        # partitions are still ours; the new owner's reconcile covers what this misses.
        try:
            self.events.store_kept(lambda job_id: self.ownership.partition(job_id) in gone)
        except Exception:
            log.warning("partitions %s: kept STARTING reports not stored before the handover",
                        sorted(gone), exc_info=True)
        for partition in sorted(gone):
            if self.fences is not None:
                self.fences.release(partition)  # first: no write of its jobs from now on
            self.ownership.release(partition)
            self.watch.released(partition)
        # A launch round that asked for these partitions' placements ends before the new
        # owners can start (and queue their runs again), so it cannot take one of theirs.
        if not self.placement.quiesce(self.config.poll_timeout + QUIESCE_SLACK):
            log.warning("partitions %s: a launch round is still running; releasing anyway",
                        sorted(gone))
        for job_id in self.cache.deferred:  # not loaded yet: nothing to drop from the queue
            if self.ownership.partition(job_id) in gone:
                self.cache.forget(job_id)
        dropped = [job for job in self.cache if self.ownership.partition(job.job_id) in gone]
        for job in dropped:
            self.queue.forget_job(job.job_id, job.instances())
            self.cache.forget(job.job_id)
        return len(dropped)

    def start(self) -> None:
        """Begin driving jobs and serving; recovery goes on in the background."""
        self._lifecycle.start()
        log.info("job manager started: %d active jobs loaded, %d being recovered",
                 len(self.cache), len(self.cache.deferred))

    def stop(self) -> None:
        """Stop every component (running tasks keep running on their hosts)."""
        self._lifecycle.stop()

    # -- stepped by the caller (deterministic tests, the simulator), never started ---------
    def run_due(self) -> int:
        """One round of the reactive work due now, in the caller, waiting for nothing: the
        goal-state keys due, then one pass of the placement processor and one batch of the
        status stream (what their greenlets do when woken).  Returns how much work it found
        (0: nothing was due).  The periodic passes (evictor, deadlines, daemon jobs) are the
        caller's to pace.
        """
        done = self.engines.run_due()
        done += self.placement.launch_once(0.0)
        done += self.events.process_once(0.0)
        return done

    def next_due(self) -> float | None:
        """The earliest monotonic time a goal-state key (job, task or workflow), or a kept
        STARTING to be stored (status_events.py), comes due, or None if none is scheduled:
        when `run_due` next has work no event brings."""
        queue = self.queue
        due = [t for t in (queue.jobs.next_deadline(), queue.tasks.next_deadline(),
                           queue.updates.next_deadline(), self.events.next_due())
               if t is not None]
        return min(due) if due else None
