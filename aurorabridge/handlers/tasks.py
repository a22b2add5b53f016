"""Task queries: getTasksWithoutConfigs, getTasksStatus, getPendingReason.

A TaskQuery names jobs (jobKeys, or role/environment/jobName, possibly
partial, or nothing = every bridge job; task ids name their job too) and
filters tasks (statuses, instanceIds, slaveHosts, taskIds, offset/limit).
Per job, one QueryPods call returns every pod's status (task_runs.py).
Small answers (at most `pod_events_max_pods` pods) carry each task's full
event history (GetPodEvents).

Big answers are served through task_answers: identical queries that overlap
share one computation; an answer whose inputs (jobs and QueryPods replies)
are byte-identical to the last one's is the last Response again (and the
processor reuses its encoding); otherwise a run whose PodStatus is
unchanged keeps its converted ScheduledTask and that task's encoding, which
the new reply's is spliced from (codec.EncodedStructs), and its spec is not
fetched, and a pod's earlier runs are read once per current run.  A query
without filters that is surely big (more pods than get event history) is
built from what each pod added to the job's last listing (task_runs.listing):
only the changed pods' runs are looked at; its reply is the filtered path's.

getPendingReason reports, for PENDING tasks, the reason the pod status
carries: the placement engine's explanation of why the pod does not fit; then, so that
unchanged Aurora clients see it, the forecast of the job's pending tasks (when they are
expected to start, what binds them, the best change that starts them sooner), one
ForecastService call per job within `pending_forecast_wall_s`.  A forecast that fails or
times out leaves the reason as it was.
"""

from __future__ import annotations

import hashlib
from functools import partial
from operator import attrgetter
from typing import Any

from aurorabridge import thrift_util
from aurorabridge.atop.job_key import JobKey, check_identifier, job_key
from aurorabridge.codec import EncodedStructs
from aurorabridge.fanout import fanout
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.handlers.task_runs import Target, convert, events, fetch, final, job_runs, listing, runs
from aurorabridge.responses import ok
from aurorabridge.thrift_api import api
from peloton.core.errors import InvalidArgument, PelotonError
from peloton.core.forecast.render import reason_line

Fetched = list[tuple[Target, Any]]  # each target with its QueryPodsResponse


def _targets(ctx: BridgeContext, query: Any) -> list[Target]:
    """The jobs a TaskQuery is about."""
    keys: list[JobKey] = []
    if query.jobKeys:
        keys = [job_key(k, "jobKeys") for k in query.jobKeys]
    elif query.role and query.environment and query.jobName:
        keys = [job_key(api.JobKey(role=query.role, environment=query.environment, name=query.jobName))]
    if keys:
        found = [(k, ctx.directory.job_id(k)) for k in keys]
        return [Target(k.job_name, i) for k, i in found if i is not None]
    parts = [check_identifier(v, what) if v else "" for v, what in
             ((query.role, "role"), (query.environment, "environment"), (query.jobName, "jobName"))]
    targets = [Target(s.name, s.job_id.value) for s in ctx.directory.query(*parts)]
    if query.taskIds:
        wanted = {t.rpartition("-")[0].rpartition("-")[0] for t in query.taskIds}
        targets = [t for t in targets if t.job_id in wanted]
    return targets


def _check(query: Any) -> None:
    if query is None:
        raise InvalidArgument("task query is required", field="query")
    if (query.offset or 0) < 0 or (query.limit or 0) < 0:
        raise InvalidArgument("offset and limit must be >= 0", field="query")


def _fetch(ctx: BridgeContext, query: Any) -> Fetched:
    targets = _targets(ctx, query)
    return list(zip(targets, fanout(lambda t: fetch(ctx, t, query), targets, ctx.handlers.workers),
                    strict=True))


def _tasks(ctx: BridgeContext, query: Any, with_executor: bool, fetched: Fetched) -> tuple[list[Any], bool]:
    """The ScheduledTasks matching a TaskQuery, sorted by job and instance (newest run first),
    paged; and whether they follow from `fetched` alone (not with event history)."""
    if _surely_big(ctx, query, fetched):
        return _big(ctx, query, with_executor, fetched)
    found = fanout(lambda f: runs(ctx, f[0], query, f[1].pods), fetched, ctx.handlers.workers)
    listed = _page(sorted((r for rs in found for r in rs), key=lambda r: (r.job, r.instance, -r.run)),
                   query)
    if len(listed) <= ctx.handlers.pod_events_max_pods:
        histories = fanout(lambda r: events(ctx, r), listed, ctx.handlers.workers)
        return [convert(ctx, r, with_executor, h) for r, h in zip(listed, histories, strict=True)], False
    # Big listings carry no event history, so a run's task depends on its status alone.
    cached = [ctx.answers.task(r.job, r.name, with_executor, r.status,
                               partial(convert, ctx, r, with_executor, None)) for r in listed]
    tasks = EncodedStructs([task for task, _ in cached], [encoded for _, encoded in cached])
    # `fetched` names every current run, and an earlier run listed is remembered per current
    # run once it has ended: the reply follows from `fetched` unless it lists an earlier run
    # that has not ended yet (read afresh each time, it may change while `fetched` does not).
    current = {p.status.pod_id.value for _, resp in fetched for p in resp.pods}
    return tasks, all(final(r.status) or r.status.pod_id.value in current for r in listed)


