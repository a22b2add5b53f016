"""v0 UpdateService (`peloton.api.v0.update.svc.UpdateService`): rolling updates of service jobs.

A v0 update is an UPDATE workflow (see peloton.jobmgr.workflows), so it
is the same object the v1alpha API shows; updates are named by id here.
Errors are Peloton's (pkg/jobmgr/updatesvc/handler.go; every case in
tests/unit/jobmgr_servicers/test_error_parity_v0_updates.py): CreateUpdate
checks, in Peloton's order, the job id (INVALID_ARGUMENT "JobID must be of
UUID format"), in-place (UNIMPLEMENTED), the job (NOT_FOUND "job not
found"; UNAVAILABLE while it is still being created; a service), the
changelog, type and pool (immutable), then the config version
(INVALID_ARGUMENT "invalid job configuration version" when stale).  An
update id that is missing is INVALID_ARGUMENT "no update ID provided", an
unknown one NOT_FOUND "update not found".  Pause, resume and abort act, as
Peloton's, on the workflow the named update's job has now (whichever it
is; a job without one is NOT_FOUND "no workflow found", one that ended is
left as it is and the call answers OK).  RollbackUpdate, which Peloton left
UNIMPLEMENTED, works here beyond Peloton: it rolls the named update back to
the config it started from, while that update is the job's active workflow.
ListUpdates honours `limit` (Peloton ignored it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from peloton.api import peloton_texts as texts
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
from peloton.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
    Unimplemented,
)
from peloton.core.model.ids import is_uuid
from peloton.core.model.update import UpdateInfo
from peloton.core.states import JobState, JobType, WorkflowType
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.common import with_options
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
            raise InvalidArgument(texts.NO_UPDATE_ID, field="updateId")
        if not is_uuid(request.updateId.value):
            raise NotFound(texts.UPDATE_NOT_FOUND, field="updateId")
        try:
            return self.workflows.get(request.updateId.value.lower())
        except NotFound:
            raise NotFound(texts.UPDATE_NOT_FOUND, field="updateId") from None

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
        if not is_uuid(request.jobId.value):
            raise InvalidArgument(texts.UPDATE_JOB_ID_NOT_UUID, field="jobId")
        job_id = job_id_from_wire(request.jobId.value, "jobId")
        if request.updateConfig.inPlace:
            raise Unimplemented(texts.IN_PLACE_UNSUPPORTED, field="updateConfig.inPlace")
        try:
            old, runtime = self.jobs.get(job_id)
        except NotFound:
            raise NotFound(texts.JOB_NOT_FOUND, field="jobId") from None
        if runtime.state is JobState.INITIALIZED:
            raise Unavailable(texts.PARTIALLY_CREATED)
        if old.type is not JobType.SERVICE:
            raise InvalidArgument(texts.UPDATE_SERVICE_ONLY, field="jobId")
        config = request.jobConfig
        if not config.HasField("changeLog"):
            raise InvalidArgument(texts.MISSING_CHANGELOG, field="jobConfig.changeLog")
        if v0_job.job_type_from_v0(config.type, "jobConfig.type") is not old.type:
            raise InvalidArgument(texts.JOB_TYPE_IMMUTABLE, field="jobConfig.type")
        if config.respoolID.value != old.respool_id:
            raise InvalidArgument(texts.POOL_IMMUTABLE, field="jobConfig.respoolID")
        spec = v0_job.job_spec_from_v0(config)
        if config.changeLog.version != old.version:
            raise InvalidArgument(texts.INVALID_CONFIG_VERSION,
                                  field="jobConfig.changeLog.version")
        spec = dataclasses.replace(spec, respool_id=old.respool_id)
        update = self.workflows.create(
            job_id, WorkflowType.UPDATE, with_options(update_spec_from_v0(request.updateConfig),
                                                      context),
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
            raise InvalidArgument(texts.NO_JOB_ID, field="jobID")
        if request.limit < 0:
            raise InvalidArgument(f"limit must be >= 0, got {request.limit}", field="limit")
        if not is_uuid(request.jobID.value):
            return pb.ListUpdatesResponse()  # Peloton lists the updates it has: none
        try:
            updates = self.workflows.for_job(request.jobID.value.lower(), request.limit)
        except NotFound:
            return pb.ListUpdatesResponse()
        return pb.ListUpdatesResponse(updateInfo=[update_info_to_v0(u) for u in updates])

    def _current(self, request: Any) -> tuple[str, UpdateInfo | None]:
        """The named update's job and that job's current workflow (Peloton's
        getCachedJobWithUpdateID, then the cached job's current workflow)."""
        job_id = self._update(request).job_id
        return job_id, self.workflows.job(job_id).update

    def _steer(self, request: Any, act: Callable[..., str]) -> None:
        """Pause, resume or abort whatever workflow the job has now, as Peloton: none is
        NOT_FOUND "no workflow found", one that ended takes no more changes (OK)."""
        job_id, current = self._current(request)
        if current is None:
            raise NotFound(texts.NO_WORKFLOW_FOUND, field="updateId")
        if current.state.active:
            act(job_id, opaque_data=_opaque(request))

    def PauseUpdate(self, request: pb.PauseUpdateRequest, context: Any) -> pb.PauseUpdateResponse:
        self._steer(request, self.workflows.pause)
        return pb.PauseUpdateResponse()

    def ResumeUpdate(self, request: pb.ResumeUpdateRequest,
                     context: Any) -> pb.ResumeUpdateResponse:
        self._steer(request, self.workflows.resume)
        return pb.ResumeUpdateResponse()

    def AbortUpdate(self, request: pb.AbortUpdateRequest, context: Any) -> pb.AbortUpdateResponse:
        # softAbort is ignored, as in Peloton: an abort always leaves instances as they are.
        self._steer(request, self.workflows.abort)
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
            raise NotFound(texts.UPDATE_NOT_FOUND, field="updateId")
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
