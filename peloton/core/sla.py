"""SLA arithmetic of host drains: which runs on draining hosts may go down now.

The job manager's evictor takes a snapshot of every job with runs on a draining host
(`JobSla`: each instance's availability) and the runs it would move (`Candidate`s, each
with its host's `DrainRequest` and the task's own SLA), and asks `plan_drain` which may go
now.  Runs that may not stay where they are; the evictor asks again next round, when
instances moved earlier may be back.  A host goes DOWN only once its last run has ended,
so a drain never takes a host down while that would break a job's SLA, unless the
drain is forced.

Candidates of one job are checked one at a time, in instance order, each one allowed
counting as down for the next (Aurora's MaintenanceController checks task by task, and
Peloton's filterRuntimeDiffsBySLA instance by instance).  The rules:

* **Peloton** (`MaxUnavailable`, DrainMode.JOB_SLA: pkg/jobmgr/cached/job.go,
  getInstanceAvailability and filterRuntimeDiffsBySLA): only service jobs with
  maximum_unavailable_instances > 0 are checked; a candidate may go if it is already
  unavailable or fewer than that many instances are.  An instance is *available* when its
  current run is the desired one, RUNNING with goal RUNNING, and healthy (or has no health
  check); *killed* when its goal is KILLED (or PREEMPTING), or it was stopped for any
  reason but maintenance, an update or a failure; *deleted* with goal DELETED; otherwise
  *unavailable*.
* **Aurora** (`PercentageSla`, `CountSla`, DrainMode.SLA_POLICY: SlaManager.checkSla and
  meetsSLAInstances): the task's own policy, else the request's default.  `total` is the
  job's active instances (goal RUNNING or SUCCEEDED), `running` the others RUNNING (and
  healthy) for more than `duration_secs`.  Percentage: running/total*100 >= p, where a p
  that lets no instance go (floor((1 - p/100) * total) < 1) is lowered to
  (total-1)/total*100.  Count: running >= c, where c > total - 1 is lowered to total - 1.
  No check at all for a job with fewer active instances than `min_required_instances`,
  nor for a non-production task unless `check_non_production`.  Coordinator policies are
  not consulted (the task waits for the drain's timeout).  After `timeout_secs` every
  candidate of the host may go.
* **Forced** (DrainMode.FORCE, Aurora's drainHosts): every candidate may go.

Preemption victims are not checked (Peloton checks only maintenance and SLA-aware
restarts).  The label `peloton/sla-policy` carries a task's own SLA (`task_sla_label`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.sla_policy import (
    CoordinatorSla,
    CountSla,
    DrainMode,
    DrainRequest,
    MaxUnavailable,
    PercentageSla,
    SlaPolicy,
)
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.states import HealthState, TaskState

S = TaskState

#: The task label that carries a task's own SLA (JSON, see `task_sla_label`).
TASK_SLA_LABEL = "peloton/sla-policy"

#: Stops that leave an instance unavailable rather than killed (Peloton).
_UNAVAILABLE_STOPS = frozenset({TerminationReason.KILLED_HOST_MAINTENANCE,
                                TerminationReason.KILLED_FOR_UPDATE, TerminationReason.FAILED})
_HEALTHY = frozenset({HealthState.HEALTHY, HealthState.DISABLED})
_LIVE_GOALS = frozenset({S.RUNNING, S.SUCCEEDED})


class Availability(StrEnum):
    """Peloton's InstanceAvailability of one instance."""

    AVAILABLE = "AVAILABLE"
    UNAVAILABLE = "UNAVAILABLE"
    KILLED = "KILLED"
    DELETED = "DELETED"


def availability(rt: TaskRuntime) -> Availability:
    """Peloton's classification of an instance from its runtime (see the module docstring)."""
    if rt.goal_state is S.DELETED:
        return Availability.DELETED
    if rt.goal_state in (S.KILLED, S.PREEMPTING):
        return Availability.KILLED
    if rt.termination is not TerminationReason.NONE:
        return (Availability.UNAVAILABLE if rt.termination in _UNAVAILABLE_STOPS
                else Availability.KILLED)
    if _moving(rt):
        return Availability.KILLED
    if rt.state is S.RUNNING and rt.goal_state is S.RUNNING and rt.healthy in _HEALTHY:
        return Availability.AVAILABLE
    return Availability.UNAVAILABLE


