"""v0 UpdateService (`peloton.api.v0.update.svc.UpdateService`): rolling updates of service jobs.

A v0 update is an UPDATE workflow (see peloton.jobmgr.workflows), so it
is the same object the v1alpha API shows; updates are named by id here.
CreateUpdate compares the config's `changeLog.version` with the job's
current configuration version (INVALID_ARGUMENT "invalid job configuration
version" when stale, as Peloton).  Pause, resume, abort and rollback act
on the named update only while it is the job's active workflow (Peloton
applied them to whatever workflow the job had).  RollbackUpdate, which
Peloton left UNIMPLEMENTED, rolls the update back to the config it
started from.  ListUpdates honours `limit` (Peloton ignored it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from peloton.api.convert import v0_job
from peloton.api.convert.common import job_id_from_wire
from peloton.api.convert.v0_update import (
    update_info_to_v0,
    update_spec_from_v0,
    update_state_to_v0,
    update_status_to_v0,
)
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2 as pb
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2_grpc as pb_grpc
from peloton.core.errors import FailedPrecondition, InvalidArgument, NotFound
from peloton.core.model.ids import validate_uuid
from peloton.core.model.update import UpdateInfo
from peloton.core.states import JobType, WorkflowType
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.workflows import WorkflowOps


def _opaque(request: Any) -> str | None:
    return str(request.opaque_data.data) if request.HasField("opaque_data") else None


class UpdateServicer(pb_grpc.UpdateServiceServicer):  # type: ignore[misc]
    """Create, read and steer v0 updates."""

    def __init__(self, cache: JobCache, jobs: JobOps, workflows: WorkflowOps) -> None:
        self.cache = cache
        self.jobs = jobs
        self.workflows = workflows

    def _update(self, request: Any) -> UpdateInfo:
        if not request.updateId.value:
            raise InvalidArgument("no update ID provided", field="updateId")
        return self.workflows.get(validate_uuid(request.updateId.value, "updateId"))

    def _active(self, request: Any) -> UpdateInfo:
        """The named update, which must be its job's active workflow."""
        update = self._update(request)
        current = self.workflows.job(update.job_id).update
        if current is None or current.update_id != update.update_id or not update.state.active:
            raise FailedPrecondition(
                f"update {update.update_id} is not the active workflow of job {update.job_id} "
                f"(it is {update.state.value})", field="updateId")
        return update

    def CreateUpdate(self, request: pb.CreateUpdateRequest, context: Any) -> pb.CreateUpdateResponse:
        job_id = job_id_from_wire(request.jobId.value, "jobId")
        try:
            old, runtime = self.jobs.get(job_id)
        except NotFound:
            raise NotFound(f"job not found: {job_id}", field="jobId") from None
        if old.type is not JobType.SERVICE:
            raise InvalidArgument("job must be of type service", field="jobId")
        config = request.jobConfig
        if not config.HasField("changeLog"):
            raise InvalidArgument("missing changelog in job configuration",
                                  field="jobConfig.changeLog")
        if config.changeLog.version != old.version:
            raise InvalidArgument(
                f"invalid job configuration version {config.changeLog.version}: job {job_id} is "
                f"at configuration version {old.version}", field="jobConfig.changeLog.version")
        spec = v0_job.job_spec_from_v0(config)
        if spec.type is not old.type:
            raise InvalidArgument("job type is immutable", field="jobConfig.type")
        spec = dataclasses.replace(spec, respool_id=spec.respool_id or old.respool_id)
        update = self.workflows.create(
            job_id, WorkflowType.UPDATE, update_spec_from_v0(request.updateConfig),
            new_spec=spec, version=runtime.entity_version(), opaque_data=_opaque(request) or "")
        out = pb.CreateUpdateResponse()
        out.updateID.value = update.update_id
        return out

    def GetUpdate(self, request: pb.GetUpdateRequest, context: Any) -> pb.GetUpdateResponse:
        update = self._update(request)
        out = pb.GetUpdateResponse()
        if request.statusOnly:
            out.updateInfo.updateId.value = update.update_id
            out.updateInfo.status.CopyFrom(update_status_to_v0(update))
        else:
            out.updateInfo.CopyFrom(update_info_to_v0(update))
        return out

    def ListUpdates(self, request: pb.ListUpdatesRequest, context: Any) -> pb.ListUpdatesResponse:
        if not request.jobID.value:
            raise InvalidArgument("no job ID provided", field="jobID")
        if request.limit < 0:
            raise InvalidArgument(f"limit must be >= 0, got {request.limit}", field="limit")
        updates = self.workflows.for_job(job_id_from_wire(request.jobID.value, "jobID"),
                                         request.limit)
        return pb.ListUpdatesResponse(updateInfo=[update_info_to_v0(u) for u in updates])

    def PauseUpdate(self, request: pb.PauseUpdateRequest, context: Any) -> pb.PauseUpdateResponse:
        update = self._active(request)
        self.workflows.pause(update.job_id, opaque_data=_opaque(request))
        return pb.PauseUpdateResponse()

    def ResumeUpdate(self, request: pb.ResumeUpdateRequest,
                     context: Any) -> pb.ResumeUpdateResponse:
        update = self._active(request)
        self.workflows.resume(update.job_id, opaque_data=_opaque(request))
        return pb.ResumeUpdateResponse()

    def AbortUpdate(self, request: pb.AbortUpdateRequest, context: Any) -> pb.AbortUpdateResponse:
        # softAbort is ignored, as in Peloton: an abort always leaves instances as they are.
        update = self._active(request)
        self.workflows.abort(update.job_id, opaque_data=_opaque(request))
        return pb.AbortUpdateResponse()

    def RollbackUpdate(self, request: pb.RollbackUpdateRequest,
                       context: Any) -> pb.RollbackUpdateResponse:
        update = self._active(request)
        if update.rollback:
            raise FailedPrecondition(f"update {update.update_id} is already rolling back",
                                     field="updateId")
        self.workflows.rollback(update.job_id, update.update_id)
        return pb.RollbackUpdateResponse()

    def GetUpdateCache(self, request: pb.GetUpdateCacheRequest,
                       context: Any) -> pb.GetUpdateCacheResponse:
        update = self._update(request)
        job = self.cache.get(update.job_id)
        cached = job.update if job is not None else None
        if cached is None or cached.update_id != update.update_id:
            raise NotFound(f"update {update.update_id} is not in the cache", field="updateId")
        out = pb.GetUpdateCacheResponse(
            state=update_state_to_v0(cached.state),
            instancesTotal=sorted({*cached.instances_added, *cached.instances_updated,
                                   *cached.instances_removed}),
            instancesDone=list(cached.instances_done),
            instancesCurrent=list(cached.instances_current),
            instancesAdded=list(cached.instances_added),
            instancesUpdated=list(cached.instances_updated),
            instancesFailed=list(cached.instances_failed))
        out.jobId.value = cached.job_id
        return out
