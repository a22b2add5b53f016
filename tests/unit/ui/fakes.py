"""Fake Peloton services for the web UI's tests: the CLI's fakes plus what the UI also calls.

They extend tests/unit/cli/fakes.py (same `World`, same recorded `calls`)
with richer pools (reservations, limits, usage), jobs that name their pool
and current update, workflows, task restarts, update resume/abort and host
maintenance completion.  All are real servicers on a real gRPC server, so
the UI's client goes over the wire as it does against a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2 as sl
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc as svc_grpc
from peloton.core.errors import Conflict, FailedPrecondition, NotFound
from tests.unit.cli import fakes
from tests.unit.cli.fakes import JOB, POOL

CHILD = "7b1a4c0e-0000-4000-8000-000000000002"


@dataclass
class UiWorld(fakes.World):
    """The CLI fakes' world plus the UI's: current update, workflows, conflicts, maintenance."""

    update_id: str = ""
    workflows: list[Any] = field(default_factory=list)
    #: Every JobManager.Restart loses its version race (another writer always gets in first).
    restart_conflicts: bool = False
    maintenance: set[str] = field(default_factory=set)


def _resources(**amounts: tuple[float, float]) -> list[Any]:
    return [respool_pb2.ResourceConfig(kind=k, reservation=r, limit=lim, share=1)
            for k, (r, lim) in amounts.items()]


def _pool(pool_id: str, path: str, parent: str, resources: list[Any], used: dict[str, float]) -> Any:
    info = respool_pb2.ResourcePoolInfo(
        config=respool_pb2.ResourcePoolConfig(name=path.rsplit("/", 1)[-1] or "root", resources=resources,
                                              owningTeam="team6" if parent else ""),
        usage=[respool_pb2.ResourceUsage(kind=k, allocation=v) for k, v in used.items()])
    info.id.value, info.path.value = pool_id, path
    if parent:
        info.parent.value = parent
    return info


POOLS = [  # children listed before parents, as a server may: the UI sorts by path
    _pool(CHILD, "/DefaultResPool/batch", POOL, _resources(cpu=(0.5, 2), memory=(256, 1024)),
          {"cpu": 0.25, "memory": 128}),
    _pool("root", "/", "", [], {"cpu": 1.5, "memory": 512, "disk": 30}),
    _pool(POOL, "/DefaultResPool", "root", _resources(cpu=(1, 4), memory=(512, 4096), disk=(512, 10240)),
          {"cpu": 1.5, "memory": 512, "disk": 30}),
]


class UiResourceManager(fakes.FakeResourceManager):
    """Pools with config and usage; GetResourcePool by id."""

    def Query(self, request: Any, context: Any) -> Any:
        self.w.record("ResourceManager.Query", request, context)
        return respool_pb2.QueryResponse(resourcePools=POOLS)

    def GetResourcePool(self, request: Any, context: Any) -> Any:
        self.w.record("ResourceManager.GetResourcePool", request, context)
        for pool in POOLS:
            if pool.id.value == request.id.value:
                return respool_pb2.GetResponse(poolinfo=pool)
        err = respool_pb2.ResourcePoolNotFound(id=request.id, message=f"pool {request.id.value} not found")
        return respool_pb2.GetResponse(error=respool_pb2.GetResponse.Error(notFound=err))


class UiJobManager(fakes.FakeJobManager):
    """Jobs name their pool in summaries, their current update in Get; Restart may always conflict."""

    def Get(self, request: Any, context: Any) -> Any:
        response = super().Get(request, context)
        if self.w.update_id and response.HasField("jobInfo"):  # type: ignore[attr-defined]
            response.jobInfo.runtime.updateID.value = self.w.update_id  # type: ignore[attr-defined]
        return response

    def Query(self, request: Any, context: Any) -> Any:
        response = super().Query(request, context)
        for summary in response.results:
            config = self.w.jobs[summary.id.value]
            summary.respoolID.CopyFrom(config.respoolID)
            summary.owner, summary.type = config.owner, config.type
        response.pagination.total = len(response.results)
        return response

    def Restart(self, request: Any, context: Any) -> Any:
        if self.w.restart_conflicts:  # type: ignore[attr-defined]
            self.w.record("JobManager.Restart", request, context)
            raise Conflict("job configuration version 3 is stale: another update got in first")
        return super().Restart(request, context)


class UiTaskManager(fakes.FakeTaskManager):
    """Adds Restart."""

    def Restart(self, request: Any, context: Any) -> Any:
        self.w.record("TaskManager.Restart", request, context)
        return task_pb2.RestartResponse()


class UiUpdateService(fakes.FakeUpdateService):
    """Pause (inherited), Resume and Abort of the current update; others are not active."""

    def _active(self, request: Any) -> None:
        if request.updateId.value != self.w.update_id:  # type: ignore[attr-defined]
            raise FailedPrecondition(f"update {request.updateId.value} is not the active workflow")

    def ResumeUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.ResumeUpdate", request, context)
        self._active(request)
        return update_svc_pb2.ResumeUpdateResponse()

    def AbortUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.AbortUpdate", request, context)
        self._active(request)
        return update_svc_pb2.AbortUpdateResponse()


class UiHostService(fakes.FakeHostService):
    """Adds CompleteMaintenance (of hosts in maintenance only)."""

    def CompleteMaintenance(self, request: Any, context: Any) -> Any:
        self.w.record("HostService.CompleteMaintenance", request, context)
        if request.hostname not in {h.hostname for h in self.hosts if h.state != host_pb2.HOST_STATE_UP}:
            raise FailedPrecondition(f"host {request.hostname} is not in maintenance")
        return host_svc_pb2.CompleteMaintenanceResponse(hostname=request.hostname)


class UiJobService(svc_grpc.JobServiceServicer):  # type: ignore[misc]
    """ListJobWorkflows from `UiWorld.workflows`."""

    def __init__(self, world: UiWorld) -> None:
        self.w = world

    def ListJobWorkflows(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.ListJobWorkflows", request, context)
        if request.job_id.value not in self.w.jobs:
            raise NotFound(f"job {request.job_id.value} not found")
        return svc.ListJobWorkflowsResponse(workflow_infos=self.w.workflows)


def workflow(kind: str, state: str, done: int, failed: int, left: int, batch: int = 1) -> Any:
    """A WorkflowInfo as the job manager reports it."""
    status = sl.WorkflowStatus(type="WORKFLOW_TYPE_" + kind, state="WORKFLOW_STATE_" + state,
                               num_instances_completed=done, num_instances_failed=failed,
                               num_instances_remaining=left, instances_current=[done],
                               creation_time="2019-05-01T10:00:00Z")
    status.version.value, status.prev_version.value = "2-1-1", "1-1-1"
    info = sl.WorkflowInfo(status=status)
    if kind == "RESTART":
        info.restart_spec.batch_size = batch
    else:
        info.update_spec.batch_size = batch
    return info


def job_config(name: str, *, service: bool = False, pool: str = POOL) -> Any:
    """A stored job config the fakes answer Get and Query with."""
    from peloton.api.gen.peloton.api.v0.job import job_pb2

    config = job_pb2.JobConfig(name=name, owner="alice", owningTeam="team6", instanceCount=3,
                               type=job_pb2.SERVICE if service else job_pb2.BATCH,
                               description="three tasks")
    config.respoolID.CopyFrom(peloton_pb2.ResourcePoolID(value=pool))
    config.defaultConfig.resource.cpuLimit = 0.5
    config.defaultConfig.resource.memLimitMb = 64
    config.defaultConfig.command.value = "echo hi"
    return config


__all__ = ["CHILD", "JOB", "POOL", "POOLS", "UiWorld", "job_config", "workflow"]