def _moving(rt: TaskRuntime) -> bool:
    """The current run is not the one wanted (a restart or an update is pending)."""
    return (rt.desired_run_id != 0 and rt.run_id != rt.desired_run_id) or \
        rt.config_version != rt.desired_config_version


@dataclass(frozen=True, slots=True)
class InstanceSla:
    """What the SLA rules read of one instance."""

    instance: int
    availability: Availability
    #: Meant to run (goal RUNNING or SUCCEEDED): Aurora's "active".
    active: bool
    #: Wall time its run became RUNNING, if it is RUNNING, healthy and not being stopped.
    running_since: float | None = None


def instance_sla(instance: int, rt: TaskRuntime) -> InstanceSla:
    """The SLA view of a task runtime."""
    running = (rt.state is S.RUNNING and rt.goal_state in _LIVE_GOALS and rt.healthy in _HEALTHY
               and rt.termination is TerminationReason.NONE and not _moving(rt))
    return InstanceSla(instance, availability(rt), rt.goal_state in _LIVE_GOALS,
                       rt.start_time if running else None)


@dataclass(frozen=True, slots=True)
class JobSla:
    """A job's SLA inputs: its kind, Peloton's limit and every instance."""

    job_id: str
    #: Peloton checks service (long-running) jobs only.
    service: bool
    #: SlaSpec.maximum_unavailable_instances (0: no limit).
    max_unavailable: int
    instances: tuple[InstanceSla, ...]


@dataclass(frozen=True, slots=True)
class TaskSla:
    """A task's own SLA settings: Aurora's TaskConfig.slaPolicy and whether its tier is
    production (a task without the label is production and has no policy)."""

    policy: SlaPolicy | None = None
    production: bool = True


@dataclass(frozen=True, slots=True)
class Candidate:
    """A run on a draining host the evictor would move."""

    instance: int
    request: DrainRequest
    task: TaskSla = field(default_factory=TaskSla)


@dataclass(frozen=True, slots=True)
class Verdict:
    """May this instance's run go down now, and why (or why not)."""

    job_id: str
    instance: int
    allowed: bool
    why: str


@dataclass(frozen=True, slots=True)
class DrainPlan:
    """Verdicts for every candidate of one evictor round."""

    verdicts: tuple[Verdict, ...]

    @property
    def allowed(self) -> list[Verdict]:
        """Runs that may go down now."""
        return [v for v in self.verdicts if v.allowed]

    @property
    def waiting(self) -> list[Verdict]:
        """Runs held by their job's SLA."""
        return [v for v in self.verdicts if not v.allowed]

    @property
    def complete(self) -> bool:
        """Every candidate may go: the hosts can be emptied (and go DOWN) now."""
        return all(v.allowed for v in self.verdicts)


def plan_drain(jobs: Iterable[tuple[JobSla, Sequence[Candidate]]], now: float) -> DrainPlan:
    """Verdicts for the candidates of each job (see the module docstring)."""
    verdicts: list[Verdict] = []
    for job, candidates in jobs:
        verdicts.extend(job_verdicts(job, candidates, now))
    return DrainPlan(tuple(verdicts))


def job_verdicts(job: JobSla, candidates: Sequence[Candidate], now: float) -> list[Verdict]:
    """Verdicts for one job's candidates, checked in instance order, each allowed one counting
    as down for the next."""
    unavailable = {i.instance for i in job.instances if i.availability is Availability.UNAVAILABLE}
    running = {i.instance: i.running_since for i in job.instances if i.running_since is not None}
    active = sum(1 for i in job.instances if i.active)
    out = []
    seen: set[int] = set()
    for c in sorted(candidates, key=lambda c: c.instance):
        if c.instance in seen:
            continue
        seen.add(c.instance)
        allowed, why = _check(job, c, unavailable, running, active, now)
        if allowed:
            unavailable.add(c.instance)
            running.pop(c.instance, None)
        out.append(Verdict(job.job_id, c.instance, allowed, why))
    return out


