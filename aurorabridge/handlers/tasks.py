"""Task queries: getTasksWithoutConfigs, getTasksStatus, getPendingReason.

A TaskQuery names jobs (jobKeys, or role/environment/jobName, possibly
partial, or nothing = every bridge job; task ids name their job too) and
filters tasks (statuses, instanceIds, slaveHosts, taskIds, offset/limit).
Per job, one QueryPods call returns every pod with its spec and status;
Peloton is asked to filter by state, name and host, and the bridge filters
again, so an older jobmgr that ignores a filter still answers correctly.
Small answers (at most `pod_events_max_pods` pods) carry each task's full
event history (GetPodEvents); with `pod_runs_depth` > 1 earlier runs of each
instance are listed too (GetPod per instance), as Peloton's bridge did.

getPendingReason reports, for PENDING tasks, the reason the pod status
carries: the placement engine's explanation of why the pod does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aurorabridge import validation
from aurorabridge.atop.job_key import JobKey, check_identifier, job_key
from aurorabridge.atop.states import pod_states
from aurorabridge.fanout import fanout
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.handlers.jobs import query_pods
from aurorabridge.ptoa import basics, states
from aurorabridge.ptoa.scheduled_task import scheduled_task
from aurorabridge.responses import ok
from aurorabridge.thrift_api import api
from peloton.core.errors import InvalidArgument, NotFound


@dataclass(frozen=True, slots=True)
class _Target:
    name: str
    job_id: str


def _targets(ctx: BridgeContext, query: Any) -> list[_Target]:
    """The jobs a TaskQuery is about."""
    keys: list[JobKey] = []
    if query.jobKeys:
        keys = [job_key(k, "jobKeys") for k in query.jobKeys]
    elif query.role and query.environment and query.jobName:
        keys = [job_key(api.JobKey(role=query.role, environment=query.environment, name=query.jobName))]
    if keys:
        found = [(k, ctx.directory.job_id(k)) for k in keys]
        return [_Target(k.job_name, i) for k, i in found if i is not None]
    parts = [check_identifier(v, what) if v else "" for v, what in
             ((query.role, "role"), (query.environment, "environment"), (query.jobName, "jobName"))]
    targets = [_Target(s.name, s.job_id.value) for s in ctx.directory.query(*parts)]
    if query.taskIds:
        wanted = {t.rpartition("-")[0].rpartition("-")[0] for t in query.taskIds}
        targets = [t for t in targets if t.job_id in wanted]
    return targets


def _job_tasks(ctx: BridgeContext, target: _Target, query: Any, with_executor: bool) -> list[tuple[Any, ...]]:
    """(job name, pod name, spec, status, TaskConfig) of the job's runs matching `query`."""
    statuses = set(query.statuses or ())
    instance_ids = set(validation.check_instance_ids(query.instanceIds, "instanceIds"))
    hosts = set(query.slaveHosts or ())
    task_ids = set(query.taskIds or ())
    names = [f"{target.job_id}-{i}" for i in sorted(instance_ids)]
    # Statuses only: thousands of pods share a few specs, fetched once per config version below.
    pods = query_pods(ctx, target.job_id, pod_states(statuses) if statuses else None, names, sorted(hosts),
                      summary_only=True)
    depth = ctx.handlers.pod_runs_depth
    runs: list[tuple[Any, Any, Any]] = []
    specs = _SpecsByVersion(ctx, target.job_id)
    for pod in pods:
        name = pod.spec.pod_name.value or basics.pod_name_of(pod.status.pod_id.value)
        if instance_ids and basics.instance_of(name) not in instance_ids:
            continue
        spec = pod.spec if pod.spec.containers else specs.pod_spec(pod.status.version.value, name)
        runs.append((name, spec, pod.status))
    if depth > 1:
        found = fanout(lambda r: _with_previous(ctx, r, depth), runs, ctx.handlers.workers)
        runs = [r for rs in found for r in rs]
    role = target.name.split("/", 1)[0]
    out = []
    for name, spec, status in runs:
        if statuses and states.schedule_status(status.state) not in statuses:
            continue
        if hosts and status.host not in hosts:
            continue
        if task_ids and status.pod_id.value not in task_ids:
            continue
        task = (ctx.reader.task_config(spec, target.name, role, None, with_executor=with_executor)
                if spec is not None else api.TaskConfig(job=basics.job_key(target.name)))
        out.append((target.name, name, spec, status, task))
    return out


