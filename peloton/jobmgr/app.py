"""The job manager's composition root: config + storage + ports -> running components.

Start order (reverse on stop): group commit, recovery (the cache and the
other daemons' view are rebuilt before anything acts), goal-state engines,
the runtime updater, the status-event consumer, the launcher, the evictor.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from peloton.api.gen.peloton.api.v0.job import job_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.api.service_registry import register
from peloton.common.goalstate import Engine
from peloton.common.lifecycle import FunctionComponent, Lifecycle
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.jobmgr import recovery
from peloton.jobmgr.api.v0_jobs import JobManagerServicer
from peloton.jobmgr.api.v0_tasks import TaskManagerServicer
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.events import EventProcessor
from peloton.jobmgr.evictor import Evictor
from peloton.jobmgr.jobruntime import RuntimeUpdater
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.launcher import Launcher
from peloton.jobmgr.tasks import TaskOps
from peloton.jobmgr.writer import TaskWriter
from peloton.storage import GroupCommitter, Store

log = logging.getLogger(__name__)


class JobManager:
    """Jobs, tasks and workflows of the cluster, driven toward their goal states."""

    def __init__(self, store: Store, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 config: JobManagerConfig | None = None, grpc: GrpcServer | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config or JobManagerConfig()
        self.committer = GroupCommitter(store)
        self.ctx = JobContext(store=store, writer=TaskWriter(store, self.committer, clock),
                              resmgr=resmgr, hostmgr=hostmgr, config=self.config, clock=clock)
        ctx = self.ctx
        ctx.task_engine = Engine(name="task", workers=self.config.task_workers)
        ctx.job_engine = Engine(name="job", workers=self.config.job_workers)
        self.updater = RuntimeUpdater(ctx)
        ctx.on_tasks_changed = self.updater.mark
        self.jobs = JobOps(ctx)
        self.tasks = TaskOps(ctx)
        self.launcher = Launcher(ctx)
        self.events = EventProcessor(ctx, hostmgr.subscribe("jobmgr"))
        self.evictor = Evictor(ctx)
        task_engine, job_engine = ctx.task_engine, ctx.job_engine
        self._lifecycle = Lifecycle([
            FunctionComponent("group-commit", self.committer.start, self.committer.stop),
            FunctionComponent("recovery", lambda: self._recover()),
            FunctionComponent("job-engine", job_engine.start, job_engine.stop),
            FunctionComponent("task-engine", task_engine.start, task_engine.stop),
            self.updater, self.events, self.launcher, self.evictor,
        ], name="jobmgr")
        if grpc is not None:
            self.register(grpc)

    def register(self, grpc: GrpcServer) -> None:
        """Serve the job manager's APIs on `grpc`."""
        register(grpc, job_pb2_grpc.add_JobManagerServicer_to_server,
                 JobManagerServicer(self.ctx, self.jobs))
        register(grpc, task_pb2_grpc.add_TaskManagerServicer_to_server,
                 TaskManagerServicer(self.ctx, self.jobs, self.tasks))

    def _recover(self) -> None:
        recovery.recover(self.ctx)

    def start(self) -> None:
        """Recover and begin driving jobs."""
        self._lifecycle.start()
        log.info("job manager started with %d active jobs", len(self.ctx.cache))

    def stop(self) -> None:
        """Stop every component (running tasks keep running on their hosts)."""
        self._lifecycle.stop()
