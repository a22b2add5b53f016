"""v1alpha stateless JobService, the writing half: create, replace, patch, restart, steer, start/stop.

Every mutating call but CreateJob and RefreshJob is a compare-and-set on
the job's entity version `<config>-<desired state>-<workflow>`: a stale
version, or none, fails with ABORTED "unexpected entity version" (as
Peloton's ValidateEntityVersion) and the reply carries the job's new
version.  (Our CLI turns an empty version argument into the current one.)

Errors are Peloton's (pkg/jobmgr/jobsvc/stateless/handler.go): its codes,
and its texts, which wrap the lower error with the handler's context
(v1_answers.py; every case in tests/unit/jobmgr_servicers/
test_error_parity_v1_jobs.py).

CreateJob always creates the job through an UPDATE workflow, as Peloton's
RollingCreate does: `create_spec` paces it (batch size, start paused) and
`opaque_data` is stored with it.  PatchJob, a no-op in Peloton (an empty
reply), works here beyond Peloton: it replaces the top-level fields set in
the request's spec and then rolls like ReplaceJob, with ReplaceJob's answers
(a scalar can only be patched to a non-zero value: proto3 does not tell an
unset zero from an absent one).
"""

from __future__ import annotations

from typing import Any

from peloton.api import peloton_texts as texts
from peloton.api.convert.common import DOC_V1_JOB_SPEC, job_id_from_wire, v1_document
from peloton.api.convert.v1_job import job_spec_from_v1, job_spec_to_v1
from peloton.api.convert.v1_workflow import (
    create_spec_from_v1,
    restart_spec_from_v1,
    update_spec_from_v1,
)
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.core.errors import Conflict, InvalidArgument, NotFound, PelotonError
from peloton.core.model.ids import is_uuid
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.ports import ResourceManagerPort
from peloton.core.states import JobState, WorkflowType
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.common import opaque, version, with_options, workflow_of
from peloton.jobmgr.servicers.v1_answers import is_stale, known_job, stale, wrapped
from peloton.jobmgr.workflows import WorkflowOps
from peloton.storage import ReadOnlyStore


def _no_secrets(request: Any) -> None:
    if len(request.secrets):
        raise InvalidArgument("secrets not enabled in cluster", field="secrets")


def _job_id(request: Any) -> str:
    """The request's job id (one that is not a UUID names no job: `_known` answers it)."""
    value: str = request.job_id.value
    return job_id_from_wire(value, "job_id") if is_uuid(value) else value


def instances_in(ranges: tuple[tuple[int, int], ...], count: int) -> list[int] | None:
    """Instances in half-open ranges clamped to the job (None: no ranges, i.e. all)."""
    if not ranges:
        return None
    wanted = sorted({i for lo, hi in ranges for i in range(lo, min(hi, count))})
    if not wanted:
        raise InvalidArgument(f"ranges select no instance of the job's {count}",
                              field="restart_spec.ranges")
    return wanted


