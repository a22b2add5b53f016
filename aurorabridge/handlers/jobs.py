"""Job-level methods: listings, config summaries, create, add instances, kill, restart.

| Aurora | Peloton |
|---|---|
| getJobSummary, getJobs, getRoleSummary | QueryJobs on bridge labels (+ GetJob when a job's version moved) |
| getConfigSummary | QueryPods, grouped by TaskConfig |
| populateJobConfig | validation only |
| createJob | CreateJob (or ReplaceJob restarting a killed job of the same name) |
| addInstances | ReplaceJob with a larger instance count |
| killTasks | StopJob (all instances) or StopPod per instance |
| restartShards | RestartJob over the instances |

Killed jobs (desired state KILLED) and jobs scaled to 0 are not listed, as
Aurora forgets a job once it is killed.  createJob, addInstances and
restartShards refuse jobs with an Aurora update in progress (Peloton would
silently replace the update).
"""

from __future__ import annotations

from typing import Any

from aurorabridge import validation
from aurorabridge.atop.job_key import check_identifier, job_key
from aurorabridge.fanout import fanout
from aurorabridge.handlers import cron
from aurorabridge.handlers.context import BridgeContext, HandlerFn, Job
from aurorabridge.handlers.instance_specs import update_job_spec
from aurorabridge.job_directory import is_gone
from aurorabridge.ptoa import basics
from aurorabridge.ptoa import jobs as ptoa_jobs
from aurorabridge.ptoa.states import TERMINAL_POD_STATES
from aurorabridge.responses import invalid_request, ok, updating_error
from aurorabridge.thrift_api import api
from aurorabridge.thrift_util import canonical
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import InvalidArgument

NO_TASKS_TO_KILL = "No tasks to kill."


def listed_jobs(ctx: BridgeContext, role: Any) -> list[tuple[Any, Any]]:
    """(summary, JobConfig) of every listed bridge job of `role` (all roles if empty)."""
    role = check_identifier(role, "role") if role else ""
    summaries = [s for s in ctx.directory.query(role=role)
                 if not is_gone(s.status, s.instance_count) and basics.job_key(s.name) is not None]
    configs = [ctx.directory.cached(s) for s in summaries]
    misses = [i for i, c in enumerate(configs) if c is None]  # fan out only what must be fetched
    for i, config in zip(misses, fanout(ctx.directory.config, [summaries[i] for i in misses],
                                        ctx.handlers.workers), strict=True):
        configs[i] = config
    return [(s, c) for s, c in zip(summaries, configs, strict=True) if c is not None]


def _newest_by_name(listed: list[tuple[Any, Any]]) -> dict[str, tuple[Any, Any]]:
    """One (summary, config) per job name: the newest job (cron runs share their name)."""
    out: dict[str, tuple[Any, Any]] = {}
    for s, c in sorted(listed, key=lambda sc: sc[0].status.creation_time):
        out[s.name] = (s, c)
    return out


def _cron_task(ctx: BridgeContext, job: Any) -> Any:
    spec = job.stateless_spec
    return ctx.reader.task_config(spec.default_spec, spec.name, spec.owner, spec.sla)


def get_job_summary(ctx: BridgeContext, args: Any) -> Any:
    role = check_identifier(args.role, "role") if args.role else ""
    live = _newest_by_name(listed_jobs(ctx, role))
    crons = {j.name: j for j in cron.cron_jobs(ctx, role)}
    summaries = []
    for name in sorted(set(live) | set(crons)):
        s, c = live.get(name, (None, None))
        stats = s.status.pod_stats if s is not None else {}
        j = crons.get(name)
        if j is None:
            summaries.append(ptoa_jobs.job_summary(basics.job_key(name), c.owner, c.task_config,
                                                   s.instance_count, stats))
            continue
        summaries.append(ptoa_jobs.job_summary(
            basics.job_key(name), j.stateless_spec.owner, _cron_task(ctx, j),
            j.stateless_spec.instance_count, stats, j.schedule, cron.POLICY_FROM_PB[j.collision_policy],
            j.next_run_ms or None))
    return ok(api.Result(jobSummaryResult=api.JobSummaryResult(summaries=summaries)))


