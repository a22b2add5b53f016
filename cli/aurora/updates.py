"""`aurora update start|pause|resume|abort|rollback|info|list|wait`: scheduler-driven updates.

`start` shows what will change, sends startJobUpdate with the config's
UpdateConfig (and a client update id in the metadata, so a retried start is
recognised as the same update) and, with `--wait`, follows the update to its
end: exit 0 when ROLLED_FORWARD, 4 when ROLLED_BACK, 20 otherwise.  The other
verbs act on the job's active update (exit 6 when there is none).
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from typing import Any

import click

from aurorabridge.client.scheduler import messages
from aurorabridge.thrift_api import api
from cli.aurora import options as o
from cli.aurora.context import AuroraContext, err, out
from cli.aurora.diff import show_update_diff
from cli.aurora.exit_codes import (
    EXIT_API_ERROR,
    EXIT_COMMAND_FAILURE,
    EXIT_INVALID_PARAMETER,
    EXIT_OK,
    EXIT_UNKNOWN_ERROR,
    CommandError,
)
from cli.aurora.options import InstanceSpec, JobKey
from cli.aurora.runner import verb

CLIENT_UPDATE_ID = "org.apache.aurora.client.update_id"
ACTIVE = frozenset(api.ACTIVE_JOB_UPDATE_STATES)
STATUS = api.JobUpdateStatus
POLL_SECS = 1.0
_ALL = set(STATUS._VALUES_TO_NAMES)
STATUS_GROUPS: dict[str, set[int]] = {
    "active": set(ACTIVE), "all": _ALL,
    "blocked": {STATUS.ROLL_FORWARD_AWAITING_PULSE, STATUS.ROLL_BACK_AWAITING_PULSE},
    "failed": {STATUS.ERROR, STATUS.FAILED, STATUS.ROLLED_BACK},
    "inactive": _ALL - set(ACTIVE),
    "paused": {STATUS.ROLL_FORWARD_PAUSED, STATUS.ROLL_BACK_PAUSED},
    "succeeded": {STATUS.ROLLED_FORWARD},
    **{name: {value} for name, value in STATUS._NAMES_TO_VALUES.items()},
}


def timestamp(ms: int | None) -> str:
    """Milliseconds since the epoch as an ISO time in UTC."""
    return datetime.datetime.fromtimestamp((ms or 0) / 1000, datetime.UTC).replace(tzinfo=None).isoformat()


def update_exit(state: int) -> int:
    """An update's end state as `--wait` reports it."""
    return EXIT_OK if state == STATUS.ROLLED_FORWARD else (
        EXIT_COMMAND_FAILURE if state == STATUS.ROLLED_BACK else EXIT_UNKNOWN_ERROR)


def rollback_exit(state: int) -> int:
    """A rollback's end state as `update rollback --wait` reports it."""
    return EXIT_OK if state == STATUS.ROLLED_BACK else (
        EXIT_COMMAND_FAILURE if state == STATUS.ROLLED_FORWARD else EXIT_UNKNOWN_ERROR)


def wait_for_update(ctx: AuroraContext, cluster: str, key: Any, exit_of: Any = update_exit) -> int:
    """Print each state the update passes through until it ends; its exit code."""
    current = None
    while True:
        resp = ctx.check(ctx.call(cluster, "getJobUpdateSummaries", api.JobUpdateQuery(key=key)))
        summaries = resp.result.getJobUpdateSummariesResult.updateSummaries or []
        if not summaries:
            raise CommandError(EXIT_INVALID_PARAMETER, "Job update not found.")
        if len(summaries) > 1:
            raise CommandError(EXIT_API_ERROR, f"Scheduler returned multiple updates: {summaries}")
        state = summaries[0].state.status
        if state != current:
            current = state
            out(f"Current state {STATUS._VALUES_TO_NAMES[state]}")
            if state not in ACTIVE:
                return int(exit_of(state))
        time.sleep(POLL_SECS)