class _SpecsByVersion:
    """Pod specs of one job by config version (one GetJob per version per request)."""

    def __init__(self, ctx: BridgeContext, job_id: str) -> None:
        self._ctx = ctx
        self._job_id = job_id
        self._jobs: dict[str, Any] = {}

    def pod_spec(self, version: str, pod_name: str) -> Any:
        if version not in self._jobs:
            info = self._ctx.directory.get(self._job_id, version) if version else None
            self._jobs[version] = info or self._ctx.directory.get(self._job_id)
        info = self._jobs[version]
        if info is None:
            return None
        spec = info.job_info.spec
        return spec.instance_spec.get(basics.instance_of(pod_name), spec.default_spec)


def _with_previous(ctx: BridgeContext, run: tuple[Any, Any, Any], depth: int) -> list[tuple[Any, Any, Any]]:
    name = run[0]
    try:
        resp = ctx.port.get_pod(name, limit=depth)
    except NotFound:
        return [run]
    return [run] + [(name, p.spec if p.HasField("spec") else run[1], p.status) for p in resp.previous]


def _events(ctx: BridgeContext, name: str, status: Any) -> list[Any]:
    try:
        resp = ctx.port.get_pod_events_v1(name, pod_id=status.pod_id.value)
    except NotFound:
        return []
    return list(resp.events)


def scheduled_tasks(ctx: BridgeContext, query: Any, with_executor: bool) -> list[Any]:
    """The ScheduledTasks matching a TaskQuery, sorted by job and instance, paged."""
    if query is None:
        raise InvalidArgument("task query is required", field="query")
    if (query.offset or 0) < 0 or (query.limit or 0) < 0:
        raise InvalidArgument("offset and limit must be >= 0", field="query")
    targets = _targets(ctx, query)
    found = fanout(lambda t: _job_tasks(ctx, t, query, with_executor), targets, ctx.handlers.workers)
    runs = sorted((r for rs in found for r in rs),
                  key=lambda r: (r[0], basics.instance_of(r[1]), -basics.run_of(r[3].pod_id.value)))
    offset = query.offset or 0
    runs = runs[offset:offset + query.limit] if query.limit else runs[offset:]
    if len(runs) <= ctx.handlers.pod_events_max_pods:
        events = fanout(lambda r: _events(ctx, r[1], r[3]), runs, ctx.handlers.workers)
    else:
        events = [[] for _ in runs]
    return [scheduled_task(name, spec, status, task, evs)
            for (_job, name, spec, status, task), evs in zip(runs, events, strict=True)]


def get_tasks_without_configs(ctx: BridgeContext, args: Any) -> Any:
    tasks = scheduled_tasks(ctx, args.query, with_executor=False)
    return ok(api.Result(scheduleStatusResult=api.ScheduleStatusResult(tasks=tasks)))


def get_tasks_status(ctx: BridgeContext, args: Any) -> Any:
    tasks = scheduled_tasks(ctx, args.query, with_executor=True)
    return ok(api.Result(scheduleStatusResult=api.ScheduleStatusResult(tasks=tasks)))


def get_pending_reason(ctx: BridgeContext, args: Any) -> Any:
    query = args.query
    if query is None:
        raise InvalidArgument("task query is required", field="query")
    if query.statuses or query.slaveHosts:
        raise InvalidArgument("statuses and slaveHosts are not supported in getPendingReason",
                              field="query")
    pending = api.TaskQuery(role=query.role, environment=query.environment, jobName=query.jobName,
                            taskIds=query.taskIds, jobKeys=query.jobKeys, instanceIds=query.instanceIds,
                            statuses=[api.ScheduleStatus.PENDING], offset=query.offset, limit=query.limit)
    targets = _targets(ctx, pending)
    found = fanout(lambda t: _job_tasks(ctx, t, pending, False), targets, ctx.handlers.workers)
    reasons = [api.PendingReason(taskId=status.pod_id.value or name,
                                 reason=status.message or status.reason or "Waiting to be placed")
               for rs in found for _job, name, _spec, status, _task in rs]
    return ok(api.Result(getPendingReasonResult=api.GetPendingReasonResult(reasons=reasons)))


HANDLERS: dict[str, HandlerFn] = {
    "getTasksWithoutConfigs": get_tasks_without_configs,
    "getTasksStatus": get_tasks_status,
    "getPendingReason": get_pending_reason,
}
