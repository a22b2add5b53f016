"""Fake Peloton services for CLI tests: small scripted behaviour, every request recorded.

They are real servicers (subclasses of the generated ones) served by a real
gRPC server, so the tests exercise the wire: paths, metadata, deadlines,
status codes and v0 embedded errors.  Errors are raised as our PelotonErrors
and mapped to status codes by `service_registry`, as the daemons do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.errors import errors_pb2
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2, host_svc_pb2_grpc
from peloton.api.gen.peloton.api.v0.job import job_pb2, job_pb2_grpc
from peloton.api.gen.peloton.api.v0.respool import respool_pb2, respool_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2, task_pb2_grpc
from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2, update_svc_pb2_grpc
from peloton.core.errors import Conflict, InvalidArgument, NotFound

JOB = "358fad26-73fa-43c8-a350-1e9067571a76"
POOL = "7b1a4c0e-0000-4000-8000-000000000001"


@dataclass
class Call:
    """One request a fake received."""

    method: str
    request: Any
    metadata: dict[str, str]


@dataclass
class World:
    """State shared by the fakes; tests script it and read `calls`."""

    calls: list[Call] = field(default_factory=list)
    pools: dict[str, str] = field(default_factory=lambda: {"/": "root", "/DefaultResPool": POOL})
    jobs: dict[str, Any] = field(default_factory=dict)
    #: Per job: successive (JobState name, taskStats) answers to Get, the last one repeating.
    job_script: dict[str, list[tuple[str, dict[str, int]]]] = field(default_factory=dict)
    #: Successive (State name, done, failed, remaining) answers to GetUpdate.
    update_script: list[tuple[str, int, int, int]] = field(default_factory=list)
    sandbox: tuple[str, str, list[str]] = ("", "", [])
    slow_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        """Remember a request and its metadata."""
        copy = type(request)()
        copy.CopyFrom(request)
        with self.lock:
            self.calls.append(Call(method, copy, dict(context.invocation_metadata())))

    def requests(self, method: str) -> list[Any]:
        """The requests received by `method` ("JobManager.Create"), oldest first."""
        return [c.request for c in self.calls if c.method == method]

    def call(self, method: str) -> Call:
        """The only call of `method`."""
        found = [c for c in self.calls if c.method == method]
        assert len(found) == 1, f"{method}: {len(found)} calls"
        return found[0]


def _step(script: list[Any]) -> Any:
    return script.pop(0) if len(script) > 1 else script[0]


class FakeResourceManager(respool_pb2_grpc.ResourceManagerServicer):  # type: ignore[misc]  # grpc is untyped
    """Pools by path; `Dup` already exists."""

    def __init__(self, world: World) -> None:
        self.w = world

    def LookupResourcePoolID(self, request: Any, context: Any) -> Any:
        self.w.record("ResourceManager.LookupResourcePoolID", request, context)
        path = request.path.value
        if path in self.w.pools:
            return respool_pb2.LookupResponse(id=peloton_pb2.ResourcePoolID(value=self.w.pools[path]))
        err = respool_pb2.ResourcePoolPathNotFound(path=request.path,
                                                   message=f"resource pool {path} not found")
        return respool_pb2.LookupResponse(error=respool_pb2.LookupResponse.Error(notFound=err))

    def CreateResourcePool(self, request: Any, context: Any) -> Any:
        self.w.record("ResourceManager.CreateResourcePool", request, context)
        if request.config.name == "Dup":
            err = respool_pb2.ResourcePoolAlreadyExists(message="resource pool Dup already exists")
            return respool_pb2.CreateResponse(error=respool_pb2.CreateResponse.Error(alreadyExists=err))
        return respool_pb2.CreateResponse(result=peloton_pb2.ResourcePoolID(value="pool-new"))

    def UpdateResourcePool(self, request: Any, context: Any) -> Any:
        self.w.record("ResourceManager.UpdateResourcePool", request, context)
        return respool_pb2.UpdateResponse()

    def DeleteResourcePool(self, request: Any, context: Any) -> Any:
        self.w.record("ResourceManager.DeleteResourcePool", request, context)
        return respool_pb2.DeleteResponse()

    def Query(self, request: Any, context: Any) -> Any:
        self.w.record("ResourceManager.Query", request, context)
        pools = [respool_pb2.ResourcePoolInfo(id=peloton_pb2.ResourcePoolID(value=pid),
                                              path=respool_pb2.ResourcePoolPath(value=path))
                 for path, pid in self.w.pools.items()]
        return respool_pb2.QueryResponse(resourcePools=pools)


class FakeJobManager(job_pb2_grpc.JobManagerServicer):  # type: ignore[misc]  # grpc is untyped
    """Jobs created are remembered; Get follows `World.job_script`; `bad` names are invalid."""

    def __init__(self, world: World) -> None:
        self.w = world

    def Create(self, request: Any, context: Any) -> Any:
        self.w.record("JobManager.Create", request, context)
        job_id = request.id.value or JOB
        if request.config.name == "bad":
            invalid = job_pb2.InvalidJobConfig(message="defaultConfig.resource.cpuLimit: must be > 0")
            return job_pb2.CreateResponse(error=job_pb2.CreateResponse.Error(invalidConfig=invalid))
        if job_id in self.w.jobs:
            exists = job_pb2.JobAlreadyExists(id=request.id, message=f"job {job_id} already exists")
            return job_pb2.CreateResponse(error=job_pb2.CreateResponse.Error(alreadyExists=exists))
        self.w.jobs[job_id] = request.config
        return job_pb2.CreateResponse(jobId=peloton_pb2.JobID(value=job_id))

    def Get(self, request: Any, context: Any) -> Any:
        self.w.record("JobManager.Get", request, context)
        if self.w.slow_seconds:
            time.sleep(self.w.slow_seconds)
        job_id = request.id.value
        if job_id not in self.w.jobs:
            err = errors_pb2.JobNotFound(id=request.id, message=f"job {job_id} not found")
            return job_pb2.GetResponse(error=job_pb2.GetResponse.Error(notFound=err))
        state, stats = _step(self.w.job_script.get(job_id, [("RUNNING", {})]))
        runtime = job_pb2.RuntimeInfo(state=state, taskStats=stats,
                                      configurationVersion=3, creationTime="2019-05-01T10:00:00.5Z")
        info = job_pb2.JobInfo(id=request.id, config=self.w.jobs[job_id], runtime=runtime)
        return job_pb2.GetResponse(jobInfo=info)

    def Query(self, request: Any, context: Any) -> Any:
        self.w.record("JobManager.Query", request, context)
        results = [job_pb2.JobSummary(
            id=peloton_pb2.JobID(value=jid), name=cfg.name, owningTeam=cfg.owningTeam,
            instanceCount=cfg.instanceCount,
            runtime=job_pb2.RuntimeInfo(state=job_pb2.RUNNING, creationTime="2019-05-01T10:00:00.5Z",
                                        taskStats={"RUNNING": 2, "SUCCEEDED": 1}))
            for jid, cfg in self.w.jobs.items()]
        return job_pb2.QueryResponse(results=results)

    def Restart(self, request: Any, context: Any) -> Any:
        self.w.record("JobManager.Restart", request, context)
        if request.resourceVersion != 3:
            raise Conflict("invalid job configuration version")
        return job_pb2.RestartResponse(resourceVersion=4, updateID=peloton_pb2.UpdateID(value="upd-1"))


class FakeTaskManager(task_pb2_grpc.TaskManagerServicer):  # type: ignore[misc]  # grpc is untyped
    """Three tasks per job, listed out of order; sandbox from `World.sandbox`."""

    def __init__(self, world: World) -> None:
        self.w = world

    def _task(self, instance: int, state: str) -> Any:
        runtime = task_pb2.RuntimeInfo(state=state, host="host-a", startTime="2019-05-01T10:00:00Z",
                                       completionTime="2019-05-01T10:01:05Z", message=f"msg{instance}")
        return task_pb2.TaskInfo(instanceId=instance, jobId=peloton_pb2.JobID(value=JOB),
                                 config=task_pb2.TaskConfig(name=f"task{instance}"), runtime=runtime)

    def List(self, request: Any, context: Any) -> Any:
        self.w.record("TaskManager.List", request, context)
        if request.jobId.value != JOB:
            err = errors_pb2.JobNotFound(id=request.jobId, message=f"job {request.jobId.value} not found")
            return task_pb2.ListResponse(notFound=err)
        tasks = {i: self._task(i, s) for i, s in ((2, "RUNNING"), (0, "SUCCEEDED"), (1, "FAILED"))}
        return task_pb2.ListResponse(result=task_pb2.ListResponse.Result(value=tasks))

    def Get(self, request: Any, context: Any) -> Any:
        self.w.record("TaskManager.Get", request, context)
        if request.instanceId >= 3:
            err = task_pb2.InstanceIdOutOfRange(jobId=request.jobId, instanceCount=3)
            return task_pb2.GetResponse(outOfRange=err)
        return task_pb2.GetResponse(result=self._task(request.instanceId, "RUNNING"))

    def Start(self, request: Any, context: Any) -> Any:
        self.w.record("TaskManager.Start", request, context)
        return task_pb2.StartResponse(startedInstanceIds=[0, 1])

    def Stop(self, request: Any, context: Any) -> Any:
        self.w.record("TaskManager.Stop", request, context)
        return task_pb2.StopResponse(stoppedInstanceIds=[0, 1, 2])

    def BrowseSandbox(self, request: Any, context: Any) -> Any:
        self.w.record("TaskManager.BrowseSandbox", request, context)
        host, port, paths = self.w.sandbox
        return task_pb2.BrowseSandboxResponse(hostname=host, port=port, paths=paths)

    def GetPodEvents(self, request: Any, context: Any) -> Any:
        self.w.record("TaskManager.GetPodEvents", request, context)
        event = task_pb2.PodEvent(actualState="RUNNING", goalState="SUCCEEDED", hostname="host-a",
                                  timestamp="2019-05-01T10:00:00Z", message="started")
        event.taskId.value = f"{JOB}-0-1"
        return task_pb2.GetPodEventsResponse(result=[event])


class FakeHostService(host_svc_pb2_grpc.HostServiceServicer):  # type: ignore[misc]  # grpc is untyped
    """Hosts `host-a` (UP) and `host-b` (DOWN)."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.hosts = [host_pb2.HostInfo(hostname="host-a", ip="10.0.0.1", state=host_pb2.HOST_STATE_UP,
                                        current_pool="shared"),
                      host_pb2.HostInfo(hostname="host-b", ip="10.0.0.2", state=host_pb2.HOST_STATE_DOWN)]

    def QueryHosts(self, request: Any, context: Any) -> Any:
        self.w.record("HostService.QueryHosts", request, context)
        wanted = set(request.host_states)
        return host_svc_pb2.QueryHostsResponse(
            host_infos=[h for h in self.hosts if not wanted or h.state in wanted])

    def StartMaintenance(self, request: Any, context: Any) -> Any:
        self.w.record("HostService.StartMaintenance", request, context)
        if request.hostname not in {h.hostname for h in self.hosts}:
            raise NotFound(f"host {request.hostname} not found")
        return host_svc_pb2.StartMaintenanceResponse(hostname=request.hostname)


