"""v0 TaskManager servicer (`peloton.api.v0.task.TaskManager`, also `peloton.api.task.TaskManager`).

Errors are answered as Peloton's pkg/jobmgr/tasksvc/handler.go answers them
(tests/unit/jobmgr_servicers/test_error_parity_v0_tasks.py lists every case):
an unknown job is a typed error in the reply (`notFound`, with Peloton's
text, which embeds Go's rendering of the id and of its storage error) for
Get, List, Query, Start, Stop and BrowseSandbox; Get of an instance the job
does not have is NOT_FOUND "task:<job>-<instance> not found".  Get answers
the current run in `result` and, in `results`, every run of the instance
that ended (each terminal pod event, newest first), as Peloton; Start of the
tasks of a terminal batch job is INVALID_ARGUMENT; Restart of an unknown job
and GetPodEvents of one with no events answer OK with nothing in them, as
Peloton's do; Refresh and GetCache answer NOT_FOUND statuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from peloton.api import peloton_texts as texts
from peloton.api.convert import v0_job, v0_task_runtime
from peloton.api.convert.common import run_of
from peloton.api.gen.peloton.api.v0.task import task_pb2, task_pb2_grpc
from peloton.common.slices import Slicer
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.task import TaskRuntime
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import JobType
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.queries import QueryRefused, select_tasks
from peloton.jobmgr.servicers.waiting import waiting_reasons, with_reasons
from peloton.jobmgr.tasks import TaskOps
from peloton.storage import ReadOnlyStore

#: Largest instance range end a client may send ("all instances").
ALL = 2**31 - 1


_Reply = TypeVar("_Reply", task_pb2.StartResponse, task_pb2.StopResponse)
_RangeAction = Callable[[str, Sequence[tuple[int, int]]], tuple[list[int], list[int]]]


def _on_ranges(out: _Reply, done_field: str, action: _RangeAction, request: Any) -> _Reply:
    """Start or Stop the request's instance ranges: the instances acted on go in `done_field`,
    the rest in invalidInstanceIds; an unknown job is the typed notFound error."""
    try:
        done, invalid = action(request.jobId.value, _ranges(request.ranges))
    except (NotFound, InvalidArgument) as exc:
        if isinstance(exc, InvalidArgument) and exc.field not in ("id", "job_id", "jobId"):
            raise
        _not_found(out.error.notFound, request.jobId.value, _cached_config_text(
            request.jobId.value))
        return out
    getattr(out, done_field).extend(done)
    out.invalidInstanceIds.extend(invalid)
    return out


def _not_found(field: Any, job_id: str, message: str) -> None:
    field.id.value = job_id
    field.message = message


def _cached_config_text(job_id: str) -> str:
    """Peloton's text when its job cache cannot load an unknown job (Start, Stop)."""
    return texts.yarpc_text("not-found", texts.job_runtime_not_found(job_id))


def _config_text(job_id: str) -> str:
    """Peloton's text when it cannot read an unknown job's config (Get, BrowseSandbox)."""
    return (f"job {texts.go_id(job_id)} not found, Failed to get Job Runtime: "
            f"{texts.yarpc_text('not-found', texts.job_runtime_not_found(job_id))}")


def _ranges(ranges: Any) -> list[tuple[int, int]]:
    return [(r.__getattribute__("from"), r.to) for r in ranges]


