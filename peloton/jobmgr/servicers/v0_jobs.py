"""v0 JobManager servicer (`peloton.api.v0.job.JobManager`, also at `peloton.api.job.JobManager`).

Peloton's v0 API reports expected failures inside the response (`error`
sub-messages) and everything else as a gRPC status; this servicer does
the same: the typed v0 errors for the cases Peloton types, and the one
error mapping of service_registry for the rest.

Restart, Start and Stop of a service job are RESTART, START and STOP
workflows over the requested instance ranges ([from, to), clamped to the
job; none = all), `batchSize` at a time, as Peloton's
createNonUpdateWorkflow: `resourceVersion` is compared with the job's
configuration version (INVALID_ARGUMENT "invalid job configuration
version" when stale; 0 = the current one, which Peloton refused), and the
reply carries the workflow's id and the configuration version it creates.
A Stop without ranges and without resourceVersion stops the whole job of
any type (goal KILLED), as before; batch jobs have no workflows (use
TaskManager.Start/Stop/Restart for their tasks).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from peloton.api.convert import v0_job
from peloton.api.convert.common import job_id_from_wire
from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2, job_pb2_grpc
from peloton.core.errors import AlreadyExists, InvalidArgument, NotFound
from peloton.core.model.job import JobSpec
from peloton.core.model.update import UpdateSpec
from peloton.core.ports import ResourceManagerPort
from peloton.core.states import JobType, WorkflowType
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.queries import job_query
from peloton.jobmgr.workflows import WorkflowOps


def _job_id(msg: peloton_pb2.JobID) -> str:
    return msg.value


class JobManagerServicer(job_pb2_grpc.JobManagerServicer):  # type: ignore[misc]
    """Batch job API of Peloton v0."""

    def __init__(self, cache: JobCache, resmgr: ResourceManagerPort, jobs: JobOps,
                 workflows: WorkflowOps) -> None:
        self.cache = cache
        self.resmgr = resmgr
        self.jobs = jobs
        self.workflows = workflows

    def Create(self, request: job_pb2.CreateRequest, context: Any) -> job_pb2.CreateResponse:
        out = job_pb2.CreateResponse()
        out.jobId.value = request.id.value
        try:
            spec = v0_job.job_spec_from_v0(request.config)
            if request.config.respoolID.value:
                spec = dataclasses.replace(spec, respool_id=request.config.respoolID.value)
            job_id = self.jobs.create(spec, request.id.value)
        except AlreadyExists as exc:
            out.error.alreadyExists.id.value = request.id.value
            out.error.alreadyExists.message = exc.message
            return out
        except (InvalidArgument, NotFound) as exc:
            if exc.field == "id":
                out.error.invalidJobId.id.value = request.id.value
                out.error.invalidJobId.message = exc.message
            else:
                out.error.invalidConfig.id.value = request.id.value
                out.error.invalidConfig.message = exc.message
            return out
        out.jobId.value = job_id
        return out

    def Get(self, request: job_pb2.GetRequest, context: Any) -> job_pb2.GetResponse:
        out = job_pb2.GetResponse()
        try:
            spec, runtime = self.jobs.get(_job_id(request.id))
        except NotFound as exc:
            out.error.notFound.id.value = request.id.value
            out.error.notFound.message = exc.message
            return out
        out.jobInfo.CopyFrom(v0_job.job_info_to_v0(request.id.value, spec, runtime))
        return out

    def Query(self, request: job_pb2.QueryRequest, context: Any) -> job_pb2.QueryResponse:
        out = job_pb2.QueryResponse()
        out.spec.CopyFrom(request.spec)
        try:
            query = job_query(self.resmgr, v0_job.job_query_from_v0(request.spec,
                                                                 request.respoolID.value))
        except NotFound as exc:
            out.error.invalidRespool.respoolID.value = request.respoolID.value
            out.error.invalidRespool.message = exc.message
            return out
        result = self.jobs.query(query)
        for summary in result.jobs:
            if request.summaryOnly:
                out.results.append(v0_job.job_summary_to_v0(summary))
            else:
                spec, runtime = self.jobs.get(summary.job_id)
                out.records.append(v0_job.job_info_to_v0(summary.job_id, spec, runtime))
                out.results.append(v0_job.job_summary_to_v0(summary))
        out.pagination.offset = query.offset
        out.pagination.limit = query.limit or 0
        out.pagination.total = result.total
        return out

    def Delete(self, request: job_pb2.DeleteRequest, context: Any) -> job_pb2.DeleteResponse:
        out = job_pb2.DeleteResponse()
        try:
            self.jobs.delete(_job_id(request.id))
        except NotFound as exc:
            out.error.notFound.id.value = request.id.value
            out.error.notFound.message = exc.message
        return out

    def Update(self, request: job_pb2.UpdateRequest, context: Any) -> job_pb2.UpdateResponse:
        out = job_pb2.UpdateResponse()
        out.id.value = request.id.value
        try:
            spec: JobSpec = v0_job.job_spec_from_v0(request.config)
            version = self.jobs.add_instances(request.id.value, spec)
        except NotFound as exc:
            out.error.jobNotFound.id.value = request.id.value
            out.error.jobNotFound.message = exc.message
            return out
        except InvalidArgument as exc:
            if exc.field == "id":
                out.error.invalidJobId.id.value = request.id.value
                out.error.invalidJobId.message = exc.message
            else:
                out.error.invalidConfig.id.value = request.id.value
                out.error.invalidConfig.message = exc.message
            return out
        out.message = f"added instances; job is at configuration version {version}"
        return out

    def Refresh(self, request: job_pb2.RefreshRequest, context: Any) -> job_pb2.RefreshResponse:
        self.jobs.refresh(_job_id(request.id))
        return job_pb2.RefreshResponse()

    def GetCache(self, request: job_pb2.GetCacheRequest, context: Any) -> job_pb2.GetCacheResponse:
        job = self.cache.get(_job_id(request.id))
        if job is None:
            raise NotFound(f"job {request.id.value} is not in the cache", field="id")
        out = job_pb2.GetCacheResponse()
        out.config.CopyFrom(v0_job.job_config_to_v0(job.spec))
        out.runtime.CopyFrom(v0_job.job_runtime_to_v0(job.runtime))
        return out

    def GetActiveJobs(self, request: job_pb2.GetActiveJobsRequest,
                      context: Any) -> job_pb2.GetActiveJobsResponse:
        out = job_pb2.GetActiveJobsResponse()
        for job_id in self.jobs.active():
            out.ids.add().value = job_id
        return out

    def _workflow(self, kind: WorkflowType, request: Any, batch_size: int) -> tuple[str, int]:
        """Start a RESTART/START/STOP workflow; (update id, new configuration version)."""
        job_id = job_id_from_wire(request.id.value, "id")
        spec, runtime = self.jobs.get(job_id)
        if spec.type is not JobType.SERVICE:
            raise InvalidArgument(f"{kind.value} supported only for service jobs", field="id")
        if request.resourceVersion and request.resourceVersion != spec.version:
            raise InvalidArgument(
                f"invalid job configuration version {request.resourceVersion}: job {job_id} is "
                f"at configuration version {spec.version}", field="resourceVersion")
        instances = sorted({i for r in request.ranges
                            for i in range(getattr(r, "from"), min(r.to, spec.instance_count))})
        update = self.workflows.create(job_id, kind, UpdateSpec(batch_size=batch_size),
                                       version=runtime.entity_version(),
                                       instances=instances if request.ranges else None)
        return update.update_id, update.config_version

    def Restart(self, request: job_pb2.RestartRequest, context: Any) -> job_pb2.RestartResponse:
        update_id, version = self._workflow(WorkflowType.RESTART, request,
                                            request.restartConfig.batchSize)
        out = job_pb2.RestartResponse(resourceVersion=version)
        out.updateID.value = update_id
        return out

    def Start(self, request: job_pb2.StartRequest, context: Any) -> job_pb2.StartResponse:
        update_id, version = self._workflow(WorkflowType.START, request,
                                            request.startConfig.batchSize)
        out = job_pb2.StartResponse(resourceVersion=version)
        out.updateID.value = update_id
        return out

    def Stop(self, request: job_pb2.StopRequest, context: Any) -> job_pb2.StopResponse:
        if not request.ranges and not request.resourceVersion:
            self.jobs.stop(_job_id(request.id))
            return job_pb2.StopResponse()
        update_id, version = self._workflow(WorkflowType.STOP, request,
                                            request.stopConfig.batchSize)
        out = job_pb2.StopResponse(resourceVersion=version)
        out.updateID.value = update_id
        return out
