"""Planning one step of a rolling workflow (update, restart, start, stop), as a pure function.

Given the workflow's instance sets, its target config version and the
current task runtimes, `plan_update_step` says which instances are done,
which failed, which are still in flight, which to touch next and whether
the workflow must succeed, fail or roll back.  The job manager's
update-run action applies the step (Peloton's `goalstate/update_run.go`
and `cached/workflow_strategy.go`):

* an instance is *touched* once its desired config version is the target;
  it is **done** when it runs the target config and is HEALTHY or has
  health checks DISABLED (or is terminal with a terminal goal, for
  instances that should not run); **failed** when its failure count
  reached `max_instance_attempts` (0 = unlimited); otherwise in flight;
* with `max_failure_instances` set and that many failed, the workflow rolls
  back (when `rollback_on_failure` and it is not already a rollback) or
  fails;
* otherwise up to `batch size - in flight` new instances are picked:
  additions first, then updates ordered least available first
  (unavailable, killed, invalid, available — so healthy instances go
  last), then removals;
* when every instance is done or failed the workflow succeeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.model.update import UpdateSpec
from peloton.core.states import HealthState, TaskState, WorkflowType


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

    @property
    def picked(self) -> tuple[int, ...]:
        """Every instance to touch now."""
        return self.to_add + self.to_update + self.to_remove


def _is_done(rt: TaskRuntime, target: int, kind: WorkflowType) -> bool:
    if rt.desired_config_version != target:
        return False
    if kind is WorkflowType.STOP:
        return (rt.state.terminal and rt.goal_state.terminal) or not rt.goal_state.terminal
    if rt.state is TaskState.RUNNING:
        return rt.config_version == target and rt.healthy in _HEALTHY
    return rt.state.terminal and rt.goal_state.terminal


def batch_limit(spec: UpdateSpec, total: int) -> int:
    """Instances allowed in flight at once; 0 means no limit."""
    if spec.batch_size > 0:
        return spec.batch_size
    if spec.batch_percentage > 0:
        return max(1, math.ceil(total * spec.batch_percentage / 100.0))
    return 0


def plan_update_step(*, kind: WorkflowType, spec: UpdateSpec, target_version: int,
                     added: Sequence[int], updated: Sequence[int], removed: Sequence[int],
                     runtimes: Mapping[int, TaskRuntime],
                     rolling_back: bool = False) -> UpdateStep:
    """Classify every instance of the workflow and pick the next ones to touch."""
    done: list[int] = []
    failed: list[int] = []
    in_flight: list[int] = []
    fresh: dict[str, list[int]] = {"add": [], "update": [], "remove": []}
    removed_set = set(removed)
    for group, ids in (("add", added), ("update", updated), ("remove", removed)):
        for inst in ids:
            rt = runtimes.get(inst)
            if rt is None:
                # A removed instance whose runtime is gone has been removed.
                (done if inst in removed_set else fresh[group]).append(inst)
            elif _is_done(rt, target_version, kind):
                done.append(inst)
            elif rt.desired_config_version != target_version:
                fresh[group].append(inst)
            elif (kind is not WorkflowType.STOP and spec.max_instance_attempts > 0
                  and rt.failure_count >= spec.max_instance_attempts):
                failed.append(inst)
            else:
                in_flight.append(inst)
    snapshot = (tuple(in_flight), tuple(done), tuple(failed))
    if spec.max_failure_instances > 0 and len(failed) >= spec.max_failure_instances:
        decision = (Decision.ROLL_BACK if spec.rollback_on_failure and not rolling_back
                    else Decision.FAIL)
        return UpdateStep(decision, *snapshot)
    total = len(added) + len(updated) + len(removed)
    if len(done) + len(failed) >= total:
        return UpdateStep(Decision.SUCCEED, *snapshot)
    fresh["update"].sort(key=lambda i: (_ORDER[instance_availability(runtimes.get(i))], i))
    limit = batch_limit(spec, total)
    budget = (len(fresh["add"]) + len(fresh["update"]) + len(fresh["remove"]) if limit == 0
              else max(0, limit - len(in_flight)))
    picks: dict[str, tuple[int, ...]] = {}
    for group in ("add", "update", "remove"):
        take = fresh[group][:budget]
        picks[group] = tuple(take)
        budget -= len(take)
    return UpdateStep(Decision.CONTINUE, *snapshot, picks["add"], picks["update"],
                      picks["remove"])