def active_update_key(ctx: AuroraContext, key: JobKey) -> Any:
    """The key of the job's active update, or None."""
    query = api.JobUpdateQuery(jobKey=key.to_thrift(), updateStatuses=set(ACTIVE))
    resp = ctx.check(ctx.call(key.cluster, "getJobUpdateSummaries", query))
    summaries = resp.result.getJobUpdateSummariesResult.updateSummaries or []
    if len(summaries) > 1:
        raise CommandError(EXIT_API_ERROR, "The scheduler returned multiple active updates for this job.")
    return summaries[0].key if summaries else None


def start_update(ctx: AuroraContext, spec: InstanceSpec, config_file: str, bindings: Any, read_json: bool,
                 message: str | None, wait: bool, open_browser: bool) -> int:
    """`update start` (also `job update`, which always waits)."""
    key = spec.key
    config = ctx.get_job_config(key, config_file, bindings, read_json)
    if config.has_cron_schedule():
        raise CommandError(EXIT_COMMAND_FAILURE,
                           'Cron jobs may only be updated with "aurora cron schedule" command')
    update_id = str(uuid.uuid4())
    task = config.job().taskConfig
    request = api.JobUpdateRequest(taskConfig=task, instanceCount=config.instances(),
                                   settings=config.update_settings(spec.instances),
                                   metadata={api.Metadata(key=CLIENT_UPDATE_ID, value=update_id)})
    show_update_diff(ctx, key, api.JobUpdateRequest(taskConfig=task, instanceCount=config.instances(),
                                                    settings=request.settings), None)
    resp = ctx.call(key.cluster, "startJobUpdate", request, message)
    if not _same_update_in_progress(resp, update_id):
        ctx.check(resp, err_code=EXIT_API_ERROR, err_msg="Failed to start update due to error:")
    if resp.result is None or resp.result.startJobUpdateResult is None:
        out(messages(resp))
        return EXIT_OK
    update_key = resp.result.startJobUpdateResult.key
    url = ctx.job_page(key, update_key.id)
    out(f"Job update has started. View your update progress at {url}")
    if open_browser:
        click.launch(url)
    return wait_for_update(ctx, key.cluster, update_key) if wait else EXIT_OK


def _same_update_in_progress(resp: Any, update_id: str) -> bool:
    if resp.responseCode != api.ResponseCode.INVALID_REQUEST or resp.result is None:
        return False
    started = resp.result.startJobUpdateResult
    summary = started.updateSummary if started is not None else None
    ids = [m.value for m in (summary.metadata or []) if m.key == CLIENT_UPDATE_ID] if summary else []
    return ids == [update_id]


@click.group("update")
def update() -> None:
    """Interact with the aurora update service.

    \b
    Example:
      peloton aurora update start devcluster/www/devel/hello hello.aurora --wait
    """


@update.command("start")
@o.bind_option
@o.open_browser_option
@click.option("--healthcheck-interval-seconds", type=int, default=3, help="Seconds between checks.")
@o.read_json_option
@o.message_option
@o.strict_option
@click.option("--wait", is_flag=True, help="Wait until the update completes")
@click.argument("instance_spec", type=o.INSTANCE_SPEC)
@click.argument("config_file")
@verb
def start(ctx: AuroraContext, instance_spec: InstanceSpec, config_file: str, bindings: Any,
          read_json: bool, message: str | None, wait: bool, open_browser: bool, **_: Any) -> int:
    """Start a rolling update of a running job, using the update configuration within the config
    file as a control for update velocity and failure tolerance.

    \b
    Example:
      peloton aurora update start devcluster/www/devel/hello hello.aurora --wait
    """
    return start_update(ctx, instance_spec, config_file, bindings, read_json, message, wait, open_browser)


def _modify(ctx: AuroraContext, key: JobKey, method: str, message: str | None, verb_msg: str,
            done_msg: str) -> tuple[int, Any]:
    update_key = active_update_key(ctx, key)
    if update_key is None:
        err("No active update found for this job.")
        return EXIT_INVALID_PARAMETER, None
    ctx.check(ctx.call(key.cluster, method, update_key, message), err_code=EXIT_API_ERROR,
              err_msg=f"Failed to {verb_msg} update due to error:")
    out(done_msg)
    return EXIT_OK, update_key


