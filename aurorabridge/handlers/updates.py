"""Update lifecycle: startJobUpdate, pause, resume, abort, rollback, pulse, and the pulse timer.

An Aurora update is a Peloton update workflow (CreateJob for a new job,
ReplaceJob otherwise) whose opaque data carries the Aurora update id
(opaque_data.py) and the settings it runs with (update_settings.py).  Every
call naming an update checks that id against the job's current workflow
first: a stale or unknown id is INVALID_REQUEST and nothing is changed.

A second startJobUpdate while an update is in progress follows
`HandlerSettings.concurrent_updates`: "reject" (the default, Aurora's rule)
answers INVALID_REQUEST with the running update's key in the result;
"replace" (Peloton's bridge's rule) aborts the running update and starts the
new one.  An update that changes nothing starts nothing and answers OK with
Aurora's message; unlike Aurora (which returns no result there), the result
names the update that put the current config in place when that update
rolled forward, so clients that read `startJobUpdateResult` (gorealis, the
Aurora CLI) get a key that reads as ROLLED_FORWARD; without such an update
(a job made by createJob or by a native client), a workflow is started as
Peloton's bridge did, so the key is real.

Pulses: an update with blockIfNoPulsesAfterMs starts paused; a pulse
resumes it and arms the bridge's timer; if pulses stop, the timer pauses it
again (AWAITING_PULSE) until the next pulse.  See pulse.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from aurorabridge import caller, opaque_data, validation
from aurorabridge import update_settings as stored_settings
from aurorabridge.atop.job_key import job_key
from aurorabridge.atop.job_spec import create_spec, update_options, update_spec
from aurorabridge.config import WATCH_TIME_RULES
from aurorabridge.handlers import cron
from aurorabridge.handlers.context import BridgeContext, HandlerFn, Job
from aurorabridge.handlers.instance_specs import update_job_spec
from aurorabridge.job_directory import is_gone
from aurorabridge.ptoa.updates import update_summary, workflow_status
from aurorabridge.responses import invalid_request, ok
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.core.errors import Conflict, InvalidArgument

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Tries of a call that steers an update (pause, resume, abort, rollback, pulse, the pulse
#: timer's pause) when it loses a compare-and-set race: the job manager moved the job's
#: entity version between our read and our write.  Each try reads the job again.
CAS_TRIES = 3

NON_SERVICE_TASK = "Updates are not supported for non-service jobs."
NOOP_UPDATE = "Job is unchanged by proposed update."
#: HandlerSettings.concurrent_updates values.
REJECT_RUNNING, REPLACE_RUNNING = "reject", "replace"
_U = api.JobUpdateStatus
_W = stateless_pb2
ROLLING_STATES = frozenset({_W.WORKFLOW_STATE_INITIALIZED, _W.WORKFLOW_STATE_ROLLING_FORWARD,
                            _W.WORKFLOW_STATE_ROLLING_BACKWARD})
ROLLBACK_FROM = frozenset({_U.ROLLING_FORWARD, _U.ROLL_FORWARD_PAUSED, _U.ROLL_FORWARD_AWAITING_PULSE})


def _status(job: Job) -> int:
    return workflow_status(job.workflow, job.data)


def start_job_update(ctx: BridgeContext, args: Any) -> Any:
    request = args.request
    if request is None:
        raise InvalidArgument("update request is required", field="request")
    if request.taskConfig is not None and not request.taskConfig.isService:
        return invalid_request(NON_SERVICE_TASK)
    checked = validation.check_task(request.taskConfig, request.instanceCount, ctx.limits)
    validation.check_update_settings(request.settings, checked.instance_count)
    key_struct = api.JobKey(role=checked.key.role, environment=checked.key.environment, name=checked.key.name)
    if cron.cron_job(ctx, checked.key) is not None:
        return invalid_request(validation.NO_CRON)
    job = ctx.find(checked.key)
    if job is not None and ctx.active_update(job) is not None:
        if ctx.handlers.concurrent_updates != REPLACE_RUNNING:
            summary = update_summary(key_struct, job.workflow, job.data)
            running = api.StartJobUpdateResult(key=summary.key, updateSummary=summary)
            return invalid_request(f"An update is already in progress for {checked.key}: "
                                   f"{job.data.update_id}", api.Result(startJobUpdateResult=running))
        log.info("aborting update %s of %s for a new update", job.data.update_id, checked.key)
        ctx.pulses.disarm(job.job_id)
        replaced = job.data.with_action(opaque_data.ABORT, caller.current(), "replaced by a new update")
        ctx.port.abort_workflow(job.job_id, job.version, opaque_data=replaced.to_json())
        job = ctx.require(checked.key)
    settings = request.settings
    metadata = tuple(sorted({(m.key, m.value) for m in request.metadata or ()}))
    data = opaque_data.OpaqueData.new(metadata, args.message or "", settings.blockIfNoPulsesAfterMs or 0,
                                      stored_settings.to_doc(settings), user=caller.current())
    # An existing job keeps its pool (Peloton refuses a change; jobs made before pools per role).
    spec = ctx.job_spec(checked, pool=job.spec.respool_id.value if job is not None else "")
    options = update_options(settings, watch=WATCH_TIME_RULES[ctx.handlers.watch_time])
    if job is None:
        ctx.port.create_stateless_job(spec, create_spec=create_spec(settings), opaque_data=data.to_json(),
                                      options=options)
    else:
        scope = validation.check_ranges(settings.updateOnlyTheseInstances, "updateOnlyTheseInstances")
        pinned = {i for first, last in scope for i in range(first, last + 1)} if scope else None
        # Exactly the instances Aurora would update (a killed job's key: all of them, as new).
        spec = update_job_spec(ctx, job, spec, pinned)
        if not is_gone(job.status, job.spec.instance_count) and _is_noop(ctx, job, spec):
            done = _rolled_forward_result(job, key_struct)
            if done is not None:
                return ok(api.Result(startJobUpdateResult=done), NOOP_UPDATE)
        ctx.port.replace_job(job.job_id, job.version, spec,
                             update_spec(settings, ctx.handlers.in_place_updates), opaque_data=data.to_json(),
                             options=options)
    status = _U.ROLL_FORWARD_AWAITING_PULSE if data.pulsed else _U.ROLLING_FORWARD
    summary = api.JobUpdateSummary(key=api.JobUpdateKey(job=key_struct, id=data.update_id),
                                   user=data.started_by, state=api.JobUpdateState(status=status),
                                   metadata=[api.Metadata(key=k, value=v) for k, v in metadata])
    result = api.StartJobUpdateResult(key=summary.key, updateSummary=summary)
    return ok(api.Result(startJobUpdateResult=result))


def _rolled_forward_result(job: Job, key_struct: Any) -> Any | None:
    """The StartJobUpdateResult of the job's latest update if it rolled forward to the
    config the job has now; else None."""
    workflow = job.workflow
    if (not job.data.update_id or workflow.status.type != stateless_pb2.WORKFLOW_TYPE_UPDATE
            or _status(job) != _U.ROLLED_FORWARD
            or _config_version(workflow.status.version.value) != _config_version(job.version)):
        return None
    summary = update_summary(key_struct, workflow, job.data)
    return api.StartJobUpdateResult(key=summary.key, updateSummary=summary)


def _is_noop(ctx: BridgeContext, job: Job, spec: Any) -> bool:
    diff = ctx.port.get_replace_job_diff(job.job_id, job.version, spec)
    return not (diff.instances_added or diff.instances_removed or diff.instances_updated)


def _current(ctx: BridgeContext, key: Any) -> Job:
    """The job of an update key whose id is its current update, else InvalidArgument."""
    if key is None:
        raise InvalidArgument("update key is required", field="key")
    job = ctx.find(job_key(key.job))
    if not key.id:
        raise InvalidArgument("update key needs an id", field="key.id")
    if job is None or not job.data.update_id:
        raise InvalidArgument(f"no update {key.id} found for job {job_key(key.job)}", field="key.id")
    if job.data.update_id != key.id:
        raise InvalidArgument(f"update {key.id} is not the current update of {job.key} "
                              f"(the current one is {job.data.update_id})", field="key.id")
    return job


def _active(ctx: BridgeContext, key: Any, verb: str) -> Job:
    job = _current(ctx, key)
    if ctx.active_update(job) is None:
        raise InvalidArgument(f"cannot {verb} update {key.id}: it is {_U._VALUES_TO_NAMES[_status(job)]}")
    return job


def retry_conflicts(what: str, fn: Callable[[], T]) -> T:
    """`fn()`, tried again (it must re-read what it writes) while it loses a compare-and-set
    race, up to CAS_TRIES; the last Conflict reaches the caller (INVALID_REQUEST, as
    Peloton's bridge answers a stale entity version)."""
    for attempt in range(1, CAS_TRIES + 1):
        try:
            return fn()
        except Conflict as exc:
            if attempt == CAS_TRIES:
                raise
            log.info("%s lost a race with another write (%s); trying again (%d of %d)", what,
                     exc.message, attempt + 1, CAS_TRIES)
    raise AssertionError("unreachable")


def _retried(method: str, fn: HandlerFn) -> HandlerFn:
    return lambda ctx, args: retry_conflicts(method, lambda: fn(ctx, args))


def _asked(job: Job, action: str, args: Any, changes: bool = True) -> opaque_data.OpaqueData:
    """The job's opaque data with `action` recorded as asked by the caller, with the call's
    message (Aurora's AuditData); only as an action when it `changes` nothing (Aurora
    records a status only when it changes)."""
    if not changes:
        return job.data.with_action(action, record=False)
    return job.data.with_action(action, caller.current(), getattr(args, "message", None) or "")


def pause_job_update(ctx: BridgeContext, args: Any) -> Any:
    job = _active(ctx, args.key, "pause")
    ctx.pulses.disarm(job.job_id)
    paused = job.workflow.status.state == stateless_pb2.WORKFLOW_STATE_PAUSED and not job.data.awaiting_pulse
    ctx.port.pause_workflow(job.job_id, job.version,
                            opaque_data=_asked(job, opaque_data.PAUSE, args, changes=not paused).to_json())
    return ok()


def resume_job_update(ctx: BridgeContext, args: Any) -> Any:
    job = _active(ctx, args.key, "resume")
    paused = job.workflow.status.state == stateless_pb2.WORKFLOW_STATE_PAUSED
    ctx.port.resume_workflow(job.job_id, job.version,
                             opaque_data=_asked(job, opaque_data.RESUME, args, changes=paused).to_json())
    if job.data.pulsed:  # pulses still rule it: block again unless one arrives in time
        ctx.pulses.arm(job.job_id, job.data.update_id, job.data.pulse_timeout_ms)
    return ok()


def abort_job_update(ctx: BridgeContext, args: Any) -> Any:
    job = _active(ctx, args.key, "abort")
    ctx.pulses.disarm(job.job_id)
    ctx.port.abort_workflow(job.job_id, job.version,
                            opaque_data=_asked(job, opaque_data.ABORT, args).to_json())
    return ok()


def rollback_job_update(ctx: BridgeContext, args: Any) -> Any:
    job = _current(ctx, args.key)
    status = _status(job)
    if status not in ROLLBACK_FROM or ctx.active_update(job) is None:
        names = ", ".join(_U._VALUES_TO_NAMES[s] for s in sorted(ROLLBACK_FROM))
        return invalid_request(f"cannot roll back update {args.key.id} in state "
                               f"{_U._VALUES_TO_NAMES[status]}; it must be one of {names}")
    previous = job.workflow.status.prev_version.value
    spec = stateless_pb2.JobSpec()
    if _config_version(previous) == 0:  # first deployment: roll back to no instances
        spec.CopyFrom(job.spec)
        spec.instance_count = 0
    else:
        old = ctx.directory.get(job.job_id, previous)
        if old is None:
            return invalid_request(f"the configuration before update {args.key.id} is gone")
        spec.CopyFrom(old.job_info.spec)
    back = stateless_pb2.UpdateSpec()
    back.CopyFrom(job.workflow.update_spec)
    back.rollback_on_failure = False
    back.start_paused = status == _U.ROLL_FORWARD_AWAITING_PULSE
    data = _asked(job, opaque_data.ROLLBACK, args)
    options = update_options(stored_settings.from_doc(data.settings), rollback=True,
                             watch=WATCH_TIME_RULES[ctx.handlers.watch_time]) \
        if data.settings is not None else None
    ctx.port.replace_job(job.job_id, job.version, spec, back, opaque_data=data.to_json(), options=options)
    if data.pulsed and not back.start_paused:
        ctx.pulses.arm(job.job_id, data.update_id, data.pulse_timeout_ms)
    return ok()


def _config_version(entity_version: str) -> int:
    """The config part of Peloton's entity version `<config>-<desired state>-<workflow>`."""
    head = entity_version.split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def pulse_job_update(ctx: BridgeContext, args: Any) -> Any:
    job = _current(ctx, args.key)
    result = api.Result(pulseJobUpdateResult=api.PulseJobUpdateResult(status=api.JobUpdatePulseStatus.OK))
    if ctx.active_update(job) is None:
        ctx.pulses.disarm(job.job_id)
        result.pulseJobUpdateResult.status = api.JobUpdatePulseStatus.FINISHED
        return ok(result)
    status = _status(job)
    timeout = job.data.pulse_timeout_ms
    if status in (_U.ROLL_FORWARD_AWAITING_PULSE, _U.ROLL_BACK_AWAITING_PULSE):
        ctx.port.resume_workflow(job.job_id, job.version,
                                 opaque_data=job.data.with_action(opaque_data.PULSE).to_json())
    if timeout > 0 and status not in (_U.ROLL_FORWARD_PAUSED, _U.ROLL_BACK_PAUSED):
        ctx.pulses.arm(job.job_id, job.data.update_id, timeout)
    return ok(result)


def pulse_expired(ctx: BridgeContext, job_id: str, update_id: str) -> None:
    """Pause `update_id` if it is still the job's rolling update (called by the pulse timer);
    a lost compare-and-set race is tried again on the job as it is then."""
    retry_conflicts("pausing an update after missed pulses", lambda: _pulse_expired(ctx, job_id, update_id))


def _pulse_expired(ctx: BridgeContext, job_id: str, update_id: str) -> None:
    info = ctx.directory.get(job_id)
    if info is None:
        return
    data = opaque_data.parse(info.workflow_info.opaque_data.data)
    if data.update_id != update_id or info.workflow_info.status.state not in ROLLING_STATES:
        return
    log.info("pausing update %s of job %s: no pulse within %d ms", update_id, job_id, data.pulse_timeout_ms)
    ctx.port.pause_workflow(job_id, info.job_info.status.version.value,
                            opaque_data=data.with_action(opaque_data.PULSE_TIMEOUT).to_json())


def recover_pulses(ctx: BridgeContext) -> int:
    """Re-arm the timers of rolling pulsed updates (after a bridge restart); returns how many."""
    armed = 0
    for summary in ctx.directory.query():
        if summary.status.workflow_status.state not in ROLLING_STATES:
            continue
        info = ctx.directory.get(summary.job_id.value)
        data = opaque_data.parse(info.workflow_info.opaque_data.data) if info is not None else None
        if data is not None and data.pulsed and data.pulse_timeout_ms > 0:
            ctx.pulses.arm(summary.job_id.value, data.update_id, data.pulse_timeout_ms)
            armed += 1
    return armed


HANDLERS: dict[str, HandlerFn] = {
    "startJobUpdate": start_job_update,
    "pauseJobUpdate": _retried("pauseJobUpdate", pause_job_update),
    "resumeJobUpdate": _retried("resumeJobUpdate", resume_job_update),
    "abortJobUpdate": _retried("abortJobUpdate", abort_job_update),
    "rollbackJobUpdate": _retried("rollbackJobUpdate", rollback_job_update),
    "pulseJobUpdate": _retried("pulseJobUpdate", pulse_job_update),
}
