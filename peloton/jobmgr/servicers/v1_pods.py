"""v1alpha PodService (`peloton.api.v1alpha.pod.svc.PodService`).

A pod is one instance of a job, named `<job uuid>-<instance>`; each run of
it has a pod id `<job uuid>-<instance>-<run>`.  GetPod returns the current
run and, from the pod's event history, earlier ones: `limit` 1 means the
current run only, N the current and N-1 earlier, 0 all of them.
GetPodEvents without a pod id returns the events of the latest run.
RestartPod with `check_sla` refuses (ABORTED) when the job's
`maximum_unavailable_instances` are already unavailable.

Errors are Peloton's (pkg/jobmgr/podsvc/handler.go; every case in
tests/unit/jobmgr_servicers/test_error_parity_v1_pods.py): a pod name it
cannot parse is INVALID_ARGUMENT "invalid pelotonTaskID <name>" or "unable
to parse instanceID <name>" ("invalid pod name" for RestartPod); a pod that
does not exist is NOT_FOUND "task:<pod> not found", wrapped with the
handler's context where Peloton wraps it.
"""

from __future__ import annotations

from typing import Any

from peloton.api import peloton_texts as texts
from peloton.api.convert.common import run_of
from peloton.api.convert.v1_job import pod_spec_for_instance
from peloton.api.convert.v1_pod_status import (
    pod_event_to_v1,
    pod_info_to_v1,
    pod_status_from_event,
    pod_status_to_v1,
)
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2 as pb
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2_grpc as pb_grpc
from peloton.core.errors import Conflict, InvalidArgument, NotFound
from peloton.core.model.events import PodEvent
from peloton.core.model.ids import RunId, TaskId, is_uuid
from peloton.core.model.task import TaskRuntime
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import JobType, TaskState
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.common import job_spec_at
from peloton.jobmgr.servicers.v1_answers import known_job, wrapped
from peloton.jobmgr.servicers.waiting import waiting_reasons, with_reasons
from peloton.jobmgr.tasks import TaskOps
from peloton.storage import ReadOnlyStore

S = TaskState
#: Length of a job id, the shortest pod name Peloton parses (its util.UUIDLength).
UUID_LENGTH = 36


def _pod(request: Any) -> TaskId:
    """The pod a request names, parsed as Peloton's util.ParseTaskID does."""
    name: str = request.pod_name.value
    job_id, sep, instance = name.rpartition("-")
    if len(name) < UUID_LENGTH or not sep:
        raise InvalidArgument(f"invalid pelotonTaskID {name}", field="pod_name")
    if not instance.isdigit() or int(instance) >= 1 << 32:
        raise InvalidArgument(f"unable to parse instanceID {name}", field="pod_name")
    return TaskId(job_id.lower() if is_uuid(job_id) else job_id, int(instance))


def _task_not_found(task: TaskId) -> NotFound:
    """Peloton's storage text for a pod it has no runtime of."""
    return NotFound(f"task:{task.job_id}-{task.instance} not found", field="pod_name")


def _run(request: Any, task: TaskId) -> int | None:
    """The run a request's pod id names (None if it names none); it must be this pod's."""
    if not request.pod_id.value:
        return None
    run = run_of(request.pod_id.value, "pod_id")
    if RunId.parse(request.pod_id.value).task != task:
        raise InvalidArgument(f"pod_id {request.pod_id.value!r} is not a run of pod {task}",
                              field="pod_id")
    return run