def _control(name: str, method: str, verb_msg: str, done_msg: str) -> None:
    @update.command(name, help=f"{verb_msg.capitalize()} the job's active update.\n\n\b\nExample:\n"
                    f"  peloton aurora update {name} devcluster/www/devel/hello")
    @click.argument("jobspec", type=o.JOB_KEY)
    @o.message_option
    @verb
    def command(ctx: AuroraContext, jobspec: JobKey, message: str | None) -> int:
        return _modify(ctx, jobspec, method, message, verb_msg, done_msg)[0]


_control("pause", "pauseJobUpdate", "pause", "Update has been paused.")
_control("resume", "resumeJobUpdate", "resume", "Update has been resumed.")
_control("abort", "abortJobUpdate", "abort", "Update has been aborted.")


@update.command("rollback")
@click.argument("jobspec", type=o.JOB_KEY)
@o.message_option
@click.option("--wait", is_flag=True, help="Wait until the update rolls back")
@verb
def rollback(ctx: AuroraContext, jobspec: JobKey, message: str | None, wait: bool) -> int:
    """Rollback an in-progress update.

    \b
    Example:
      peloton aurora update rollback devcluster/www/devel/hello --wait
    """
    code, update_key = _modify(ctx, jobspec, "rollbackJobUpdate", message, "rollback",
                               "Update rollback has started.")
    if code == EXIT_OK and wait:
        return wait_for_update(ctx, jobspec.cluster, update_key, rollback_exit)
    return code


@update.command("wait")
@click.argument("jobspec", type=o.JOB_KEY)
@click.argument("update_id", metavar="ID", required=False)
@verb
def wait_cmd(ctx: AuroraContext, jobspec: JobKey, update_id: str | None) -> int:
    """Block until an update has entered a terminal state.

    \b
    Example:
      peloton aurora update wait devcluster/www/devel/hello
    """
    key = api.JobUpdateKey(job=jobspec.to_thrift(), id=update_id) if update_id else \
        active_update_key(ctx, jobspec)
    if key is None:
        raise CommandError(EXIT_INVALID_PARAMETER, "Job update not found.")
    return wait_for_update(ctx, jobspec.cluster, key)


@update.command("list")
@click.argument("filter_", metavar="CLUSTER[/ROLE[/ENV[/JOB]]]")
@click.option("--status", "statuses", multiple=True, type=click.Choice(sorted(STATUS_GROUPS)),
              help="Update state to filter by (repeatable).")
@click.option("--user", default=None, metavar="username", help="The user who started the update")
@o.write_json_option
@verb
def list_cmd(ctx: AuroraContext, filter_: str, statuses: tuple[str, ...], user: str | None,
             write_json: bool) -> int:
    """List summaries of job updates.

    \b
    Example:
      peloton aurora update list devcluster/www --status active
    """
    parts = (filter_.split("/") + [None] * 4)[:4] if filter_ else []
    if not filter_ or len(filter_.split("/")) > 4:
        raise click.BadParameter("Update filter must be a path of the form CLUSTER/ROLE/ENV/JOB.")
    cluster, role, env, name = parts
    job = JobKey(cluster, role, env, name) if role and env and name else None  # type: ignore[arg-type]
    wanted = set().union(*(STATUS_GROUPS[s] for s in statuses)) if statuses else None
    query = api.JobUpdateQuery(role=role if job is None else None,
                               jobKey=job.to_thrift() if job else None, user=user, updateStatuses=wanted)
    resp = ctx.check(ctx.call(str(cluster), "getJobUpdateSummaries", query))
    summaries = resp.result.getJobUpdateSummariesResult.updateSummaries or []
    if job is None and env is not None:
        summaries = [s for s in summaries if s.key.job.environment == env]
    rows = [{"job": str(JobKey.from_thrift(str(cluster), s.key.job)), "id": s.key.id, "user": s.user,
             "started": timestamp(s.state.createdTimestampMs),
             "last_modified": timestamp(s.state.lastModifiedTimestampMs),
             "status": STATUS._VALUES_TO_NAMES[s.state.status]} for s in summaries]
    if write_json:
        out(json.dumps(rows, indent=2, separators=(",", ": ")))
        return EXIT_OK
    line = "{:47} {:36} {:15} {:11} {:19} {:19}"
    if rows:
        out(line.format("JOB", "UPDATE ID", "STATUS", "CREATED BY", "STARTED", "LAST MODIFIED"))
    for r in rows:
        out(line.format(r["job"], r["id"], r["status"], str(r["user"]), r["started"], r["last_modified"]))
    return EXIT_OK


