"""The pod runs a TaskQuery matches in one job, and their conversion to ScheduledTasks.

`fetch` asks Peloton (one QueryPods call, statuses only: Peloton filters by
state, name and host); `runs` re-applies every filter, since an older jobmgr
may ignore one, and, with `pod_runs_depth` > 1, adds earlier runs of each
instance, as Peloton's bridge did (GetPod per instance; only for instances
whose current run is not their first, so a job whose pods never restarted
costs no extra call; and once per run of the pod: task_answers.earlier_runs).  A run's spec is
looked up only when the run must be converted: a cached task
(task_answers) needs none, and thousands of pods share a few specs, fetched
once per config version and request.  `listing` converts every run of a big
unfiltered listing, pod by pod: what an unchanged pod adds (its runs' tasks and
their encodings, `Listed`) is remembered by its PodInfo's bytes
(task_answers.pods), so a listing where a tenth of 5,000 pods changed builds
runs for those alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from aurorabridge import validation
from aurorabridge.atop.states import pod_states
from aurorabridge.fanout import fanout
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.handlers.jobs import pod_query
from aurorabridge.ptoa import basics, states
from aurorabridge.ptoa.scheduled_task import scheduled_task
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import NotFound


@dataclass(frozen=True, slots=True)
class Target:
    """A job a query is about: its name `role/env/name` and Peloton id."""

    name: str
    job_id: str


class SpecsByVersion:
    """Pod specs of one job by config version (one GetJob per version per request)."""

    def __init__(self, ctx: BridgeContext, job_id: str) -> None:
        self._ctx = ctx
        self._job_id = job_id
        self._jobs: dict[str, Any] = {}

    def pod_spec(self, version: str, pod_name: str) -> Any:
        """The spec of `pod_name` at config `version` (the current one if that is unknown)."""
        if version not in self._jobs:
            info = self._ctx.directory.get(self._job_id, version) if version else None
            self._jobs[version] = info or self._ctx.directory.get(self._job_id)
        info = self._jobs[version]
        if info is None:
            return None
        spec = info.job_info.spec
        return spec.instance_spec.get(basics.instance_of(pod_name), spec.default_spec)


@dataclass(slots=True)
class Run:
    """One run of a pod that matches a query."""

    job: str
    name: str
    status: Any  # PodStatus
    given_spec: Any  # the spec Peloton sent with the pod, or None
    specs: SpecsByVersion
    instance: int
    run: int
    #: The status of a run Peloton has not made yet (waiting_run), else None.
    waiting: int | None = None

    @property
    def schedule_status(self) -> int:
        """The run's ScheduleStatus."""
        return states.schedule_status(self.status.state) if self.waiting is None else self.waiting

    def spec(self) -> Any:
        """The run's PodSpec, or None if its job is gone."""
        if self.given_spec is not None:
            return self.given_spec
        return self.specs.pod_spec(self.status.version.value, self.name)


def _run(target: Target, status: Any, spec: Any, specs: SpecsByVersion) -> Run:
    pod_id = status.pod_id.value
    name = (spec.pod_name.value if spec is not None else "") or basics.pod_name_of(pod_id)
    given = spec if spec is not None and spec.containers else None
    return Run(target.name, name, status, given, specs, basics.instance_of(name), basics.run_of(pod_id))


def waiting_run(run: Run) -> Run | None:
    """The next run of `run`'s pod if the pod waits to start it (its run ended and its goal
    is to run: Aurora has made that task already, THROTTLED or PENDING; ptoa.states), as
    Peloton will name it; else None."""
    waiting = states.waiting_run_status(run.status)
    if waiting is None:
        return None
    version = run.status.desired_version if run.status.desired_version.value else run.status.version
    status = pod_pb2.PodStatus(state=pod_pb2.POD_STATE_PENDING, desired_state=run.status.desired_state,
                               message=run.status.message, reason=run.status.reason,
                               failure_count=run.status.failure_count, version=version,
                               desired_version=version)
    status.pod_id.value = f"{run.name}-{run.run + 1}"
    status.prev_pod_id.value = run.status.pod_id.value
    return Run(run.job, run.name, status, run.given_spec, run.specs, run.instance, run.run + 1, waiting)