def get_jobs(ctx: BridgeContext, args: Any) -> Any:
    role = check_identifier(args.ownerRole, "ownerRole") if args.ownerRole else ""
    live = _newest_by_name(listed_jobs(ctx, role))
    crons = {j.name: j for j in cron.cron_jobs(ctx, role)}
    configs = []
    for name in sorted(set(live) | set(crons)):
        j = crons.get(name)
        if j is not None:  # Aurora lists a cron job from its template, run or not
            configs.append(ptoa_jobs.job_configuration(
                basics.job_key(name), j.stateless_spec.owner, _cron_task(ctx, j),
                j.stateless_spec.instance_count, j.schedule, cron.POLICY_FROM_PB[j.collision_policy]))
            continue
        s, c = live[name]
        configs.append(ptoa_jobs.job_configuration(basics.job_key(name), c.owner, c.task_config,
                                                   ptoa_jobs.active_count(s.status.pod_stats)))
    return ok(api.Result(getJobsResult=api.GetJobsResult(configs=configs)))


def get_role_summary(ctx: BridgeContext, args: Any) -> Any:
    names: dict[str, set[str]] = {}
    for s in ctx.directory.query():
        key = basics.job_key(s.name)
        if key is not None and not is_gone(s.status, s.instance_count):
            names.setdefault(key.role, set()).add(s.name)
    crons: dict[str, int] = {}
    for j in cron.cron_jobs(ctx):
        key = basics.job_key(j.name)
        if key is not None:
            names.setdefault(key.role, set()).add(j.name)
            crons[key.role] = crons.get(key.role, 0) + 1
    summaries = [api.RoleSummary(role=r, jobCount=len(n), cronJobCount=crons.get(r, 0))
                 for r, n in sorted(names.items())]
    return ok(api.Result(roleSummaryResult=api.RoleSummaryResult(summaries=summaries)))


def query_pods(ctx: BridgeContext, job_id: str, states: list[Any] | None = None,
               names: list[str] | None = None, hosts: list[str] | None = None,
               summary_only: bool = False) -> list[Any]:
    """PodInfos of a job, optionally filtered (Peloton filters; callers re-check)."""
    resp = ctx.port.query_pods(job_id, pod_query(states, names, hosts), summary_only=summary_only)
    return list(resp.pods)


def pod_query(states: list[Any] | None = None, names: list[str] | None = None,
              hosts: list[str] | None = None) -> Any:
    """The QuerySpec of a QueryPods call (empty lists match everything)."""
    return pod_pb2.QuerySpec(pod_states=states or [], hosts=hosts or [],
                             names=[peloton_pb2.PodName(value=n) for n in names or []])


def get_config_summary(ctx: BridgeContext, args: Any) -> Any:
    key = job_key(args.job)
    job = ctx.find(key)
    groups: dict[int, tuple[Any, list[int]]] = {}
    if job is not None:
        spec = job.spec
        for pod in query_pods(ctx, job.job_id):
            if pod.status.state in TERMINAL_POD_STATES:
                continue
            task = ctx.reader.task_config(pod.spec, spec.name, spec.owner, spec.sla)
            groups.setdefault(id(task), (task, []))[1].append(basics.instance_of(pod.spec.pod_name.value))
    config_groups = [api.ConfigGroup(config=task, instances=basics.ranges(ids))
                     for task, ids in groups.values()]
    summary = api.ConfigSummary(key=args.job, groups=config_groups)
    return ok(api.Result(configSummaryResult=api.ConfigSummaryResult(summary=summary)))


def populate_job_config(ctx: BridgeContext, args: Any) -> Any:
    checked = validation.check_job_configuration(args.description, ctx.limits, cron=None)
    task = canonical(checked.task)
    task.job = api.JobKey(role=checked.key.role, environment=checked.key.environment, name=checked.key.name)
    return ok(api.Result(populateJobResult=api.PopulateJobResult(taskConfig=task)))


def create_job(ctx: BridgeContext, args: Any) -> Any:
    checked = validation.check_job_configuration(args.description, ctx.limits)
    existing = ctx.find(checked.key)
    if (existing is not None and not is_gone(existing.status, existing.spec.instance_count)) \
            or cron.cron_job(ctx, checked.key) is not None:
        return invalid_request(f"Job {checked.key} already exists")
    spec = ctx.job_spec(checked, pool=existing.spec.respool_id.value if existing is not None else "")
    if existing is None:
        created = ctx.port.create_stateless_job(spec)
        _await_tasks(ctx, created.job_id.value, spec.instance_count)
        return ok()
    # The key of a killed job is the same Peloton job (Peloton keeps name -> id, and so did
    # its bridge): bring it back with the new config, every instance started as new.
    ctx.port.replace_job(existing.job_id, existing.version, update_job_spec(ctx, existing, spec),
                         stateless_pb2.UpdateSpec(batch_size=0, start_pods=True))
    return ok()


#: Seconds between looks for a new job's tasks (`_await_tasks`).
TASKS_POLL_S = 0.02


