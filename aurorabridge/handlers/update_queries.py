"""Update queries: getJobUpdateSummaries, getJobUpdateDetails, getJobUpdateDiff.

Updates are read from ListJobWorkflows per job (at most `updates_limit`
workflows each; jobs chosen by the query's key, job key or role).  An
update and its rollback share one id and are presented as one update.
Filters (id, statuses, user) apply to the joined result; results are newest
first, then offset/limit.  Details also carry the desired TaskConfig (the
job's config at the workflow's target version) and the initial one (at the
version it started from) in `initialState`, one GetJob per version.

getJobUpdateDiff compares a proposed config with the job through
GetReplaceJobDiff; for a job that does not exist everything is added.
"""

from __future__ import annotations

from typing import Any

from aurorabridge import opaque_data, validation
from aurorabridge.atop.job_key import JobKey, check_identifier, job_key
from aurorabridge.fanout import fanout
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.job_directory import is_gone
from aurorabridge.ptoa import basics
from aurorabridge.ptoa.updates import join_rollback, update_details
from aurorabridge.responses import ok
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.core.errors import InvalidArgument


def _jobs(ctx: BridgeContext, query: Any) -> list[tuple[JobKey, str]]:
    if query.key is not None or query.jobKey is not None:
        key = job_key(query.key.job if query.key is not None else query.jobKey)
        job_id = ctx.directory.job_id(key)
        return [(key, job_id)] if job_id else []
    role = check_identifier(query.role, "role") if query.role else ""
    out = []
    for s in ctx.directory.query(role=role):
        k = basics.job_key(s.name)
        if k is not None:
            out.append((JobKey(k.role, k.environment, k.name), s.job_id.value))
    return out


def _task_at(ctx: BridgeContext, job_id: str, version: str) -> Any:
    """The job's TaskConfig at entity `version` (None when unknown or gone)."""
    if not version or version.split("-", 1)[0] in ("", "0"):
        return None
    info = ctx.directory.get(job_id, version)
    if info is None:
        return None
    spec = info.job_info.spec
    return ctx.reader.task_config(spec.default_spec, spec.name, spec.owner, spec.sla)


def _job_updates(ctx: BridgeContext, key: JobKey, job_id: str, details: bool) -> list[Any]:
    resp = ctx.port.list_job_workflows(job_id, updates_limit=ctx.handlers.updates_limit,
                                       instance_events=details)
    key_struct = api.JobKey(role=key.role, environment=key.environment, name=key.name)
    found: list[tuple[Any, opaque_data.OpaqueData]] = []
    for workflow in resp.workflow_infos:
        data = opaque_data.parse(workflow.opaque_data.data)
        if data.update_id and workflow.status.type == stateless_pb2.WORKFLOW_TYPE_UPDATE:
            found.append((workflow, data))
    # Newest workflow first: per update id the first is the rollback (if any), the next the update.
    by_id: dict[str, list[tuple[Any, opaque_data.OpaqueData]]] = {}
    for w, d in found:
        by_id.setdefault(d.update_id, []).append((w, d))
    joined = []
    for group in by_id.values():
        converted = [update_details(key_struct, w, d,
                                    _task_at(ctx, job_id, w.status.version.value) if details else None,
                                    _task_at(ctx, job_id, w.status.prev_version.value) if details else None)
                     for w, d in group[:2]]
        if len(group) > 1 and group[0][1].rollback and not group[1][1].rollback:
            joined.append(join_rollback(converted[1], converted[0]))
        else:
            joined.append(converted[0])
    return joined


def query_updates(ctx: BridgeContext, query: Any, details: bool) -> list[Any]:
    """JobUpdateDetails matching a JobUpdateQuery, newest first."""
    if query is None:
        raise InvalidArgument("update query is required", field="jobUpdateQuery")
    if (query.offset or 0) < 0 or (query.limit or 0) < 0:
        raise InvalidArgument("offset and limit must be >= 0", field="jobUpdateQuery")
    jobs = _jobs(ctx, query)
    found = fanout(lambda j: _job_updates(ctx, j[0], j[1], details), jobs, ctx.handlers.workers)
    wanted_id = query.key.id if query.key is not None and query.key.id else ""
    statuses = set(query.updateStatuses or ())
    out = [d for ds in found for d in ds
           if (not wanted_id or d.update.summary.key.id == wanted_id)
           and (not statuses or d.update.summary.state.status in statuses)
           and (not query.user or d.update.summary.user == query.user)]
    out.sort(key=lambda d: -d.update.summary.state.createdTimestampMs)
    offset = query.offset or 0
    return out[offset:offset + query.limit] if query.limit else out[offset:]


def get_job_update_summaries(ctx: BridgeContext, args: Any) -> Any:
    summaries = [d.update.summary for d in query_updates(ctx, args.jobUpdateQuery, details=False)]
    result = api.GetJobUpdateSummariesResult(updateSummaries=summaries)
    return ok(api.Result(getJobUpdateSummariesResult=result))


def get_job_update_details(ctx: BridgeContext, args: Any) -> Any:
    query = args.query if args.query is not None else api.JobUpdateQuery()
    if args.key is not None:  # the older form names one update
        query.key = args.key
    found = query_updates(ctx, query, details=True)
    result = api.GetJobUpdateDetailsResult(details=found[0] if found else None, detailsList=found)
    return ok(api.Result(getJobUpdateDetailsResult=result))


def get_job_update_diff(ctx: BridgeContext, args: Any) -> Any:
    request = args.request
    if request is None:
        raise InvalidArgument("update request is required", field="request")
    checked = validation.check_task(request.taskConfig, request.instanceCount, ctx.limits)
    if request.settings is not None:
        validation.check_update_settings(request.settings, checked.instance_count)
    job = ctx.find(checked.key)
    new_task = checked.task
    if job is None or is_gone(job.status, job.spec.instance_count):
        add = [api.ConfigGroup(config=new_task, instances=basics.ranges(range(checked.instance_count)))]
        return ok(api.Result(getJobUpdateDiffResult=api.GetJobUpdateDiffResult(
            add=add, remove=[], update=[], unchanged=[])))
    spec = ctx.job_spec(checked, pool=job.spec.respool_id.value)
    diff = ctx.port.get_replace_job_diff(job.job_id, job.version, spec)
    old_task = ctx.reader.task_config(job.spec.default_spec, job.spec.name, job.spec.owner, job.spec.sla)

    def groups(ranges: Any, task: Any) -> list[Any]:
        ids = basics.ids_of_ranges(ranges)
        return [api.ConfigGroup(config=task, instances=basics.ranges(ids))] if ids else []

    return ok(api.Result(getJobUpdateDiffResult=api.GetJobUpdateDiffResult(
        add=groups(diff.instances_added, new_task), remove=groups(diff.instances_removed, old_task),
        update=groups(diff.instances_updated, new_task),
        unchanged=groups(diff.instances_unchanged, old_task))))


HANDLERS: dict[str, HandlerFn] = {
    "getJobUpdateSummaries": get_job_update_summaries,
    "getJobUpdateDetails": get_job_update_details,
    "getJobUpdateDiff": get_job_update_diff,
}