def fetch(ctx: BridgeContext, target: Target, query: Any) -> Any:
    """QueryPodsResponse of the target's pods, narrowed by Peloton where it can."""
    statuses = set(query.statuses or ())
    names = [f"{target.job_id}-{i}" for i in validation.check_instance_ids(query.instanceIds, "instanceIds")]
    wanted = pod_states(statuses)
    if statuses & set(states.WAITING_RUN_STATUS.values()):  # a pod whose run ended may wait for its next
        wanted = sorted(set(wanted) | states.TERMINAL_POD_STATES)
    spec = pod_query(wanted if statuses else None, names, sorted(set(query.slaveHosts or ())))
    return ctx.port.query_pods(target.job_id, spec, summary_only=True)


def runs(ctx: BridgeContext, target: Target, query: Any, pods: Iterable[Any]) -> list[Run]:
    """The runs among `pods` (a QueryPodsResponse's) that match `query`."""
    statuses = set(query.statuses or ())
    instance_ids = set(validation.check_instance_ids(query.instanceIds, "instanceIds"))
    hosts = set(query.slaveHosts or ())
    task_ids = set(query.taskIds or ())
    groups = pod_runs(ctx, target, pods, instance_ids)
    found = [r for rs, _, _ in groups for r in rs] + [w for _, w, _ in groups if w is not None]
    return [r for r in found
            if (not statuses or r.schedule_status in statuses)
            and (not hosts or r.status.host in hosts)
            and (not task_ids or r.status.pod_id.value in task_ids)]


#: A pod's runs: its current run then its earlier ones (newest first), the run it waits to
#: start (waiting_run) or None, and whether they all follow from the pod's status alone
#: (no earlier runs, or the remembered ones: task_answers.earlier_runs).
PodRuns = tuple[list[Run], Run | None, bool]


def pod_runs(ctx: BridgeContext, target: Target, pods: Iterable[Any],
             instance_ids: set[int] | frozenset[int] = frozenset()) -> list[PodRuns]:
    """The runs of each of `pods` (PodInfos) of `instance_ids` (every one if empty)."""
    specs = SpecsByVersion(ctx, target.job_id)
    found = [_run(target, p.status, p.spec if p.HasField("spec") else None, specs) for p in pods]
    if instance_ids:
        found = [r for r in found if r.instance in instance_ids]
    depth = ctx.handlers.pod_runs_depth
    if depth > 1 and any(has_previous(r.status) for r in found):
        earlier = _with_earlier(ctx, target, found, depth)
        return [([run, *before], waiting_run(run), settled)
                for run, (before, settled) in zip(found, earlier, strict=True)]
    return [([run], waiting_run(run), True) for run in found]


def has_previous(status: Any) -> bool:
    """Whether a pod's current run has earlier runs (its run number is above 1)."""
    return basics.run_of(status.pod_id.value) > 1


def job_runs(ctx: BridgeContext, target: Target, query: Any) -> list[Run]:
    """`runs` of a fresh `fetch`."""
    return runs(ctx, target, query, fetch(ctx, target, query).pods)


def _with_earlier(ctx: BridgeContext, target: Target, found: list[Run],
                  depth: int) -> list[tuple[list[Run], bool]]:
    """The earlier runs of each of `found`'s pods, newest first, and whether they are
    remembered: remembered per current run (task_answers.earlier_runs), else one GetPod per
    pod, concurrently."""
    keys = [(target.job_id, r.name, r.status.pod_id.value, depth) if has_previous(r.status) else None
            for r in found]
    known = [ctx.answers.earlier_runs(k) if k is not None else () for k in keys]
    settled = [got is not None for got in known]
    missing = [i for i, got in enumerate(known) if got is None]
    for i, got in zip(missing, fanout(lambda i: _earlier(ctx, found[i], depth), missing,
                                      ctx.handlers.workers), strict=True):
        known[i] = got
        key = keys[i]
        # Only finished runs are remembered: an earlier run still stopping (KILLING while
        # the pod's next run exists) changes, and is read again until it has ended.
        if got is not None and key is not None and all(final(status) for status, _ in got):
            ctx.answers.remember_earlier_runs(key, got)
            settled[i] = True
    # An earlier run without a spec had its config version's spec; the current run's would
    # describe the wrong config after an update.
    return [([_run(target, status, spec, run.specs) for status, spec in earlier or ()], ok)
            for run, earlier, ok in zip(found, known, settled, strict=True)]