class TaskManagerServicer(task_pb2_grpc.TaskManagerServicer):  # type: ignore[misc]
    """Task API of Peloton v0."""

    def __init__(self, cache: JobCache, store: ReadOnlyStore, resmgr: ResourceManagerPort,
                 hostmgr: HostManagerPort, jobs: JobOps, tasks: TaskOps) -> None:
        self.cache = cache
        self.store = store
        #: For why waiting tasks wait (servicers/waiting.py).
        self.resmgr, self.hostmgr = resmgr, hostmgr
        self.jobs = jobs
        self.tasks = tasks

    def _info(self, job_id: str, instance: int, rt: TaskRuntime) -> task_pb2.TaskInfo:
        spec = self._job_spec(job_id, rt.config_version)
        config = v0_job.task_config_for_instance(spec, instance)
        return v0_task_runtime.task_info_with_config(job_id, instance, config, rt)

    def _job_spec(self, job_id: str, version: int) -> Any:
        job = self.cache.get(job_id)
        if job is not None and version in job.specs:
            return job.specs[version]
        return self.store.get_job_config(job_id, version or None)

    def _job(self, job_id: str) -> tuple[JobSpec, JobRuntime] | None:
        """The job's config and runtime; None if there is no such job (or the id is not one)."""
        try:
            return self.jobs.get(job_id)
        except (NotFound, InvalidArgument):
            return None

    def _explained(self, job_id: str, rows: list[tuple[int, TaskRuntime]]
                   ) -> list[tuple[int, TaskRuntime]]:
        """`rows` with the reason every waiting task waits (waiting.py)."""
        reasons = waiting_reasons(self.resmgr, self.hostmgr, job_id, rows,
                                  lambda version: self._job_spec(job_id, version))
        return with_reasons(rows, reasons)

    def Get(self, request: task_pb2.GetRequest, context: Any) -> task_pb2.GetResponse:
        out = task_pb2.GetResponse()
        job_id = request.jobId.value
        found = self._job(job_id)
        if found is None:
            _not_found(out.notFound, job_id, _config_text(job_id))
            return out
        spec, _runtime = found
        rts = self.tasks.runtimes(job_id, [request.instanceId])
        if request.instanceId >= spec.instance_count or request.instanceId not in rts:
            raise NotFound(f"task:{job_id}-{request.instanceId} not found", field="instanceId")
        [(_, rt)] = self._explained(job_id, [(request.instanceId, rts[request.instanceId])])
        info = self._info(job_id, request.instanceId, rt)
        out.result.CopyFrom(info)
        # Every run that ended, newest first, from the instance's pod events (Peloton's
        # getPodEvents walk over all runs, then getTerminalEvents).
        for event in self.tasks.events(job_id, request.instanceId):
            if event.state.terminal:
                out.results.append(v0_task_runtime.ended_run_to_v0(event, info.config))
        return out

    def List(self, request: task_pb2.ListRequest, context: Any) -> task_pb2.ListResponse:
        out = task_pb2.ListResponse()
        job_id = request.jobId.value
        lo = getattr(request.range, "from")
        hi = request.range.to if request.HasField("range") and request.range.to else ALL
        if self._job(job_id) is not None:
            rows = [(i, rt) for i, rt in sorted(self.tasks.runtimes(job_id).items())
                    if lo <= i < hi]
            tick = Slicer(every=8)  # 800 tasks with 60 KiB configs: a 49 MB reply
            for inst, rt in self._explained(job_id, rows):
                tick()
                out.result.value[inst].CopyFrom(self._info(job_id, inst, rt))
        if not out.result.value:
            # Peloton answers "no task in range" (unknown job included) with this, as it is.
            _not_found(out.notFound, job_id, "err= <nil>")
        return out

    def Query(self, request: task_pb2.QueryRequest, context: Any) -> task_pb2.QueryResponse:
        out = task_pb2.QueryResponse()
        job_id = request.jobId.value
        if self._job(job_id) is None:
            _not_found(out.error.notFound, job_id, (
                f"Failed to find job with id {texts.go_id(job_id)}, err="
                f"{texts.yarpc_text('not-found', texts.job_runtime_not_found(job_id))}"))
            return out
        try:
            page, total = select_tasks(
                sorted(self.tasks.runtimes(job_id).items()),
                v0_task_runtime.task_query_from_v0(request.spec),
                lambda row: self.tasks.spec(job_id, row[0], row[1].config_version).name)
        except QueryRefused as exc:
            _not_found(out.error.notFound, job_id, f"err= {exc.message}")
            return out
        for inst, rt in self._explained(job_id, page):
            out.records.append(self._info(job_id, inst, rt))
        out.pagination.offset = request.spec.pagination.offset
        out.pagination.limit = request.spec.pagination.limit
        out.pagination.total = total
        return out

    def Start(self, request: task_pb2.StartRequest, context: Any) -> task_pb2.StartResponse:
        found = self._job(request.jobId.value)
        if found is not None and found[0].type is JobType.BATCH and found[1].state.terminal:
            raise InvalidArgument(texts.TERMINATED_JOB_START, field="jobId")
        return _on_ranges(task_pb2.StartResponse(), "startedInstanceIds", self.tasks.start,
                          request)

    def Stop(self, request: task_pb2.StopRequest, context: Any) -> task_pb2.StopResponse:
        return _on_ranges(task_pb2.StopResponse(), "stoppedInstanceIds", self.tasks.stop,
                          request)

    def Restart(self, request: task_pb2.RestartRequest, context: Any) -> task_pb2.RestartResponse:
        if self._job(request.jobId.value) is None:
            return task_pb2.RestartResponse()  # Peloton restarts the no tasks it finds: OK
        self.tasks.restart(request.jobId.value, _ranges(request.ranges))
        return task_pb2.RestartResponse()

    def Refresh(self, request: task_pb2.RefreshRequest, context: Any) -> task_pb2.RefreshResponse:
        job_id = request.jobId.value
        found = self._job(job_id)
        if found is None:
            raise NotFound(texts.JOB_NOT_FOUND, field="jobId")
        if request.HasField("range"):
            lo, hi = getattr(request.range, "from"), min(request.range.to, found[0].instance_count)
            if not any(lo <= i < hi for i in self.tasks.runtimes(job_id)):
                raise NotFound(texts.TASKS_NOT_FOUND, field="range")
        self.jobs.refresh(job_id)
        return task_pb2.RefreshResponse()

    def GetCache(self, request: task_pb2.GetCacheRequest,
                 context: Any) -> task_pb2.GetCacheResponse:
        job = self.cache.get(request.jobId.value)
        if job is None:
            raise NotFound(texts.JOB_NOT_IN_CACHE, field="jobId")
        if job.get_task(request.instanceId) is None:
            raise NotFound(texts.TASK_NOT_IN_CACHE, field="instanceId")
        out = task_pb2.GetCacheResponse()
        rt = job.task(request.instanceId)
        out.runtime.CopyFrom(v0_task_runtime.task_runtime_to_v0(job.job_id, request.instanceId,
                                                                rt))
        return out

    def BrowseSandbox(self, request: task_pb2.BrowseSandboxRequest,
                      context: Any) -> task_pb2.BrowseSandboxResponse:
        out = task_pb2.BrowseSandboxResponse()
        job_id = request.jobId.value
        found = self._job(job_id)
        if found is None:
            _not_found(out.error.notFound, job_id, _config_text(job_id))
            return out
        spec = found[0]
        if request.instanceId >= spec.instance_count:
            out.error.outOfRange.jobId.value = job_id
            out.error.outOfRange.instanceCount = spec.instance_count
            return out
        run = run_of(request.taskId, "taskId") if request.taskId else None
        try:
            address, run_id, files = self.tasks.sandbox(job_id, request.instanceId, run)
        except InvalidArgument:
            out.error.notRunning.message = "taskinfo does not have hostname or agentID"
            return out
        except NotFound as exc:
            out.error.failure.message = exc.message
            return out
        host, _, port = address.rpartition(":")
        out.hostname = host or address
        out.port = port
        # Paths relative to the agent's sandboxes directory, which its file server accepts.
        out.paths.extend(f"{run_id}/{name}" for name, _ in files)
        return out

    def GetPodEvents(self, request: task_pb2.GetPodEventsRequest,
                     context: Any) -> task_pb2.GetPodEventsResponse:
        out = task_pb2.GetPodEventsResponse()
        run = run_of(request.runId, "runId") if request.runId else None
        try:
            events = self.tasks.events(request.jobId.value, request.instanceId, run,
                                       request.limit)
        except (NotFound, InvalidArgument):
            return out  # Peloton reads the events it has: none for an unknown job
        out.result.extend(v0_task_runtime.pod_event_to_v0(ev) for ev in events)
        return out

    def DeletePodEvents(self, request: task_pb2.DeletePodEventsRequest,
                        context: Any) -> task_pb2.DeletePodEventsResponse:
        self.tasks.delete_events(request.jobId.value, request.instanceId, request.runId)
        return task_pb2.DeletePodEventsResponse()
