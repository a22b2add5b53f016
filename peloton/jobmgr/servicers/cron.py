"""pelotonpy.api.cron.CronService: schedule, deschedule, start and read cron jobs.

Our extension of Peloton's API (see proto/pelotonpy/api/cron/cron.proto).
Writes go to the cron job store (compare-and-set); runs are started by the
cron scheduler component (peloton/jobmgr/cron.py), which StartCronJob calls
directly.  A template is a v0 JobConfig or a v1alpha stateless JobSpec and
is stored as a BATCH JobSpec: each run's pods run to completion.  Bad input
(an invalid schedule, no template, a template the job manager would refuse)
is InvalidArgument naming the field, and nothing is stored.

With all-active job managers a cron job belongs to its name's partition: its writes and
StartCronJob succeed only on the member holding it (elsewhere UNAVAILABLE, retryable;
these calls name no job, so servicers/forwarding.py does not forward them yet).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from peloton.api.convert.common import DOC_V1_JOB_SPEC
from peloton.api.convert.v0_job import job_config_to_v0, job_spec_from_v0
from peloton.api.convert.v1_job import job_spec_from_v1, job_spec_to_v1
from peloton.api.gen.pelotonpy.api.cron import cron_pb2 as pb
from peloton.api.gen.pelotonpy.api.cron import cron_pb2_grpc
from peloton.core.cron.model import CollisionPolicy, CronJob
from peloton.core.cron.schedule import parse
from peloton.core.cron.trigger import next_run_ms
from peloton.core.errors import AlreadyExists, InvalidArgument, NotFound
from peloton.core.model.job import JobSpec
from peloton.core.states import JobType
from peloton.jobmgr.cron import CronScheduler
from peloton.storage.cron_store import CronJobStore

POLICIES = {pb.COLLISION_POLICY_KILL_EXISTING: CollisionPolicy.KILL_EXISTING,
            pb.COLLISION_POLICY_CANCEL_NEW: CollisionPolicy.CANCEL_NEW,
            pb.COLLISION_POLICY_RUN_OVERLAP: CollisionPolicy.RUN_OVERLAP}
POLICY_TO_PB = {v: k for k, v in POLICIES.items()}


def _name(name: str) -> str:
    if not name or not name.strip():
        raise InvalidArgument("a cron job needs a name", field="name")
    return name


def template_from_pb(job: Any) -> JobSpec:
    """The BATCH JobSpec of a CronJob message's template."""
    which = job.WhichOneof("template")
    if which == "batch_config":
        spec = job_spec_from_v0(job.batch_config)
        if job.batch_config.respoolID.value:
            spec = dataclasses.replace(spec, respool_id=job.batch_config.respoolID.value)
    elif which == "stateless_spec":
        spec = job_spec_from_v1(job.stateless_spec)
    else:
        raise InvalidArgument("a cron job needs a template (batch_config or stateless_spec)",
                              field="template")
    if spec.instance_count <= 0:
        raise InvalidArgument("a cron job's template needs at least one instance",
                              field="template.instance_count")
    return dataclasses.replace(spec, type=JobType.BATCH)


def cron_to_pb(job: CronJob, now_ms: int) -> Any:
    """The CronJob message of a stored cron job."""
    out = pb.CronJob(name=job.name, schedule=job.schedule, collision_policy=POLICY_TO_PB[job.policy],
                     created_ms=job.created_ms, last_due_ms=job.last_due_ms,
                     next_run_ms=next_run_ms(parse(job.schedule), job.last_due_ms, now_ms) or 0,
                     last_run_job_id=job.last_run_job_id, opaque_data=job.opaque_data,
                     pending_run_job_id=job.pending.job_id if job.pending is not None else "")
    if job.template.document_kind == DOC_V1_JOB_SPEC:
        out.stateless_spec.CopyFrom(job_spec_to_v1(job.template))
    else:
        out.batch_config.CopyFrom(job_config_to_v0(job.template))
    return out


class CronServicer(cron_pb2_grpc.CronServiceServicer):  # type: ignore[misc]
    """CronService over the cron job store and the cron scheduler."""

    def __init__(self, store: CronJobStore, scheduler: CronScheduler,
                 validate: Callable[[JobSpec], None], now_ms: Callable[[], int]) -> None:
        self.store = store
        self.scheduler = scheduler
        self.validate = validate
        self.now_ms = now_ms

    def ScheduleCronJob(self, request: pb.ScheduleCronJobRequest, context: Any) -> pb.ScheduleCronJobResponse:
        job = request.job
        name = _name(job.name)
        try:
            parse(job.schedule)
            schedule = job.schedule  # kept as written, as Aurora keeps a job's cronSchedule
        except InvalidArgument as exc:
            raise InvalidArgument(f"schedule: {exc.message}", field="schedule") from None
        if job.collision_policy not in POLICIES:
            raise InvalidArgument(f"unknown collision policy {job.collision_policy}",
                                  field="collision_policy")
        template = template_from_pb(job)
        self.validate(template)
        now = self.now_ms()
        try:
            current = self.store.get_cron_job(name)
        except NotFound:
            current = None
        if current is None:
            if request.mode == pb.SCHEDULE_MODE_REPLACE_ONLY:
                raise NotFound(f"No cron job found for {name}.", field="name")
            stored = self.store.create_cron_job(CronJob(
                name=name, schedule=schedule, policy=POLICIES[job.collision_policy], template=template,
                created_ms=now, last_due_ms=now, opaque_data=job.opaque_data))
            return pb.ScheduleCronJobResponse(job=cron_to_pb(stored, now), created=True)
        if request.mode == pb.SCHEDULE_MODE_CREATE_ONLY:
            raise AlreadyExists(f"cron job {name} already exists", field="name")
        # As Aurora re-creates the trigger: the new schedule counts from now.
        stored = self.store.update_cron_job(dataclasses.replace(
            current, schedule=schedule, policy=POLICIES[job.collision_policy], template=template,
            last_due_ms=max(current.last_due_ms, now), opaque_data=job.opaque_data))
        return pb.ScheduleCronJobResponse(job=cron_to_pb(stored, now), created=False)

    def DescheduleCronJob(self, request: pb.DescheduleCronJobRequest,
                          context: Any) -> pb.DescheduleCronJobResponse:
        return pb.DescheduleCronJobResponse(existed=self.store.delete_cron_job(_name(request.name)))

    def StartCronJob(self, request: pb.StartCronJobRequest, context: Any) -> pb.StartCronJobResponse:
        name = _name(request.name)
        try:
            run = self.scheduler.start_now(name)
        except NotFound:
            raise NotFound(f"No cron job found for {name}.", field="name") from None
        return pb.StartCronJobResponse(run_job_id=run)

    def GetCronJob(self, request: pb.GetCronJobRequest, context: Any) -> pb.GetCronJobResponse:
        return pb.GetCronJobResponse(job=cron_to_pb(self.store.get_cron_job(_name(request.name)),
                                                    self.now_ms()))

    def ListCronJobs(self, request: pb.ListCronJobsRequest, context: Any) -> pb.ListCronJobsResponse:
        now = self.now_ms()
        return pb.ListCronJobsResponse(jobs=[cron_to_pb(j, now) for j in self.store.get_cron_jobs()
                                             if j.name.startswith(request.name_prefix)])
