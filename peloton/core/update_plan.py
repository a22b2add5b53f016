"""Planning one step of a rolling workflow (update, restart, start, stop), as a pure function.

Given the workflow's instance sets, its target config version, the current
task runtimes, what earlier steps concluded and the time, `plan_update_step`
says which instances are done, which failed, which are still in flight, which
to touch next and whether the workflow must succeed, fail, roll back or pause.
The job manager's update-run action applies the step (Peloton's
`goalstate/update_run.go` and `cached/workflow_strategy.go`, with Aurora's
watch time and strategies):

* an instance is *touched* once its desired config version is the target;
  it is **done** when it runs the target config and is HEALTHY or has health
  checks DISABLED, and has been so for the update's watch time (counted from
  the run's start, or from when its health check turned HEALTHY) — or is
  terminal with a terminal goal, for instances that should not run; **failed**
  when its failure count reached `max_instance_attempts` (0 = unlimited), so a
  run that ends inside the watch time counts against the instance; otherwise
  in flight.  Done and failed are final: an instance concluded by an earlier
  step stays so (Aurora's InstanceUpdater never looks at it again);
* with `max_failure_instances` set and that many failed, the workflow rolls
  back (when `rollback_on_failure` and it is not already a rollback) or fails;
* otherwise the strategy (`update_strategy.py`) says how many untouched
  instances start now: additions first, then updates ordered least available
  first (unavailable, killed, invalid, available — so healthy instances go
  last), then removals; a rollback takes each kind highest instance first
  (Aurora's reversed UpdateOrdering: what the update did last is undone first);
  a BATCH or VAR_BATCH update with `autopause` that is rolling forward PAUSEs
  instead at each batch boundary after the first, once per boundary
  (`autopaused_at` remembers it, so a resumed update goes on);
* when every instance is done or failed the workflow succeeds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.model.update import UpdateSpec
from peloton.core.states import HealthState, TaskState, WorkflowType
from peloton.core.update_strategy import batch_limit, is_batched, startable

__all__ = ["Availability", "Decision", "UpdateStep", "batch_limit", "instance_availability",
           "plan_update_step", "ready_since"]


class Availability(StrEnum):
    """How available an instance is to serve, for ordering updates (Peloton's InstanceAvailability)."""

    UNAVAILABLE = "UNAVAILABLE"
    KILLED = "KILLED"
    DELETED = "DELETED"
    INVALID = "INVALID"
    AVAILABLE = "AVAILABLE"


#: Update order: instances that serve nothing anyway go first.
_ORDER = {Availability.UNAVAILABLE: 0, Availability.KILLED: 1, Availability.DELETED: 1,
          Availability.INVALID: 2, Availability.AVAILABLE: 3}
_HEALTHY = (HealthState.HEALTHY, HealthState.DISABLED)
_SLA_TERMINATIONS = (TerminationReason.KILLED_HOST_MAINTENANCE,
                     TerminationReason.KILLED_FOR_UPDATE, TerminationReason.FAILED)


def instance_availability(rt: TaskRuntime | None) -> Availability:
    """Classify one instance from its runtime (None: it has no runtime)."""
    if rt is None:
        return Availability.INVALID
    if rt.goal_state is TaskState.DELETED:
        return Availability.DELETED
    if rt.goal_state is TaskState.KILLED:
        return Availability.KILLED
    if rt.termination is not TerminationReason.NONE:
        return (Availability.UNAVAILABLE if rt.termination in _SLA_TERMINATIONS
                else Availability.KILLED)
    if rt.run_id != rt.desired_run_id or rt.config_version != rt.desired_config_version:
        return Availability.KILLED
    if (rt.state is TaskState.RUNNING and rt.goal_state is TaskState.RUNNING
            and rt.healthy in _HEALTHY):
        return Availability.AVAILABLE
    return Availability.UNAVAILABLE


class Decision(StrEnum):
    """What the workflow as a whole does next."""

    CONTINUE = "CONTINUE"
    SUCCEED = "SUCCEED"
    ROLL_BACK = "ROLL_BACK"
    FAIL = "FAIL"
    #: A batch boundary of an auto-pausing update: pause before starting the next batch.
    PAUSE = "PAUSE"


@dataclass(frozen=True, slots=True)
class UpdateStep:
    """The plan for one run of a workflow."""

    decision: Decision
    in_flight: tuple[int, ...]
    done: tuple[int, ...]
    failed: tuple[int, ...]
    to_add: tuple[int, ...] = ()
    to_update: tuple[int, ...] = ()
    to_remove: tuple[int, ...] = ()
    #: Earliest time (wall) an in-flight instance's watch time ends (None: none watched).
    watch_until: float | None = None
    #: Instances touched so far (the batch boundary an auto-pause is recorded at).
    touched: int = 0

    @property
    def picked(self) -> tuple[int, ...]:
        """Every instance to touch now."""
        return self.to_add + self.to_update + self.to_remove


def ready_since(rt: TaskRuntime) -> float:
    """When a RUNNING run became ready: HEALTHY since, or started (0: unknown)."""
    if rt.healthy is HealthState.HEALTHY and rt.healthy_time:
        return rt.healthy_time
    return rt.start_time


def _arrived(rt: TaskRuntime, target: int, kind: WorkflowType) -> bool:
    """The instance reached what the workflow wants (watch time aside)."""
    if rt.desired_config_version != target:
        return False
    if kind is WorkflowType.STOP:
        return (rt.state.terminal and rt.goal_state.terminal) or not rt.goal_state.terminal
    if rt.state is TaskState.RUNNING:
        return rt.config_version == target and rt.healthy in _HEALTHY
    return rt.state.terminal and rt.goal_state.terminal


def _out_of_attempts(rt: TaskRuntime, spec: UpdateSpec, kind: WorkflowType) -> bool:
    return (kind is not WorkflowType.STOP and spec.max_instance_attempts > 0
            and rt.failure_count >= spec.max_instance_attempts)


def plan_update_step(*, kind: WorkflowType, spec: UpdateSpec, target_version: int,
                     added: Sequence[int], updated: Sequence[int], removed: Sequence[int],
                     runtimes: Mapping[int, TaskRuntime], rolling_back: bool = False,
                     now: float = 0.0, done_before: Collection[int] = (),
                     failed_before: Collection[int] = (), autopaused_at: int = -1) -> UpdateStep:
    """Classify every instance of the workflow and pick the next ones to touch."""
    done: list[int] = []
    failed: list[int] = []
    in_flight: list[int] = []
    watch_until: float | None = None
    fresh: dict[str, list[int]] = {"add": [], "update": [], "remove": []}
    removed_set, done_set, failed_set = set(removed), set(done_before), set(failed_before)
    watch = spec.watch_secs if kind is not WorkflowType.STOP else 0.0
    for group, ids in (("add", added), ("update", updated), ("remove", removed)):
        for inst in ids:
            rt = runtimes.get(inst)
            if inst in done_set:
                done.append(inst)
            elif inst in failed_set:
                failed.append(inst)
            elif rt is None:
                # A removed instance whose runtime is gone has been removed.
                (done if inst in removed_set else fresh[group]).append(inst)
            elif _arrived(rt, target_version, kind):
                ends = ready_since(rt) + watch
                if not (rt.state is TaskState.RUNNING and watch > 0 and now < ends):
                    done.append(inst)
                elif _out_of_attempts(rt, spec, kind):
                    # A new run after a failure inside the watch time: the failure counts.
                    failed.append(inst)
                else:
                    in_flight.append(inst)
                    watch_until = ends if watch_until is None else min(watch_until, ends)
            elif rt.desired_config_version != target_version:
                fresh[group].append(inst)
            elif _out_of_attempts(rt, spec, kind):
                failed.append(inst)
            else:
                in_flight.append(inst)
    total = len(added) + len(updated) + len(removed)
    idle = len(fresh["add"]) + len(fresh["update"]) + len(fresh["remove"])
    touched = total - idle
    snapshot = (tuple(in_flight), tuple(done), tuple(failed))
    if spec.max_failure_instances > 0 and len(failed) >= spec.max_failure_instances:
        decision = (Decision.ROLL_BACK if spec.rollback_on_failure and not rolling_back
                    else Decision.FAIL)
        return UpdateStep(decision, *snapshot, watch_until=watch_until, touched=touched)
    if len(done) + len(failed) >= total:
        return UpdateStep(Decision.SUCCEED, *snapshot, touched=touched)
    budget = startable(spec, total=total, idle=idle, active=len(in_flight),
                       rolling_back=rolling_back)
    if (budget and touched and spec.autopause and is_batched(spec) and not rolling_back
            and autopaused_at != touched):
        return UpdateStep(Decision.PAUSE, *snapshot, watch_until=watch_until, touched=touched)
    if rolling_back:
        # Aurora's UpdateOrdering.reverse(): a rollback undoes the highest instance first.
        for ids in fresh.values():
            ids.sort(reverse=True)
    else:
        fresh["update"].sort(key=lambda i: (_ORDER[instance_availability(runtimes.get(i))], i))
    picks: dict[str, tuple[int, ...]] = {}
    for group in ("add", "update", "remove"):
        take = fresh[group][:budget]
        picks[group] = tuple(take)
        budget -= len(take)
    return UpdateStep(Decision.CONTINUE, *snapshot, picks["add"], picks["update"],
                      picks["remove"], watch_until=watch_until, touched=touched)
