"""Cron jobs: scheduleCronJob, replaceCronTemplate, startCronJob, descheduleCronJob.

An Aurora cron job is a Peloton cron job (pelotonpy.api.cron.CronService,
served by the job manager) named `role/env/name`, whose template is the
job's stateless JobSpec as the bridge builds it for any job; each run is a
new BATCH job of that name, so the job key's task queries, killTasks and
restartShards act on the newest run.  The schedule and collision policy
follow Aurora (peloton/core/cron); the job manager starts runs once per
due time (see aurorabridge/README.md for the rules and where they differ).

Aurora's rules kept here: a cron schedule is required and valid, the task
is not a service, RUN_OVERLAP is refused (Aurora removed it), a key with
live non-cron tasks cannot become a cron job, a key with an update in
progress is JOB_UPDATING_ERROR, replaceCronTemplate needs an existing cron
job, descheduleCronJob of a key that is not one answers OK with Aurora's
message, startCronJob of one that is not is INVALID_REQUEST.

`cron_jobs(ctx, role)` lists the bridge's cron jobs for getJobs,
getJobSummary and getRoleSummary (jobs.py).
"""

from __future__ import annotations

from typing import Any

from aurorabridge import validation
from aurorabridge.atop.job_key import JobKey, job_key
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.job_directory import is_gone
from aurorabridge.responses import invalid_request, ok, updating_error
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2 as sl
from peloton.api.gen.pelotonpy.api.cron import cron_pb2
from peloton.core.errors import NotFound, Unimplemented

#: The opaque data of the bridge's cron jobs (so other cron jobs are not listed as Aurora's).
BRIDGE_MARK = "aurora_bridge"
_POLICIES = {api.CronCollisionPolicy.KILL_EXISTING: cron_pb2.COLLISION_POLICY_KILL_EXISTING,
             api.CronCollisionPolicy.CANCEL_NEW: cron_pb2.COLLISION_POLICY_CANCEL_NEW,
             api.CronCollisionPolicy.RUN_OVERLAP: cron_pb2.COLLISION_POLICY_RUN_OVERLAP}
POLICY_FROM_PB = {v: k for k, v in _POLICIES.items()}
#: Job states whose tasks have all ended (a key in one of them may become a cron job).
_FINISHED = frozenset({sl.JOB_STATE_SUCCEEDED, sl.JOB_STATE_FAILED, sl.JOB_STATE_KILLED,
                       sl.JOB_STATE_DELETED})


def cron_job(ctx: BridgeContext, key: JobKey) -> Any | None:
    """The bridge's cron job of `key`, or None."""
    try:
        job = ctx.port.get_cron_job(key.job_name)
    except (NotFound, Unimplemented):  # a job manager without CronService has no cron jobs
        return None
    return job if job.opaque_data == BRIDGE_MARK else None


def cron_jobs(ctx: BridgeContext, role: str = "") -> list[Any]:
    """The bridge's cron jobs (of `role` when given), sorted by name."""
    try:
        found = ctx.port.list_cron_jobs(f"{role}/" if role else "")
    except Unimplemented:
        return []
    return [j for j in found if j.opaque_data == BRIDGE_MARK]


def _schedule(ctx: BridgeContext, config: Any, mode: int) -> Any:
    checked = validation.check_job_configuration(config, ctx.limits, cron=True)
    validation.check_cron(config)
    key = checked.key
    existing = ctx.find(key)
    if existing is not None and ctx.active_update(existing) is not None:
        return updating_error(f"job {key} has update {existing.data.update_id} in progress")
    current = cron_job(ctx, key)
    if mode == cron_pb2.SCHEDULE_MODE_REPLACE_ONLY and current is None:
        return invalid_request(f"No cron job found for {key}.")
    if (current is None and existing is not None
            and not is_gone(existing.status, existing.spec.instance_count)
            and existing.status.state not in _FINISHED):
        return invalid_request(f"Job {key} already exists")
    policy = config.cronCollisionPolicy
    job = cron_pb2.CronJob(name=key.job_name, schedule=config.cronSchedule, opaque_data=BRIDGE_MARK,
                           collision_policy=_POLICIES[api.CronCollisionPolicy.KILL_EXISTING
                                                     if policy is None else policy])
    job.stateless_spec.CopyFrom(ctx.job_spec(checked))
    ctx.port.schedule_cron_job(job, mode=mode)
    return ok()


def schedule_cron_job(ctx: BridgeContext, args: Any) -> Any:
    return _schedule(ctx, args.description, cron_pb2.SCHEDULE_MODE_CREATE_OR_REPLACE)


def replace_cron_template(ctx: BridgeContext, args: Any) -> Any:
    return _schedule(ctx, args.config, cron_pb2.SCHEDULE_MODE_REPLACE_ONLY)


def deschedule_cron_job(ctx: BridgeContext, args: Any) -> Any:
    key = job_key(args.job)
    job = ctx.find(key)
    if job is not None and ctx.active_update(job) is not None:
        return updating_error(f"job {key} has update {job.data.update_id} in progress")
    if cron_job(ctx, key) is None or not ctx.port.deschedule_cron_job(key.job_name):
        return ok(None, f"Job {key} is not scheduled with cron")
    return ok()


def start_cron_job(ctx: BridgeContext, args: Any) -> Any:
    key = job_key(args.job)
    if cron_job(ctx, key) is None:
        return invalid_request(f"Failed to start cron job - No cron job found for {key}.")
    ctx.port.start_cron_job(key.job_name)
    return ok()


HANDLERS: dict[str, HandlerFn] = {
    "scheduleCronJob": schedule_cron_job,
    "replaceCronTemplate": replace_cron_template,
    "descheduleCronJob": deschedule_cron_job,
    "startCronJob": start_cron_job,
}