def _await_tasks(ctx: BridgeContext, job_id: str, count: int) -> None:
    """Return once the job has `count` pods, or after `create_visible_s`.

    Aurora stores a new job's tasks PENDING before createJob answers, and its client's
    `job create` checks for them right after; Peloton's job engine creates them a moment
    after CreateJob answers, so without this wait a busy cluster answers "no tasks".
    Past the deadline the job still exists and its tasks follow: createJob stays OK.
    """
    deadline = ctx.clock() + ctx.handlers.create_visible_s
    while len(query_pods(ctx, job_id, summary_only=True)) < count and ctx.clock() < deadline:
        ctx.sleep(TASKS_POLL_S)


def _not_updating(ctx: BridgeContext, job: Job) -> Any | None:
    data = ctx.active_update(job)
    if data is None:
        return None
    return updating_error(f"job {job.key} has update {data.update_id} in progress; "
                          "finish or abort it first")


def add_instances(ctx: BridgeContext, args: Any) -> Any:
    if args.key is None:
        raise InvalidArgument("instance key is required", field="key")
    key = job_key(args.key.jobKey)
    template, count = args.key.instanceId, args.count
    if template is None or template < 0:
        raise InvalidArgument("instance key needs a non-negative instanceId", field="instanceId")
    if count is None or count <= 0:
        raise InvalidArgument(f"count must be positive, got {count}", field="count")
    if cron.cron_job(ctx, key) is not None:
        return invalid_request("Instances may not be added to cron jobs.")
    job = ctx.require(key)
    current = job.spec.instance_count
    if template >= current or is_gone(job.status, current):
        return invalid_request(f"instance {template} of {key} does not exist")
    validation.check_instance_count(current + count, ctx.limits)
    busy = _not_updating(ctx, job)
    if busy is not None:
        return busy
    spec = stateless_pb2.JobSpec()
    spec.CopyFrom(job.spec)
    spec.instance_count = current + count
    if template in spec.instance_spec:
        for i in range(current, current + count):
            spec.instance_spec[i].CopyFrom(spec.instance_spec[template])
    ctx.port.replace_job(job.job_id, job.version, spec, stateless_pb2.UpdateSpec(batch_size=0))
    return ok()


def live_instances(ctx: BridgeContext, job: Job) -> set[int]:
    """Instances of the job with a pod that is not terminal (pending, running, killing)."""
    return {basics.instance_of(p.spec.pod_name.value) for p in query_pods(ctx, job.job_id)
            if p.status.state not in TERMINAL_POD_STATES}


def kill_tasks(ctx: BridgeContext, args: Any) -> Any:
    key = job_key(args.job)
    wanted = validation.check_instance_ids(args.instances, "instances")
    job = ctx.find(key)
    if job is None:
        return ok(None, NO_TASKS_TO_KILL)
    count = job.spec.instance_count
    ids = [i for i in wanted if i < count]
    # "No tasks" only when none of the named instances has a live task, whatever the job's
    # desired state says (a job being killed, or revived, may still have some).
    live = live_instances(ctx, job)
    if not (live & set(ids) if wanted else live):
        return ok(None, NO_TASKS_TO_KILL)
    if not wanted or len(ids) == count:
        ctx.port.stop_stateless_job(job.job_id, job.version)
        return ok()

    def stop(instance: int) -> None:
        ctx.port.stop_pod(f"{job.job_id}-{instance}")

    fanout(stop, ids, ctx.handlers.workers)
    return ok()


def restart_shards(ctx: BridgeContext, args: Any) -> Any:
    key = job_key(args.job)
    ids = validation.check_instance_ids(args.shardIds, "shardIds")
    if not ids:
        raise InvalidArgument("shardIds must name at least one instance", field="shardIds")
    job = ctx.require(key)
    count = job.spec.instance_count
    if is_gone(job.status, count) or ids[-1] >= count:
        return invalid_request("Not all requested shards are active.")
    busy = _not_updating(ctx, job)
    if busy is not None:
        return busy
    ranges = [pod_pb2.InstanceIDRange(**{"from": r.first, "to": r.last + 1}) for r in basics.ranges(ids)]
    ctx.port.restart_stateless_job(job.job_id, job.version,
                                   stateless_pb2.RestartSpec(batch_size=0, ranges=ranges))
    return ok()


HANDLERS: dict[str, HandlerFn] = {
    "getJobSummary": get_job_summary,
    "getJobs": get_jobs,
    "getRoleSummary": get_role_summary,
    "getConfigSummary": get_config_summary,
    "populateJobConfig": populate_job_config,
    "createJob": create_job,
    "addInstances": add_instances,
    "killTasks": kill_tasks,
    "restartShards": restart_shards,
}