def _check(job: JobSla, c: Candidate, unavailable: set[int], running: dict[int, float],
           active: int, now: float) -> tuple[bool, str]:
    req = c.request
    if req.mode is DrainMode.FORCE:
        return True, "forced drain"
    deadline = req.deadline()
    if deadline is not None and now > deadline:
        return True, f"forced: the drain's timeout of {req.timeout_secs:g}s has passed"
    if req.mode is DrainMode.JOB_SLA:
        if not job.service or job.max_unavailable <= 0:
            return True, "the job has no maximum of unavailable instances"
        return _max_unavailable(job, c.instance, job.max_unavailable, unavailable)
    policy = c.task.policy or req.default_policy
    if policy is None:
        return True, "no SLA policy"
    if isinstance(policy, MaxUnavailable):
        if policy.count <= 0:
            return True, "no maximum of unavailable instances"
        return _max_unavailable(job, c.instance, policy.count, unavailable)
    if isinstance(policy, CoordinatorSla):
        return False, (f"job {job.job_id}: coordinator SLA policies ({policy.url}) are not "
                       "consulted; the run waits for the drain's timeout")
    if not (c.task.production or req.check_non_production):
        return True, "no SLA check for a non-production task"
    if active < req.min_required_instances:
        return True, (f"no SLA check: {active} active instances, fewer than the "
                      f"{req.min_required_instances} required")
    others = sum(1 for i, since in running.items()
                 if i != c.instance and now - since > policy.duration_secs)
    if isinstance(policy, PercentageSla):
        ok = meets_percentage(policy.percentage, others, active)
        need = f"{effective_percentage(policy.percentage, active):g}%"
    else:
        ok = meets_count(policy.count, others, active)
        need = str(effective_count(policy.count, active))
    if ok:
        return True, "within the SLA"
    return False, (f"job {job.job_id}: {others} of {active} active instances would be running "
                   f"for more than {policy.duration_secs}s; the SLA needs {need}")


def _max_unavailable(job: JobSla, instance: int, limit: int,
                     unavailable: set[int]) -> tuple[bool, str]:
    if instance in unavailable or len(unavailable) < limit:
        return True, "within the SLA"
    return False, (f"job {job.job_id}: {len(unavailable)} of at most {limit} instances are "
                   "unavailable")


# -- Aurora's instance arithmetic (SlaManager.meetsSLAInstances) -------------------------------
def effective_percentage(percentage: float, total: int) -> float:
    """The percentage Aurora applies: one that lets no instance go is lowered so one can."""
    if total <= 0:
        return percentage
    if int((1 - percentage / 100.0) * total) < 1:
        return ((total - 1) / float(total)) * 100
    return percentage


def meets_percentage(percentage: float, running: int, total: int) -> bool:
    """At least `percentage` % of `total` instances stay running (Aurora's arithmetic)."""
    if total <= 0:
        return True
    return (running / float(total)) * 100.0 >= effective_percentage(percentage, total)


def effective_count(count: int, total: int) -> int:
    """The count Aurora applies: one that lets no instance go is lowered to total - 1."""
    return total - 1 if total - count < 1 else count


def meets_count(count: int, running: int, total: int) -> bool:
    """At least `count` of `total` instances stay running (Aurora's arithmetic)."""
    if total <= 0:
        return True
    return running >= effective_count(count, total)


# -- checks and the task label ------------------------------------------------------------------
def check_policy(policy: SlaPolicy, what: str) -> None:
    """Range checks on a policy; InvalidArgument names the field (`what`.<field>)."""
    if isinstance(policy, MaxUnavailable):
        if policy.count < 0:
            raise InvalidArgument(f"{what}.count must be >= 0, got {policy.count}",
                                  field=f"{what}.count")
        return
    if isinstance(policy, CoordinatorSla):
        if not policy.url:
            raise InvalidArgument(f"{what}.url is required", field=f"{what}.url")
        return
    if policy.duration_secs < 0:
        raise InvalidArgument(f"{what}.duration_secs must be >= 0, got {policy.duration_secs}",
                              field=f"{what}.duration_secs")
    if isinstance(policy, PercentageSla):
        if not (math.isfinite(policy.percentage) and 0.0 <= policy.percentage <= 100.0):
            raise InvalidArgument(f"{what}.percentage must be between 0 and 100, got "
                                  f"{policy.percentage:g}", field=f"{what}.percentage")
    elif policy.count < 0:
        raise InvalidArgument(f"{what}.count must be >= 0, got {policy.count}",
                              field=f"{what}.count")