def _page(listed: list[Any], query: Any) -> list[Any]:
    """The query's page (offset, limit) of a sorted listing."""
    offset = query.offset or 0
    return listed[offset:offset + query.limit] if query.limit else listed[offset:]


def _surely_big(ctx: BridgeContext, query: Any, fetched: Fetched) -> bool:
    """Whether a query lists every run of the fetched pods (no filter) and more of them than
    get event history: each pod has a current run, so its pods alone are enough."""
    if query.statuses or query.instanceIds or query.slaveHosts or query.taskIds:
        return False
    pods = sum(len(resp.pods) for _, resp in fetched) - (query.offset or 0)
    return min(pods, query.limit or pods) > ctx.handlers.pod_events_max_pods


def _big(ctx: BridgeContext, query: Any, with_executor: bool, fetched: Fetched) -> tuple[list[Any], bool]:
    """`_tasks` of an unfiltered big listing, from what each pod adds (task_runs.listing)."""
    listed = _page(sorted(listing(ctx, fetched, with_executor), key=attrgetter("order")), query)
    tasks = EncodedStructs([r.task for r in listed], [r.encoded for r in listed])
    # As in `_tasks`: a run the QueryPods reply names (a pod's current run) or one that has
    # ended follows from `fetched`; an earlier run still stopping or a run a pod waits to
    # start carries a pod id that reply does not name.
    return tasks, all(r.ended or r.current for r in listed)


def _fingerprint(fetched: Fetched) -> tuple[tuple[Target, ...], bytes]:
    """What a big answer is a function of, besides the query: the jobs and their pods (the
    specs it reads are fixed by the config versions in the pod statuses)."""
    digest = hashlib.blake2b(digest_size=20)
    for _target, resp in fetched:
        digest.update(resp.SerializeToString(deterministic=True))
    return tuple(t for t, _ in fetched), digest.digest()


def _task_reply(ctx: BridgeContext, query: Any, with_executor: bool) -> Any:
    """The Response to a task query (see the module docstring for what is shared)."""
    def make(fetched: Fetched) -> tuple[Any, bool]:
        tasks, reusable = _tasks(ctx, query, with_executor, fetched)
        return ok(api.Result(scheduleStatusResult=api.ScheduleStatusResult(tasks=tasks))), reusable

    def compute() -> Any:
        fetched = _fetch(ctx, query)
        return ctx.answers.reply(key, _fingerprint(fetched), lambda: make(fetched))

    _check(query)
    try:
        key = (with_executor, thrift_util.encode(query))
    except Exception:  # a query built by hand with odd values: nothing to share
        return make(_fetch(ctx, query))[0]
    return ctx.answers.shared(key, compute)


def get_tasks_without_configs(ctx: BridgeContext, args: Any) -> Any:
    return _task_reply(ctx, args.query, with_executor=False)


def get_tasks_status(ctx: BridgeContext, args: Any) -> Any:
    return _task_reply(ctx, args.query, with_executor=True)


def _forecast(ctx: BridgeContext, job_id: str, pending: list[Any]) -> str:
    """The forecast line of a job's pending tasks ("" when off, none pending, or it failed:
    the reason is then Peloton's alone, as before)."""
    wall = ctx.handlers.pending_forecast_wall_s
    if wall <= 0 or not pending:
        return ""
    try:
        got = ctx.port.forecast(job_id, sorted({r.instance for r in pending}), wall_secs=wall)
    except PelotonError:
        return ""
    return reason_line(got)


def _reason(run: Any, forecast: str) -> str:
    base = run.status.message or run.status.reason or "Waiting to be placed"
    return f"{base} | forecast: {forecast}" if forecast else base


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
    found = fanout(lambda t: job_runs(ctx, t, pending), targets, ctx.handlers.workers)
    forecasts = fanout(lambda pair: _forecast(ctx, pair[0].job_id, pair[1]),
                       list(zip(targets, found, strict=True)), ctx.handlers.workers)
    reasons = [api.PendingReason(taskId=r.status.pod_id.value or r.name,
                                 reason=_reason(r, line))
               for rs, line in zip(found, forecasts, strict=True) for r in rs]
    return ok(api.Result(getPendingReasonResult=api.GetPendingReasonResult(reasons=reasons)))


HANDLERS: dict[str, HandlerFn] = {
    "getTasksWithoutConfigs": get_tasks_without_configs,
    "getTasksStatus": get_tasks_status,
    "getPendingReason": get_pending_reason,
}