class JobWrites:
    """The mutating RPCs of JobService (mixed into JobServicer)."""

    cache: JobCache
    store: ReadOnlyStore
    resmgr: ResourceManagerPort
    jobs: JobOps
    workflows: WorkflowOps

    def _entity(self, job_id: str) -> str:
        return self.workflows.job(job_id).runtime.entity_version()

    @staticmethod
    def _versioned(runtime: JobRuntime, request: Any, context: str = "") -> None:
        """Peloton's stale-version answer when the request's version is not the job's
        (an empty one included: Peloton's ValidateEntityVersion compares them as given)."""
        if version(request) != runtime.entity_version():
            raise stale(context)

    def _pool_first(self, pool_id: str) -> None:
        """A create refused for any reason: if its pool is bad, that is the answer, in
        Peloton's words (its handler validates the pool before anything else).  Asked
        only once a create failed, so a good one costs no call of its own."""
        try:
            self.resmgr.validate_pool(pool_id)
        except (InvalidArgument, NotFound) as exc:
            raise wrapped("failed to validate resource pool", exc) from None

    def CreateJob(self, request: svc.CreateJobRequest, context: Any) -> svc.CreateJobResponse:
        _no_secrets(request)
        if request.job_id.value and not is_uuid(request.job_id.value):
            raise InvalidArgument(texts.V1_JOB_ID_NOT_UUID, field="job_id")
        pool = request.spec.respool_id.value
        try:
            spec = job_spec_from_v1(request.spec)
        except InvalidArgument as exc:
            self._pool_first(pool)
            raise wrapped("invalid job spec", exc) from None
        try:
            rolling = with_options(create_spec_from_v1(request.create_spec), context)
            # `jobs.create` validates the pool: one resource manager call per create.
            job_id = self.jobs.create(spec, request.job_id.value, rolling=rolling,
                                      opaque_data=request.opaque_data.data)
        except PelotonError:
            self._pool_first(pool)
            raise
        out = svc.CreateJobResponse()
        out.job_id.value = job_id
        out.version.value = self._entity(job_id)
        return out

    def _replace(self, job_id: str, spec: JobSpec, request: Any, context: Any) -> str:
        rolling = with_options(update_spec_from_v1(request.update_spec), context)
        self.workflows.create(job_id, WorkflowType.UPDATE, rolling, new_spec=spec,
                              version=version(request), opaque_data=opaque(request) or "")
        return self._entity(job_id)

    def ReplaceJob(self, request: svc.ReplaceJobRequest, context: Any) -> svc.ReplaceJobResponse:
        _no_secrets(request)
        if not is_uuid(request.job_id.value):
            raise InvalidArgument(texts.UPDATE_JOB_ID_NOT_UUID, field="job_id")
        job_id = _job_id(request)
        try:
            # Zero instances is a valid target here (Peloton's bridge rolls a job's first
            # deploy back to no instances this way).
            spec = job_spec_from_v1(request.spec, allow_empty=True)
        except InvalidArgument as exc:
            raise wrapped("invalid job spec", exc) from None
        old, runtime = known_job(self.jobs, job_id, "failed to get job runtime from cache")
        if spec.type is not old.type:
            raise wrapped("failed to validate spec update",
                          InvalidArgument(texts.JOB_TYPE_IMMUTABLE, field="spec.type"))
        if spec.respool_id != old.respool_id:
            raise wrapped("failed to validate spec update",
                          InvalidArgument(texts.POOL_IMMUTABLE, field="spec.respool_id"))
        self._versioned(runtime, request, "failed to create update workload")
        out = svc.ReplaceJobResponse()
        try:
            out.version.value = self._replace(job_id, spec, request, context)
        except Conflict as exc:
            if is_stale(exc):
                raise stale("failed to create update workload") from None
            raise
        return out

    def PatchJob(self, request: svc.PatchJobRequest, context: Any) -> svc.PatchJobResponse:
        _no_secrets(request)
        job_id = _job_id(request)
        _, runtime = known_job(self.jobs, job_id, "failed to get job runtime from cache")
        self._versioned(runtime, request, "failed to create update workload")
        current = self.workflows.job(job_id).spec
        merged = stateless_pb2.JobSpec()
        if current.document_kind == DOC_V1_JOB_SPEC:
            merged.CopyFrom(v1_document(current.document))
        else:
            merged.CopyFrom(job_spec_to_v1(current))
        merged.instance_count = current.instance_count
        for fd, value in request.spec.ListFields():
            if fd.name == "revision":
                continue
            merged.ClearField(fd.name)
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                for key, item in value.items():
                    getattr(merged, fd.name)[key].CopyFrom(item)
            elif hasattr(value, "extend"):  # a repeated field
                getattr(merged, fd.name).extend(value)
            elif fd.message_type is not None:
                getattr(merged, fd.name).CopyFrom(value)
            else:
                setattr(merged, fd.name, value)
        out = svc.PatchJobResponse()
        try:
            spec = job_spec_from_v1(merged)
        except InvalidArgument as exc:
            raise wrapped("invalid job spec", exc) from None
        try:
            out.version.value = self._replace(job_id, spec, request, context)
        except Conflict as exc:
            if is_stale(exc):
                raise stale("failed to create update workload") from None
            raise
        return out

    def RestartJob(self, request: svc.RestartJobRequest, context: Any) -> svc.RestartJobResponse:
        job_id = _job_id(request)
        _, runtime = known_job(self.jobs, job_id, "fail to get job runtime")
        self._versioned(runtime, request)
        spec, ranges = restart_spec_from_v1(request.restart_spec)
        count = self.workflows.job(job_id).spec.instance_count
        self.workflows.create(job_id, WorkflowType.RESTART, spec, version=version(request),
                              instances=instances_in(ranges, count),
                              opaque_data=opaque(request) or "")
        out = svc.RestartJobResponse()
        out.version.value = self._entity(job_id)
        return out

    def _steer(self, request: Any, context: str, act: Any) -> str:
        """Pause, resume or abort the job's workflow with Peloton's answers under `context`.

        A workflow that ended takes no more changes: the call answers OK, as Peloton's
        (whose writeProgress ignores it; Peloton still moved the workflow version, ours
        stays).
        """
        job_id = _job_id(request)
        _, runtime = known_job(self.jobs, job_id, context)
        if not runtime.update_id:
            raise wrapped(context, NotFound(texts.NO_WORKFLOW_FOUND, field="job_id"))
        self._versioned(runtime, request, context)
        current = workflow_of(self.cache, self.store, job_id, runtime)
        if current is not None and not current.state.active:
            return runtime.entity_version()
        try:
            result: str = act(job_id, version(request), opaque(request))
        except Conflict as exc:
            if is_stale(exc):
                raise stale(context) from None
            raise
        return result

    def PauseJobWorkflow(self, request: svc.PauseJobWorkflowRequest,
                         context: Any) -> svc.PauseJobWorkflowResponse:
        out = svc.PauseJobWorkflowResponse()
        out.version.value = self._steer(request, "failed to pause workload", self.workflows.pause)
        return out

    def ResumeJobWorkflow(self, request: svc.ResumeJobWorkflowRequest,
                          context: Any) -> svc.ResumeJobWorkflowResponse:
        out = svc.ResumeJobWorkflowResponse()
        out.version.value = self._steer(request, "failed to resume workload",
                                        self.workflows.resume)
        return out

    def AbortJobWorkflow(self, request: svc.AbortJobWorkflowRequest,
                         context: Any) -> svc.AbortJobWorkflowResponse:
        out = svc.AbortJobWorkflowResponse()
        out.version.value = self._steer(request, "failed to abort workflow", self.workflows.abort)
        return out

    def _goal(self, request: Any, goal: JobState) -> str:
        job_id = _job_id(request)
        _, runtime = known_job(self.jobs, job_id, "fail to get runtime")
        self._versioned(runtime, request)
        try:
            return self.jobs.change_goal(job_id, goal, version(request))
        except Conflict as exc:
            if is_stale(exc):
                raise stale() from None
            raise

    def StartJob(self, request: svc.StartJobRequest, context: Any) -> svc.StartJobResponse:
        out = svc.StartJobResponse()
        out.version.value = self._goal(request, JobState.RUNNING)
        return out

    def StopJob(self, request: svc.StopJobRequest, context: Any) -> svc.StopJobResponse:
        out = svc.StopJobResponse()
        out.version.value = self._goal(request, JobState.KILLED)
        return out

    def DeleteJob(self, request: svc.DeleteJobRequest, context: Any) -> svc.DeleteJobResponse:
        job_id = _job_id(request)
        _, runtime = known_job(self.jobs, job_id, "failed to get job runtime")
        self._versioned(runtime, request)
        if not request.force and runtime.state is not JobState.KILLED:
            raise Conflict(texts.V1_JOB_NOT_STOPPED, field="job_id")  # Peloton's ABORTED
        self.jobs.delete(job_id, force=request.force)
        return svc.DeleteJobResponse()

    def RefreshJob(self, request: svc.RefreshJobRequest, context: Any) -> svc.RefreshJobResponse:
        job_id = _job_id(request)
        known_job(self.jobs, job_id, "fail to get job runtime")
        self.jobs.refresh(job_id)
        return svc.RefreshJobResponse()