def _details_json(jobspec: JobKey, details: Any) -> dict[str, Any]:
    summary = details.update.summary
    doc: dict[str, Any] = {
        "updateId": str(summary.key.id), "job": str(jobspec), "started": summary.state.createdTimestampMs,
        "last_modified": timestamp(summary.state.lastModifiedTimestampMs),
        "status": STATUS._VALUES_TO_NAMES[summary.state.status],
        "update_events": [], "instance_update_events": []}
    if summary.metadata is not None:
        doc["metadata"] = [{m.key: m.value} for m in sorted(summary.metadata, key=lambda m: (m.key, m.value))]
    for event in details.updateEvents or []:
        entry = {"status": STATUS._VALUES_TO_NAMES[event.status], "timestampMs": event.timestampMs}
        if event.message:
            entry["message"] = event.message
        doc["update_events"].append(entry)
    for event in details.instanceEvents or []:
        doc["instance_update_events"].append({
            "instance": event.instanceId, "timestamp": event.timestampMs,
            "action": api.JobUpdateAction._VALUES_TO_NAMES[event.action]})
    return doc


def _print_details(jobspec: JobKey, details: Any) -> None:
    summary = details.update.summary
    out(f"Job: {jobspec}, UpdateID: {summary.key.id}")
    out(f"Started {timestamp(summary.state.createdTimestampMs)}, last activity: "
        f"{timestamp(summary.state.lastModifiedTimestampMs)}")
    out(f"Current status: {STATUS._VALUES_TO_NAMES[summary.state.status]}")
    if details.updateEvents:
        out("Update events:")
        for event in details.updateEvents:
            out(f"Status: {STATUS._VALUES_TO_NAMES[event.status]} at {timestamp(event.timestampMs)}",
                indent=2)
            if event.message:
                out(f"  message: {event.message}", indent=4)
    if details.instanceEvents:
        out("Instance events:")
        for event in details.instanceEvents:
            out(f"Instance {event.instanceId} at {timestamp(event.timestampMs)}: "
                f"{api.JobUpdateAction._VALUES_TO_NAMES[event.action]}", indent=2)
    if summary.metadata is not None:
        out("Metadata:")
        for m in sorted(summary.metadata, key=lambda m: (m.key, m.value)):
            out(f"{m.key}: {m.value}", indent=2)


@update.command("info")
@o.write_json_option
@click.argument("jobspec", type=o.JOB_KEY)
@click.argument("update_id", metavar="ID", required=False)
@verb
def info(ctx: AuroraContext, jobspec: JobKey, update_id: str | None, write_json: bool) -> int:
    """Display detailed status information about an update (the active one without an ID).

    \b
    Example:
      peloton aurora update info devcluster/www/devel/hello
    """
    if update_id:
        key = api.JobUpdateKey(job=jobspec.to_thrift(), id=update_id)
    else:
        key = active_update_key(ctx, jobspec)
        if key is None:
            err("There is no active update for this job.")
            return EXIT_INVALID_PARAMETER
    resp = ctx.check(ctx.call(jobspec.cluster, "getJobUpdateDetails", key, api.JobUpdateQuery(key=key)))
    result = resp.result.getJobUpdateDetailsResult
    details_list = result.detailsList
    if details_list is not None and not details_list:
        err(f"There is no update for key: {key}")
        return EXIT_INVALID_PARAMETER
    details = details_list[0] if details_list else result.details
    if write_json:
        out(json.dumps(_details_json(jobspec, details), indent=2, separators=(",", ": ")))
    else:
        _print_details(jobspec, details)
    return EXIT_OK