def final(status: Any) -> bool:
    """Whether a run has ended (its record no longer changes)."""
    return status.state in states.TERMINAL_POD_STATES


def _earlier(ctx: BridgeContext, run: Run, depth: int) -> tuple[tuple[Any, Any], ...] | None:
    """(status, spec or None) of each earlier run of `run`'s pod, newest first (GetPod); None if
    the pod is gone.  Runs from `run` on are left out: the pod may have moved on since it was
    listed, and the entry is kept for `run`."""
    try:
        resp = ctx.port.get_pod(run.name, limit=depth)
    except NotFound:
        return None
    return tuple((p.status, p.spec if p.HasField("spec") else None) for p in resp.previous
                 if basics.run_of(p.status.pod_id.value) < run.run)


@dataclass(frozen=True, slots=True)
class Listed:
    """One run of a big listing, converted (no event history): what its reply needs of it."""

    order: tuple[str, int, int]  # (job, instance, -run): the listing's order
    ended: bool  # final(): its record no longer changes
    current: bool  # its pod's current run: named by the QueryPods reply
    task: Any  # ScheduledTask, shared (task_answers.task)
    encoded: bytes


def listing(ctx: BridgeContext, fetched: list[tuple[Target, Any]], with_executor: bool) -> list[Listed]:
    """Every run of the `fetched` pods (each target with its QueryPodsResponse), converted, in
    the order `runs` gives them with no filter: per job, each pod's current run then its
    earlier ones, then the runs pods wait to start.  What a pod adds is remembered by its
    PodInfo's bytes until the job's next listing (task_answers.pods), so an unchanged pod
    costs one lookup."""
    out: list[Listed] = []
    for target, resp in fetched:
        pods = resp.pods
        last = ctx.answers.pods((target.name, with_executor))
        keys = [p.SerializeToString(deterministic=True) for p in pods]
        known: list[Any] = [last.get(k) for k in keys]
        missing = [i for i, got in enumerate(known) if got is None]
        groups = pod_runs(ctx, target, [pods[i] for i in missing]) if missing else []
        unsettled = []
        for i, (rs, waiting, settled) in zip(missing, groups, strict=True):
            known[i] = (tuple(_listed(ctx, r, with_executor, r is rs[0]) for r in rs),
                        (_listed(ctx, waiting, with_executor, False),) if waiting is not None else ())
            if not settled:
                unsettled.append(keys[i])
        remembered = dict(zip(keys, known, strict=True))
        for key in unsettled:  # an earlier run still stopping: looked at again next time
            remembered.pop(key, None)
        ctx.answers.remember_pods((target.name, with_executor), remembered)
        waiting_runs: list[Listed] = []
        for runs_of_pod, waiting_of_pod in known:
            out.extend(runs_of_pod)
            waiting_runs.extend(waiting_of_pod)
        out.extend(waiting_runs)
    return out


def _listed(ctx: BridgeContext, run: Run, with_executor: bool, current: bool) -> Listed:
    task, encoded = ctx.answers.task(run.job, run.name, with_executor, run.status,
                                     partial(convert, ctx, run, with_executor, None))
    return Listed((run.job, run.instance, -run.run), final(run.status), current, task, encoded)


def events(ctx: BridgeContext, run: Run) -> list[Any]:
    """The run's event history, newest first (empty if the pod is gone)."""
    try:
        resp = ctx.port.get_pod_events_v1(run.name, pod_id=run.status.pod_id.value)
    except NotFound:
        return []
    return list(resp.events)


def convert(ctx: BridgeContext, run: Run, with_executor: bool, history: list[Any] | None) -> Any:
    """The ScheduledTask of a run (TaskConfig without executorConfig unless `with_executor`)."""
    spec = run.spec()
    task = (ctx.reader.task_config(spec, run.job, run.job.split("/", 1)[0], None, with_executor=with_executor)
            if spec is not None else api.TaskConfig(job=basics.job_key(run.job)))
    return scheduled_task(run.name, spec, run.status, task, history, run.schedule_status)