def check_drain_request(req: DrainRequest, what: str = "drain") -> None:
    """Checks on a drain request before anything is stored."""
    if req.mode is DrainMode.SLA_POLICY and req.default_policy is None:
        raise InvalidArgument(f"{what}.default_policy is required for an SLA-aware drain",
                              field=f"{what}.default_policy")
    if req.default_policy is not None:
        check_policy(req.default_policy, f"{what}.default_policy")
    if req.timeout_secs is not None and not (math.isfinite(req.timeout_secs)
                                             and req.timeout_secs >= 0):
        raise InvalidArgument(f"{what}.timeout_secs must be >= 0, got {req.timeout_secs:g}",
                              field=f"{what}.timeout_secs")
    if req.min_required_instances < 0:
        raise InvalidArgument(f"{what}.min_required_instances must be >= 0, got "
                              f"{req.min_required_instances}", field=f"{what}.min_required_instances")


_POLICY_KEYS = {PercentageSla: "percentageSlaPolicy", CountSla: "countSlaPolicy",
                CoordinatorSla: "coordinatorSlaPolicy", MaxUnavailable: "maxUnavailable"}


def task_sla_label(task: TaskSla) -> Label:
    """The `peloton/sla-policy` label of a task's own SLA: JSON with Aurora's field names,
    e.g. {"percentageSlaPolicy": {"percentage": 95.0, "durationSecs": 1800}} or
    {"production": false}."""
    body: dict[str, object] = {}
    p = task.policy
    if isinstance(p, PercentageSla):
        body["percentageSlaPolicy"] = {"percentage": float(p.percentage),
                                       "durationSecs": p.duration_secs}
    elif isinstance(p, CountSla):
        body["countSlaPolicy"] = {"count": p.count, "durationSecs": p.duration_secs}
    elif isinstance(p, CoordinatorSla):
        body["coordinatorSlaPolicy"] = {"coordinatorUrl": p.url, "statusKey": p.status_key}
    elif isinstance(p, MaxUnavailable):
        body["maxUnavailable"] = {"count": p.count}
    if not task.production:
        body["production"] = False
    return Label(TASK_SLA_LABEL, json.dumps(body, sort_keys=True, separators=(",", ":")))


def task_sla(labels: Iterable[Label]) -> TaskSla:
    """A task's own SLA from its labels (no label: production, no policy).  InvalidArgument
    naming the label when it is not what `task_sla_label` writes."""
    value = next((lab.value for lab in labels if lab.key == TASK_SLA_LABEL), None)
    if value is None:
        return TaskSla()
    try:
        body = json.loads(value)
        if not isinstance(body, dict) or set(body) - {*_POLICY_KEYS.values(), "production"}:
            raise ValueError("unknown keys")
        production = body.get("production", True)
        if not isinstance(production, bool):
            raise ValueError("production must be true or false")
        kinds = [k for k in _POLICY_KEYS.values() if k in body]
        if len(kinds) > 1:
            raise ValueError("more than one policy")
        policy = _policy_from_json(kinds[0], body[kinds[0]]) if kinds else None
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidArgument(f"label {TASK_SLA_LABEL}={value!r} is not a valid SLA policy: {exc}",
                              field=f"labels.{TASK_SLA_LABEL}") from exc
    if policy is not None:
        check_policy(policy, f"labels.{TASK_SLA_LABEL}")
    return TaskSla(policy, production)


def _policy_from_json(kind: str, inner: object) -> SlaPolicy:
    if not isinstance(inner, dict):
        raise ValueError(f"{kind} must be an object")

    def num(key: str, default: float | None = None) -> float:
        value = inner.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{kind}.{key} must be a number")
        return float(value)

    def whole(key: str, default: int | None = None) -> int:
        value = num(key, default)
        if value != int(value):
            raise ValueError(f"{kind}.{key} must be a whole number")
        return int(value)

    if kind == "percentageSlaPolicy":
        return PercentageSla(num("percentage"), whole("durationSecs", 0))
    if kind == "countSlaPolicy":
        return CountSla(whole("count"), whole("durationSecs", 0))
    if kind == "maxUnavailable":
        return MaxUnavailable(whole("count"))
    url, key = inner.get("coordinatorUrl"), inner.get("statusKey", "drain")
    if not isinstance(url, str) or not isinstance(key, str):
        raise ValueError(f"{kind}.coordinatorUrl and statusKey must be strings")
    return CoordinatorSla(url, key or "drain")
