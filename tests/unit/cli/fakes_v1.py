"""Fake v1alpha services (stateless JobService, PodService, WatchService) for CLI tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc as svc_grpc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2, pod_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2, watch_svc_pb2_grpc
from peloton.core.errors import Conflict, InvalidArgument, NotFound
from tests.unit.cli.fakes import JOB, World


@dataclass
class StatelessState:
    """Entity version of JOB and the workflow progress GetJob reports, step by step."""

    version: str = "1-1-1"
    #: (WorkflowState suffix, completed, failed, remaining, workflow version); last repeats.
    workflow_script: list[tuple[str, int, int, int, str]] = field(
        default_factory=lambda: [("SUCCEEDED", 0, 0, 0, "1-1-1")])


def _summary(name: str, version: str, wf: Any = None) -> Any:
    status = stateless_pb2.JobStatus(state=stateless_pb2.JOB_STATE_RUNNING,
                                     creation_time="2019-05-01T10:00:00Z", pod_stats={"POD_STATE_RUNNING": 3},
                                     version=v1.EntityVersion(value=version), workflow_status=wf)
    return stateless_pb2.JobSummary(job_id=v1.JobID(value=JOB), name=name, owning_team="team6",
                                    instance_count=3, status=status)


class FakeJobService(svc_grpc.JobServiceServicer):  # type: ignore[misc]  # grpc is untyped
    """One stateless job, JOB, whose entity version is checked on every write."""

    def __init__(self, world: World, state: StatelessState) -> None:
        self.w = world
        self.s = state

    def _check(self, request: Any) -> None:
        if request.job_id.value != JOB:
            raise NotFound(f"job {request.job_id.value} not found")
        if request.version.value != self.s.version:
            raise Conflict(f"entity version {request.version.value} is stale; job is at {self.s.version}")

    def _bump(self) -> Any:
        major = int(self.s.version.split("-")[0]) + 1
        self.s.version = f"{major}-1-1"
        return v1.EntityVersion(value=self.s.version)

    def CreateJob(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.CreateJob", request, context)
        if request.spec.instance_count == 0:
            raise InvalidArgument("spec.instance_count: must be > 0", field="spec.instance_count")
        return svc.CreateJobResponse(job_id=v1.JobID(value=request.job_id.value or JOB),
                                     version=v1.EntityVersion(value=self.s.version))

    def GetJob(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.GetJob", request, context)
        if request.job_id.value != JOB:
            raise NotFound(f"job {request.job_id.value} not found")
        script = self.s.workflow_script
        state, done, failed, left, version = script.pop(0) if len(script) > 1 else script[0]
        wf = stateless_pb2.WorkflowStatus(
            state="WORKFLOW_STATE_" + state, num_instances_completed=done, num_instances_failed=failed,
            num_instances_remaining=left, version=v1.EntityVersion(value=version))
        info = stateless_pb2.JobInfo(job_id=v1.JobID(value=JOB),
                                     spec=stateless_pb2.JobSpec(name="svc", instance_count=3,
                                                                revision=v1.Revision(version=7)))
        return svc.GetJobResponse(summary=_summary("svc", self.s.version, wf), job_info=info)

    def ReplaceJob(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.ReplaceJob", request, context)
        self._check(request)
        return svc.ReplaceJobResponse(version=self._bump())

    def RestartJob(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.RestartJob", request, context)
        self._check(request)
        return svc.RestartJobResponse(version=self._bump())

    def PauseJobWorkflow(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.PauseJobWorkflow", request, context)
        self._check(request)
        return svc.PauseJobWorkflowResponse(version=self._bump())

    def StartJob(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.StartJob", request, context)
        self._check(request)
        return svc.StartJobResponse(version=self._bump())

    def RefreshJob(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.RefreshJob", request, context)
        if request.job_id.value != JOB:
            raise NotFound(f"job {request.job_id.value} not found")
        return svc.RefreshJobResponse()

    def DeleteJob(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.DeleteJob", request, context)
        self._check(request)
        return svc.DeleteJobResponse()

    def ListJobs(self, request: Any, context: Any) -> Iterator[Any]:
        self.w.record("JobService.ListJobs", request, context)
        yield svc.ListJobsResponse(jobs=[_summary("svc-a", "1-1-1")])
        yield svc.ListJobsResponse(jobs=[_summary("svc-b", "2-1-1")])

    def ListPods(self, request: Any, context: Any) -> Iterator[Any]:
        self.w.record("JobService.ListPods", request, context)
        status = pod_pb2.PodStatus(state=pod_pb2.POD_STATE_RUNNING, host="host-a",
                                   pod_id=v1.PodID(value=f"{JOB}-0-1"))
        yield svc.ListPodsResponse(pods=[pod_pb2.PodSummary(pod_name=v1.PodName(value=f"{JOB}-0"),
                                                            status=status)])

    def QueryJobs(self, request: Any, context: Any) -> Any:
        self.w.record("JobService.QueryJobs", request, context)
        return svc.QueryJobsResponse(records=[_summary("svc", self.s.version)])


class FakePodService(pod_svc_pb2_grpc.PodServiceServicer):  # type: ignore[misc]  # grpc is untyped
    """Pods of JOB; sandbox from `World.sandbox`."""

    def __init__(self, world: World) -> None:
        self.w = world

    def GetPod(self, request: Any, context: Any) -> Any:
        self.w.record("PodService.GetPod", request, context)
        if not request.pod_name.value.startswith(JOB):
            raise NotFound(f"pod {request.pod_name.value} not found")
        status = pod_pb2.PodStatus(state=pod_pb2.POD_STATE_RUNNING, host="host-a")
        return pod_svc_pb2.GetPodResponse(current=pod_pb2.PodInfo(status=status))

    def BrowsePodSandbox(self, request: Any, context: Any) -> Any:
        self.w.record("PodService.BrowsePodSandbox", request, context)
        host, port, paths = self.w.sandbox
        return pod_svc_pb2.BrowsePodSandboxResponse(hostname=host, port=port, paths=paths)


class FakeWatchService(watch_svc_pb2_grpc.WatchServiceServicer):  # type: ignore[misc]  # grpc is untyped
    """Two changes (of pod 0 of JOB for a pod filter, else of JOB), then the stream ends."""

    def __init__(self, world: World) -> None:
        self.w = world

    def Watch(self, request: Any, context: Any) -> Iterator[Any]:
        self.w.record("WatchService.Watch", request, context)
        for revision, state in ((1, pod_pb2.POD_STATE_LAUNCHED), (2, pod_pb2.POD_STATE_RUNNING)):
            if request.HasField("pod_filter"):
                pod = pod_pb2.PodSummary(pod_name=v1.PodName(value=f"{JOB}-0"),
                                         status=pod_pb2.PodStatus(state=state, host="host-a"))
                yield watch_svc_pb2.WatchResponse(watch_id="w-1", revision=revision, pods=[pod])
            else:
                yield watch_svc_pb2.WatchResponse(watch_id="w-1", revision=revision,
                                                  stateless_jobs=[_summary("svc", "1-1-1")])
