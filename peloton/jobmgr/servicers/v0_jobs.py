"""v0 JobManager servicer (`peloton.api.v0.job.JobManager`, also at `peloton.api.job.JobManager`).

Peloton's v0 API reports some failures inside the response (`error`
sub-messages) and others as a gRPC status; this servicer answers each case
as Peloton's pkg/jobmgr/jobsvc/handler.go does, with its codes and texts
(peloton/api/peloton_texts.py; tests/unit/jobmgr_servicers/
test_error_parity_v0.py lists every case):

* Create: an id that is not a UUID, a pool that is missing, the root, not
  found or not a leaf, a config that does not validate, an existing id: all
  in the body (invalidJobId, invalidConfig, alreadyExists).
* Get: an unknown job is `error.getRuntimeFail` with the storage's text.
* Query: filters, order and pages as Peloton's store (servicers/queries.py);
  a time range missing a bound or with min after max is `error.err`
  ("timestamp: nil Timestamp", "Incorrect timerange"), as is a sort Peloton
  could not do; no spec matches nothing; `pagination` echoes the spec's
  offset and limit with the total; an unknown pool id matches nothing.
* Delete: NOT_FOUND "job not found"; a job not in a terminal state INTERNAL.
* Update: NOT_FOUND for an unknown job, INVALID_ARGUMENT for a terminal one,
  a service, or a config that may not change; the same instance count is a
  no-op (an empty reply).
* Restart, Start and Stop are RESTART, START and STOP workflows over the
  requested instance ranges ([from, to), clamped to the job; none = all),
  `batchSize` at a time, as Peloton's createNonUpdateWorkflow:
  `resourceVersion` must equal the job's configuration version
  (INVALID_ARGUMENT "invalid job configuration version" otherwise, 0
  included), and only service jobs have them (INVALID_ARGUMENT "STOP
  supported only for service jobs"); batch tasks are stopped and started
  with TaskManager.
* Refresh: NOT_FOUND "job not found"; GetCache: NOT_FOUND "Job not found in cache".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc

from peloton.api import peloton_texts as texts
from peloton.api.convert import v0_job
from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2, job_pb2_grpc
from peloton.api.grpc_errors import PelotonStatus
from peloton.core.errors import AlreadyExists, InvalidArgument, NotFound, PelotonError
from peloton.core.model.ids import is_uuid
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.update import UpdateSpec
from peloton.core.ports import ResourceManagerPort
from peloton.core.states import JobType, WorkflowType
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.queries import QueryRefused, job_query
from peloton.jobmgr.workflows import WorkflowOps


def _job_id(msg: peloton_pb2.JobID) -> str:
    return msg.value


def _state_name(runtime: JobRuntime) -> str:
    """The v0 name of a job's state, as Peloton prints it (RUNNING, SUCCEEDED, ...)."""
    return job_pb2.JobState.Name(v0_job.job_state_to_v0(runtime.state))


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
        given = request.id.value
        if given and not is_uuid(given):
            out.error.invalidJobId.id.value = given
            out.error.invalidJobId.message = texts.JOB_ID_NOT_UUID
            return out
        try:
            try:
                spec = v0_job.job_spec_from_v0(request.config)
            except InvalidArgument:
                # A bad pool is the answer before a bad config, as it always was; the pool
                # of a good config is validated by `jobs.create` (one resource manager call
                # per create, not two).
                self.resmgr.validate_pool(request.config.respoolID.value)
                raise
            if request.config.respoolID.value:
                spec = dataclasses.replace(spec, respool_id=request.config.respoolID.value)
            job_id = self.jobs.create(spec, given)
        except AlreadyExists as exc:
            out.jobId.value = given
            out.error.alreadyExists.id.value = given
            out.error.alreadyExists.message = exc.message
            return out
        except (InvalidArgument, NotFound) as exc:
            out.error.invalidConfig.id.value = given
            out.error.invalidConfig.message = exc.message
            return out
        out.jobId.value = job_id
        return out

    def Get(self, request: job_pb2.GetRequest, context: Any) -> job_pb2.GetResponse:
        out = job_pb2.GetResponse()
        try:
            spec, runtime = self.jobs.get(_job_id(request.id))
        except (NotFound, InvalidArgument):
            out.error.getRuntimeFail.id.value = request.id.value
            out.error.getRuntimeFail.message = texts.yarpc_text(
                "not-found", texts.job_runtime_not_found(request.id.value))
            return out
        out.jobInfo.CopyFrom(v0_job.job_info_to_v0(request.id.value, spec, runtime))
        return out

    def Query(self, request: job_pb2.QueryRequest, context: Any) -> job_pb2.QueryResponse:
        out = job_pb2.QueryResponse()
        if not request.HasField("spec"):
            out.pagination.SetInParent()
            return out  # Peloton's store answers a query without a spec with no job
        out.spec.CopyFrom(request.spec)
        spec = v0_job.job_query_from_v0(request.spec, request.respoolID.value)
        pool = spec.respool_id
        if not pool and spec.respool_path:
            # Ours: Peloton ignored this deprecated field (it filtered by respoolID only).
            try:
                pool = self.resmgr.pool_id_for_path(spec.respool_path)
            except (NotFound, InvalidArgument):
                out.pagination.SetInParent()
                return out
        try:
            page = job_query(spec, pool, self.jobs.clock.wall())
        except QueryRefused as exc:
            out.error.err.message = exc.message
            return out
        result = page.answer(self.jobs.query(page.query))
        for summary in result.jobs:
            if not request.summaryOnly:
                try:
                    config, runtime = self.jobs.get(summary.job_id)
                except NotFound:
                    config = None  # deleted since: Peloton skips its record too
                if config is not None:
                    record = out.records.add()
                    record.CopyFrom(v0_job.job_info_to_v0(summary.job_id, config, runtime))
                    record.config.ClearField("instanceConfig")  # as Peloton: Get has them
            out.results.append(v0_job.job_summary_to_v0(summary))
        out.pagination.offset = request.spec.pagination.offset
        out.pagination.limit = request.spec.pagination.limit
        out.pagination.total = result.total
        return out

    def Delete(self, request: job_pb2.DeleteRequest, context: Any) -> job_pb2.DeleteResponse:
        job_id = _job_id(request.id)
        try:
            _, runtime = self.jobs.get(job_id)
        except (NotFound, InvalidArgument):
            raise PelotonStatus(grpc.StatusCode.NOT_FOUND, texts.JOB_NOT_FOUND) from None
        if not runtime.state.terminal:
            raise PelotonStatus(grpc.StatusCode.INTERNAL, texts.job_not_terminal(_state_name(runtime)))
        self.jobs.delete(job_id)
        return job_pb2.DeleteResponse()

    def Update(self, request: job_pb2.UpdateRequest, context: Any) -> job_pb2.UpdateResponse:
        job_id = _job_id(request.id)
        try:
            old, runtime = self.jobs.get(job_id)
        except (NotFound, InvalidArgument):
            raise NotFound(texts.job_runtime_not_found(job_id), field="id") from None
        if runtime.state.terminal:
            raise InvalidArgument(texts.job_terminal(_state_name(runtime)), field="id")
        if old.type is not JobType.BATCH:
            raise InvalidArgument(texts.JOB_UPDATE_BATCH_ONLY, field="config.type")
        try:
            spec: JobSpec = v0_job.job_spec_from_v0(request.config)
        except NotFound as exc:  # a validation rule that looked something up
            raise InvalidArgument(exc.message, field=exc.field) from None
        if spec.instance_count == old.instance_count and _same_fixed_fields(spec, old):
            return job_pb2.UpdateResponse()  # nothing to add: Peloton answers an empty reply
        try:
            self.jobs.add_instances(job_id, spec)
        except NotFound:
            raise NotFound(texts.job_runtime_not_found(job_id), field="id") from None
        out = job_pb2.UpdateResponse(message=texts.added_instances(
            spec.instance_count - old.instance_count))
        out.id.value = job_id
        return out

    def Refresh(self, request: job_pb2.RefreshRequest, context: Any) -> job_pb2.RefreshResponse:
        try:
            self.jobs.refresh(_job_id(request.id))
        except (NotFound, InvalidArgument):
            raise NotFound(texts.JOB_NOT_FOUND, field="id") from None
        return job_pb2.RefreshResponse()

    def GetCache(self, request: job_pb2.GetCacheRequest, context: Any) -> job_pb2.GetCacheResponse:
        job = self.cache.get(_job_id(request.id))
        if job is None:
            raise NotFound(texts.JOB_NOT_IN_CACHE, field="id")
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
        job_id = _job_id(request.id)
        try:
            spec, runtime = self.jobs.get(job_id)
        except (NotFound, InvalidArgument):
            raise NotFound(texts.job_runtime_not_found(job_id), field="id") from None
        if spec.type is not JobType.SERVICE:
            raise InvalidArgument(texts.service_only(kind.value), field="id")
        if request.resourceVersion != spec.version:
            raise InvalidArgument(texts.INVALID_CONFIG_VERSION, field="resourceVersion")
        instances = sorted({i for r in request.ranges
                            for i in range(getattr(r, "from"), min(r.to, spec.instance_count))})
        try:
            update = self.workflows.create(job_id, kind, UpdateSpec(batch_size=batch_size),
                                           version=runtime.entity_version(),
                                           instances=instances if request.ranges else None)
        except PelotonError as exc:
            if "configuration version" in exc.message or "entity version" in exc.message:
                raise InvalidArgument(texts.INVALID_CONFIG_VERSION,
                                      field="resourceVersion") from None
            raise
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
        update_id, version = self._workflow(WorkflowType.STOP, request,
                                            request.stopConfig.batchSize)
        out = job_pb2.StopResponse(resourceVersion=version)
        out.updateID.value = update_id
        return out


def _same_fixed_fields(new: JobSpec, old: JobSpec) -> bool:
    """The fields a v0 Update may not change are unchanged (or not given)."""
    return all(getattr(new, name) == getattr(old, name) or not getattr(new, name)
               for name in ("name", "type", "respool_id", "owning_team", "labels",
                            "ldap_groups"))