class FakeUpdateService(update_svc_pb2_grpc.UpdateServiceServicer):  # type: ignore[misc]  # grpc is untyped
    """CreateUpdate answers `upd-1`; GetUpdate follows `World.update_script`."""

    def __init__(self, world: World) -> None:
        self.w = world

    def CreateUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.CreateUpdate", request, context)
        if request.updateConfig.batchSize == 0:
            raise InvalidArgument("updateConfig.batchSize: must be > 0", field="updateConfig.batchSize")
        return update_svc_pb2.CreateUpdateResponse(updateID=peloton_pb2.UpdateID(value="upd-1"))

    def GetUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.GetUpdate", request, context)
        state, done, failed, left = _step(self.w.update_script or [("SUCCEEDED", 0, 0, 0)])
        status = update_pb2.UpdateStatus(state=state, numTasksDone=done,
                                         numTasksFailed=failed, numTasksRemaining=left)
        return update_svc_pb2.GetUpdateResponse(updateInfo=update_pb2.UpdateInfo(
            updateId=request.updateId, status=status))

    def ListUpdates(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.ListUpdates", request, context)
        status = update_pb2.UpdateStatus(state=update_pb2.ROLLING_FORWARD, numTasksDone=2,
                                         numTasksRemaining=4)
        return update_svc_pb2.ListUpdatesResponse(updateInfo=[update_pb2.UpdateInfo(
            updateId=peloton_pb2.UpdateID(value="upd-1"), status=status)])

    def PauseUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.PauseUpdate", request, context)
        return update_svc_pb2.PauseUpdateResponse()

    def ResumeUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.ResumeUpdate", request, context)
        return update_svc_pb2.ResumeUpdateResponse()

    def AbortUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.AbortUpdate", request, context)
        return update_svc_pb2.AbortUpdateResponse()

    def RollbackUpdate(self, request: Any, context: Any) -> Any:
        self.w.record("UpdateService.RollbackUpdate", request, context)
        if request.updateId.value != "upd-1":
            raise NotFound(f"update {request.updateId.value} not found")
        return update_svc_pb2.RollbackUpdateResponse()


def stream_of(items: list[Any]) -> Iterator[Any]:
    """Helper for streaming fakes."""
    yield from items
