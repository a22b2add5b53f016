"""v1alpha stateless JobService, the writing half: create, replace, patch, restart, steer, start/stop.

Every mutating call but CreateJob and RefreshJob is a compare-and-set on
the job's entity version `<config>-<desired state>-<workflow>`: a stale
version fails with ABORTED "unexpected entity version" and the reply
carries the job's new version.  An empty version means "whatever is
current" (Peloton refused it; our CLI and the Aurora bridge always send one).

CreateJob always creates the job through an UPDATE workflow, as Peloton's
RollingCreate does: `create_spec` paces it (batch size, start paused) and
`opaque_data` is stored with it.  PatchJob, a no-op in Peloton, replaces
the top-level fields set in the request's spec and then rolls like
ReplaceJob (a scalar can only be patched to a non-zero value: proto3 does
not tell an unset zero from an absent one).
"""

from __future__ import annotations

from typing import Any

from peloton.api.convert.common import DOC_V1_JOB_SPEC, job_id_from_wire, v1_document
from peloton.api.convert.v1_job import job_spec_from_v1, job_spec_to_v1
from peloton.api.convert.v1_workflow import (
    create_spec_from_v1,
    restart_spec_from_v1,
    update_spec_from_v1,
)
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.core.errors import Conflict, InvalidArgument
from peloton.core.model.job import JobSpec
from peloton.core.ports import ResourceManagerPort
from peloton.core.states import JobState, WorkflowType
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.jobs import JobOps
from peloton.jobmgr.servicers.common import opaque, version
from peloton.jobmgr.workflows import WorkflowOps
from peloton.storage import Store


def _no_secrets(request: Any) -> None:
    if len(request.secrets):
        raise InvalidArgument("secrets not enabled in cluster", field="secrets")


def _job_id(request: Any) -> str:
    return job_id_from_wire(request.job_id.value, "job_id")


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
    store: Store
    resmgr: ResourceManagerPort
    jobs: JobOps
    workflows: WorkflowOps

    def _entity(self, job_id: str) -> str:
        return self.workflows.job(job_id).runtime.entity_version()

    def CreateJob(self, request: svc.CreateJobRequest, context: Any) -> svc.CreateJobResponse:
        _no_secrets(request)
        if request.job_id.value:
            job_id_from_wire(request.job_id.value, "job_id")
        spec = job_spec_from_v1(request.spec)
        job_id = self.jobs.create(spec, request.job_id.value,
                                  rolling=create_spec_from_v1(request.create_spec),
                                  opaque_data=request.opaque_data.data)
        out = svc.CreateJobResponse()
        out.job_id.value = job_id
        out.version.value = self._entity(job_id)
        return out

    def _replace(self, job_id: str, spec: JobSpec, request: Any) -> str:
        self.workflows.create(job_id, WorkflowType.UPDATE, update_spec_from_v1(request.update_spec),
                              new_spec=spec, version=version(request),
                              opaque_data=opaque(request) or "")
        return self._entity(job_id)

    def ReplaceJob(self, request: svc.ReplaceJobRequest, context: Any) -> svc.ReplaceJobResponse:
        _no_secrets(request)
        job_id = _job_id(request)
        out = svc.ReplaceJobResponse()
        out.version.value = self._replace(job_id, job_spec_from_v1(request.spec), request)
        return out

    def PatchJob(self, request: svc.PatchJobRequest, context: Any) -> svc.PatchJobResponse:
        _no_secrets(request)
        job_id = _job_id(request)
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
        out.version.value = self._replace(job_id, job_spec_from_v1(merged), request)
        return out

    def RestartJob(self, request: svc.RestartJobRequest, context: Any) -> svc.RestartJobResponse:
        job_id = _job_id(request)
        spec, ranges = restart_spec_from_v1(request.restart_spec)
        count = self.workflows.job(job_id).spec.instance_count
        self.workflows.create(job_id, WorkflowType.RESTART, spec, version=version(request),
                              instances=instances_in(ranges, count),
                              opaque_data=opaque(request) or "")
        out = svc.RestartJobResponse()
        out.version.value = self._entity(job_id)
        return out

    def PauseJobWorkflow(self, request: svc.PauseJobWorkflowRequest,
                         context: Any) -> svc.PauseJobWorkflowResponse:
        out = svc.PauseJobWorkflowResponse()
        out.version.value = self.workflows.pause(_job_id(request), version(request), opaque(request))
        return out

    def ResumeJobWorkflow(self, request: svc.ResumeJobWorkflowRequest,
                          context: Any) -> svc.ResumeJobWorkflowResponse:
        out = svc.ResumeJobWorkflowResponse()
        out.version.value = self.workflows.resume(_job_id(request), version(request),
                                                  opaque(request))
        return out

    def AbortJobWorkflow(self, request: svc.AbortJobWorkflowRequest,
                         context: Any) -> svc.AbortJobWorkflowResponse:
        out = svc.AbortJobWorkflowResponse()
        out.version.value = self.workflows.abort(_job_id(request), version(request), opaque(request))
        return out

    def StartJob(self, request: svc.StartJobRequest, context: Any) -> svc.StartJobResponse:
        out = svc.StartJobResponse()
        out.version.value = self.jobs.change_goal(_job_id(request), JobState.RUNNING,
                                                  version(request))
        return out

    def StopJob(self, request: svc.StopJobRequest, context: Any) -> svc.StopJobResponse:
        out = svc.StopJobResponse()
        out.version.value = self.jobs.change_goal(_job_id(request), JobState.KILLED,
                                                  version(request))
        return out

    def DeleteJob(self, request: svc.DeleteJobRequest, context: Any) -> svc.DeleteJobResponse:
        job_id = _job_id(request)
        _, runtime = self.jobs.get(job_id)
        wanted = version(request)
        if wanted and wanted != runtime.entity_version():
            raise Conflict(f"unexpected entity version {wanted!r}: job {job_id} is at "
                           f"{runtime.entity_version()}")
        if not request.force and not runtime.state.terminal:
            # Peloton's words and code (ABORTED); stop the job first, or pass force.
            raise Conflict(f"job is not stopped: job {job_id} is {runtime.state.value}")
        self.jobs.delete(job_id, force=request.force)
        return svc.DeleteJobResponse()

    def RefreshJob(self, request: svc.RefreshJobRequest, context: Any) -> svc.RefreshJobResponse:
        self.jobs.refresh(_job_id(request))
        return svc.RefreshJobResponse()
