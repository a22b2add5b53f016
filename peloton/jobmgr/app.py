"""The job manager's composition root: config + storage + ports -> running components.

Start order (reverse on stop): group commit, recovery (the cache and the
other daemons' view are rebuilt before anything acts), goal-state engines,
the runtime updater, the status-event consumer, the launcher, the evictor,
..., the cron scheduler (last: runs start only once everything else works).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from peloton.api.gen.peloton.api.v0.job import job_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2_grpc
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2_grpc
from peloton.api.gen.pelotonpy.api.cron import cron_pb2_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.service_registry import register
from peloton.common.components import FunctionComponent, Lifecycle
from peloton.common.goalstate import Engine
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.jobmgr import recovery
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.cron import CronScheduler, FunctionActions
from peloton.jobmgr.daemon_jobs import DaemonController
from peloton.jobmgr.evictor import Evictor
from peloton.jobmgr.goalstate.update import UpdateEntity
from peloton.jobmgr.jobruntime import RuntimeUpdater
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.peers import PeerResync
from peloton.jobmgr.placement_processor import Launcher
from peloton.jobmgr.servicers.admin import AdminServicer, ApiLock
from peloton.jobmgr.servicers.cron import CronServicer
from peloton.jobmgr.servicers.hub import ApiHook, Hub
from peloton.jobmgr.servicers.v0_jobs import JobManagerServicer
from peloton.jobmgr.servicers.v0_tasks import TaskManagerServicer
from peloton.jobmgr.servicers.v0_updates import UpdateServicer
from peloton.jobmgr.servicers.v1_jobs import JobServicer
from peloton.jobmgr.servicers.v1_pods import PodServicer
from peloton.jobmgr.servicers.watch import WatchPublisher, WatchServicer
from peloton.jobmgr.sla import DeadlineTracker
from peloton.jobmgr.status_events import EventProcessor
from peloton.jobmgr.tasks import TaskOps
from peloton.jobmgr.workflows import WorkflowOps
from peloton.jobmgr.writer import TaskWriter
from peloton.storage import GroupCommitter, Store

log = logging.getLogger(__name__)


class JobManager:
    """Jobs, tasks and workflows of the cluster, driven toward their goal states."""

    def __init__(self, store: Store, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 config: JobManagerConfig | None = None, grpc: ServiceHost | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config or JobManagerConfig()
        self.committer = GroupCommitter(store)
        self.ctx = JobContext(store=store, writer=TaskWriter(store, self.committer, clock),
                              resmgr=resmgr, hostmgr=hostmgr, config=self.config, clock=clock)
        ctx = self.ctx
        ctx.task_engine = Engine(name="task", workers=self.config.task_workers)
        ctx.job_engine = Engine(name="job", workers=self.config.job_workers)
        ctx.update_engine = Engine(name="update", workers=self.config.update_workers)
        update_engine = ctx.update_engine
        ctx.on_update_due = lambda job_id: update_engine.enqueue(UpdateEntity(ctx, job_id))
        self.workflows = WorkflowOps(ctx)
        self.updater = RuntimeUpdater(ctx)
        ctx.on_tasks_changed = self.updater.mark
        self.jobs = JobOps(ctx)
        self.tasks = TaskOps(ctx)
        self.launcher = Launcher(ctx)
        self.events = EventProcessor(ctx, hostmgr.subscribe("jobmgr"))
        self.evictor = Evictor(ctx)
        self.daemons = DaemonController(ctx)
        self.deadlines = DeadlineTracker(ctx)
        self.resync = PeerResync(ctx)
        jobs = self.jobs
        self.cron = CronScheduler(store, FunctionActions(
            create=lambda spec, job_id: jobs.create(spec, job_id), stop=jobs.stop,
            runtime=lambda job_id: jobs.get(job_id)[1]), now_ms=lambda: int(clock() * 1000))
        task_engine, job_engine = ctx.task_engine, ctx.job_engine
        self._lifecycle = Lifecycle([
            FunctionComponent("group-commit", self.committer.start, self.committer.stop),
            FunctionComponent("recovery", lambda: self._recover()),
            FunctionComponent("job-engine", job_engine.start, job_engine.stop),
            FunctionComponent("task-engine", task_engine.start, task_engine.stop),
            FunctionComponent("update-engine", update_engine.start, update_engine.stop),
            self.updater, self.events, self.launcher, self.evictor, self.daemons,
            self.deadlines, self.resync, self.cron,
        ], name="jobmgr")
        if grpc is not None:
            self.register(grpc)

    def register(self, grpc: ServiceHost) -> None:
        """Serve the job manager's APIs on `grpc`.

        Every call goes through one hook: the AdminService lockdown check, then the
        call on the hub this job manager was built on (see peloton.jobmgr.servicers.hub).
        """
        ctx, jobs, tasks, workflows = self.ctx, self.jobs, self.tasks, self.workflows
        self.api_lock = ApiLock()
        self.watch = WatchPublisher(ctx)
        hook = ApiHook(Hub(), self.api_lock.check)
        register(grpc, job_pb2_grpc.add_JobManagerServicer_to_server,
                 JobManagerServicer(ctx, jobs, workflows), hook=hook)
        register(grpc, task_pb2_grpc.add_TaskManagerServicer_to_server,
                 TaskManagerServicer(ctx, jobs, tasks), hook=hook)
        register(grpc, update_svc_pb2_grpc.add_UpdateServiceServicer_to_server,
                 UpdateServicer(ctx, jobs, workflows), hook=hook)
        register(grpc, stateless_svc_pb2_grpc.add_JobServiceServicer_to_server,
                 JobServicer(ctx, jobs, tasks, workflows), hook=hook)
        register(grpc, pod_svc_pb2_grpc.add_PodServiceServicer_to_server,
                 PodServicer(ctx, jobs, tasks), hook=hook)
        register(grpc, watch_svc_pb2_grpc.add_WatchServiceServicer_to_server,
                 WatchServicer(self.watch), hook=hook)
        register(grpc, admin_svc_pb2_grpc.add_AdminServiceServicer_to_server,
                 AdminServicer(ctx, self.api_lock), hook=hook)
        register(grpc, cron_pb2_grpc.add_CronServiceServicer_to_server,
                 CronServicer(ctx.store, self.cron, lambda spec: ctx.resmgr.validate_pool(spec.respool_id),
                              self.cron.now_ms), hook=hook)

    def _recover(self) -> None:
        recovery.recover(self.ctx)

    def start(self) -> None:
        """Recover and begin driving jobs."""
        self._lifecycle.start()
        log.info("job manager started with %d active jobs", len(self.ctx.cache))

    def stop(self) -> None:
        """Stop every component (running tasks keep running on their hosts)."""
        self._lifecycle.stop()