class PodServicer(pb_grpc.PodServiceServicer):  # type: ignore[misc]
    """Start, stop, restart and read pods."""

    def __init__(self, cache: JobCache, store: ReadOnlyStore, resmgr: ResourceManagerPort,
                 hostmgr: HostManagerPort, jobs: JobOps, tasks: TaskOps) -> None:
        self.cache = cache
        self.store = store
        #: For why waiting pods wait (servicers/waiting.py).
        self.resmgr, self.hostmgr = resmgr, hostmgr
        self.jobs = jobs
        self.tasks = tasks

    def _runtime(self, task: TaskId, context: str = "") -> TaskRuntime:
        """The pod's runtime, or Peloton's NOT_FOUND (wrapped under `context` if given)."""
        try:
            _, rt = self.tasks.get(task.job_id, task.instance)
        except (NotFound, InvalidArgument):
            missing = _task_not_found(task)
            raise (wrapped(context, missing) if context else missing) from None
        return rt

    def StartPod(self, request: pb.StartPodRequest, context: Any) -> pb.StartPodResponse:
        task = _pod(request)
        spec, runtime = known_job(self.jobs, task.job_id, "fail to get job config")
        if spec.type is JobType.BATCH and runtime.state.terminal:
            raise InvalidArgument(texts.TERMINATED_JOB_POD_START, field="pod_name")
        rt = self._runtime(task, "fail to add pod in job cache")
        if rt.goal_state is S.DELETED:
            raise InvalidArgument("cannot start a pod going to be deleted", field="pod_name")
        self.tasks.start(task.job_id, [(task.instance, task.instance + 1)])
        return pb.StartPodResponse()

    def StopPod(self, request: pb.StopPodRequest, context: Any) -> pb.StopPodResponse:
        task = _pod(request)
        self._runtime(task)
        self.tasks.stop_one(task.job_id, task.instance)
        return pb.StopPodResponse()

    def RestartPod(self, request: pb.RestartPodRequest, context: Any) -> pb.RestartPodResponse:
        try:
            task = _pod(request)
        except InvalidArgument:
            raise InvalidArgument(texts.POD_NAME_INVALID, field="pod_name") from None
        rt = self._runtime(task)
        if request.check_sla and rt.state is S.RUNNING:
            spec, _ = self.jobs.get(task.job_id)
            limit = spec.sla.maximum_unavailable_instances
            down = sum(1 for i, other in self.tasks.runtimes(task.job_id).items()
                       if i != task.instance and other.state is not S.RUNNING)
            if limit and down >= limit:
                raise Conflict(f"pod restart would violate SLA: {down} of the job's instances "
                               f"are unavailable (maximum_unavailable_instances {limit})")
        self.tasks.restart(task.job_id, [(task.instance, task.instance + 1)])
        return pb.RestartPodResponse()

    def _spec(self, task: TaskId, version: int) -> pod_pb2.PodSpec | None:
        try:
            spec = job_spec_at(self.cache, self.store, task.job_id, version)
        except NotFound:
            return None  # an old config version may have been purged; show the status alone
        return pod_spec_for_instance(spec, task.job_id, task.instance)

    def GetPod(self, request: pb.GetPodRequest, context: Any) -> pb.GetPodResponse:
        task = _pod(request)
        rt = self._runtime(task, "failed to get task runtime")
        [(_, rt)] = with_reasons([(task.instance, rt)], waiting_reasons(
            self.resmgr, self.hostmgr, task.job_id, [(task.instance, rt)],
            lambda version: job_spec_at(self.cache, self.store, task.job_id, version)))
        out = pb.GetPodResponse()
        spec = None if request.status_only else self._spec(task, rt.config_version)
        if spec is not None:
            out.current.CopyFrom(pod_info_to_v1(spec, task.job_id, task.instance, rt))
        else:
            out.current.status.CopyFrom(pod_status_to_v1(task.job_id, task.instance, rt))
        if request.limit == 1 or rt.prev_run_id <= 0:
            return out
        latest: dict[int, PodEvent] = {}
        for event in self.tasks.events(task.job_id, task.instance):  # newest first
            latest.setdefault(event.run_id, event)
        run = rt.prev_run_id
        while run > 0 and run in latest:
            if request.limit and len(out.previous) >= request.limit - 1:
                break
            event = latest[run]
            info = out.previous.add(status=pod_status_from_event(event))
            if not request.status_only:
                old = self._spec(task, event.config_version)
                if old is not None:
                    info.spec.CopyFrom(old)
            run = event.prev_run_id if event.prev_run_id < run else 0
        return out

    def GetPodEvents(self, request: pb.GetPodEventsRequest,
                     context: Any) -> pb.GetPodEventsResponse:
        task = _pod(request)
        run = _run(request, task)
        try:
            events = self.tasks.events(task.job_id, task.instance, run)
        except (NotFound, InvalidArgument):
            events = []  # Peloton reads the events it has: none
        if run is None and events:
            newest = max(e.run_id for e in events)
            events = [e for e in events if e.run_id == newest]
        return pb.GetPodEventsResponse(events=[pod_event_to_v1(e) for e in events])

    def BrowsePodSandbox(self, request: pb.BrowsePodSandboxRequest,
                         context: Any) -> pb.BrowsePodSandboxResponse:
        task = _pod(request)
        self._runtime(task)
        try:
            address, run_id, files = self.tasks.sandbox(task.job_id, task.instance,
                                                        _run(request, task))
        except InvalidArgument as exc:
            if exc.field == "pod_id":
                raise
            raise Conflict(texts.POD_NOT_RUN, field="pod_name") from None  # Peloton's ABORTED
        host, _, port = address.rpartition(":")
        # Paths relative to the agent's sandboxes directory, which its file server accepts.
        return pb.BrowsePodSandboxResponse(hostname=host or address, port=port,
                                           paths=[f"{run_id}/{name}" for name, _ in files])

    def RefreshPod(self, request: pb.RefreshPodRequest, context: Any) -> pb.RefreshPodResponse:
        task = _pod(request)
        self._runtime(task, "fail to get task info")
        self.tasks.refresh(task.job_id, task.instance)
        return pb.RefreshPodResponse()

    def GetPodCache(self, request: pb.GetPodCacheRequest, context: Any) -> pb.GetPodCacheResponse:
        task = _pod(request)
        job = self.cache.get(task.job_id)
        if job is None:
            raise NotFound(texts.V1_JOB_NOT_IN_CACHE, field="pod_name")
        rt = job.get_task(task.instance)
        if rt is None:
            raise NotFound("task not found in cache", field="pod_name")
        out = pb.GetPodCacheResponse(status=pod_status_to_v1(task.job_id, task.instance, rt))
        for label in job.task_spec(task.instance, rt.config_version).labels:
            out.labels.add(key=label.key, value=label.value)
        return out

    def DeletePodEvents(self, request: pb.DeletePodEventsRequest,
                        context: Any) -> pb.DeletePodEventsResponse:
        task = _pod(request)
        run = _run(request, task)
        if run is None:
            raise InvalidArgument("pod_id is required: the run whose events to delete",
                                  field="pod_id")
        self.tasks.delete_events(task.job_id, task.instance, run, from_run=run)
        return pb.DeletePodEventsResponse()
