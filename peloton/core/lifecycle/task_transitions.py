"""Task state transitions: the resource manager's table and the job manager's write rules.

Two different questions, both tables over `TaskState`:

* `RM_TRANSITIONS` — which state changes the resource manager makes or
  accepts for a task it tracks (Peloton's rmtask state machine,
  `pkg/resmgr/task/rmtask.go`), with `RM_TIMEOUTS` for the states that fall
  back on their own after a while.  A terminal status from the host is not
  in the table: it ends tracking from any state (Peloton's `MarkItDone`).
* `check_runtime_write` — whether the job manager may overwrite a stored
  task runtime with a new one (Peloton's `cached/task.go validateState`).
  Its core is run-id discipline: a terminal run is left only by starting a
  new run (INITIALIZED with a larger run id), and run ids never decrease,
  so a late event about an old run can never resurrect it; and a run never
  launched (`NOT_LAUNCHED`) cannot be LOST.
"""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.model.task import TaskRuntime
from peloton.core.states import TaskState

S = TaskState

#: Allowed resource-manager transitions, from -> to.  Every state has a row.
RM_TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    # INITIALIZED -> RUNNING/LAUNCHING/LAUNCHED happens only in recovery.
    S.INITIALIZED: frozenset({S.PENDING, S.RUNNING, S.LAUNCHING, S.LAUNCHED}),
    S.PENDING: frozenset({S.READY, S.KILLED, S.PLACED}),
    S.READY: frozenset({S.PLACING, S.RESERVED, S.PLACED, S.KILLED, S.PENDING}),
    S.PLACING: frozenset({S.READY, S.PLACED, S.KILLED, S.PENDING}),
    S.RESERVED: frozenset({S.PLACED, S.KILLED, S.PENDING}),
    S.PLACED: frozenset({S.LAUNCHING, S.KILLED}),
    S.LAUNCHING: frozenset({S.RUNNING, S.READY, S.KILLED, S.LAUNCHED}),
    S.LAUNCHED: frozenset({S.RUNNING, S.READY, S.KILLED, S.LAUNCHED}),
    S.STARTING: frozenset(),
    S.RUNNING: frozenset({S.SUCCEEDED, S.LOST, S.PREEMPTING, S.KILLING, S.FAILED, S.KILLED}),
    # PREEMPTING only leaves by its timeout (back to RUNNING) or by a terminal event.
    S.PREEMPTING: frozenset(),
    S.KILLING: frozenset(),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset({S.READY}),
    S.LOST: frozenset(),
    S.KILLED: frozenset({S.PENDING}),
    S.DELETED: frozenset(),
}

#: States of a run no host has been asked to start (the job manager writes LAUNCHED before it
#: hands a run to the host manager; the resource manager's LAUNCHING may already be on a
#: host, so it is not here).  No host can have lost such a run: a LOST status about it (a
#: reconciliation's "no host knows this run") is dropped by the job manager
#: (`check_runtime_write`) and the resource manager alike, and the run stays queued.
NOT_LAUNCHED = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.RESERVED, S.PLACED})

#: States in which a task holds allocation in its pool (admitted, not yet finished).
ALLOCATED_STATES = frozenset({
    S.READY, S.PLACING, S.RESERVED, S.PLACED, S.LAUNCHING, S.LAUNCHED, S.STARTING, S.RUNNING,
    S.PREEMPTING, S.KILLING})


@dataclass(frozen=True, slots=True)
class TimeoutRule:
    """A state the resource manager abandons after `seconds` (configurable by the daemon)."""

    seconds: float
    #: Where the task goes; PLACING goes to PENDING instead at the end of a backoff cycle.
    to: TaskState
    config_key: str


#: Peloton's defaults (config/resmgr/base.yaml).
RM_TIMEOUTS: dict[TaskState, TimeoutRule] = {
    S.PLACING: TimeoutRule(600.0, S.READY, "placing_timeout"),
    S.LAUNCHING: TimeoutRule(1200.0, S.READY, "launching_timeout"),
    S.RESERVED: TimeoutRule(1800.0, S.PENDING, "reserving_timeout"),
    S.PREEMPTING: TimeoutRule(600.0, S.RUNNING, "preempting_timeout"),
}


def rm_transitions_dot() -> str:
    """The resource-manager state machine as Graphviz text (timeouts dashed), for the docs."""
    lines = ["digraph rmtask {", "  rankdir=LR;"]
    for src, targets in RM_TRANSITIONS.items():
        for dst in sorted(targets):
            lines.append(f"  {src.value} -> {dst.value};")
    for src, rule in RM_TIMEOUTS.items():
        lines.append(f'  {src.value} -> {rule.to.value} [style=dashed, label="{rule.config_key}"];')
    lines.append("}")
    return "\n".join(lines)


def rm_allows(src: TaskState, dst: TaskState) -> bool:
    """The resource manager may move a task from `src` to `dst` (a rule or a timeout)."""
    if dst in RM_TRANSITIONS[src]:
        return True
    rule = RM_TIMEOUTS.get(src)
    return rule is not None and rule.to is dst


def check_runtime_write(current: TaskRuntime, new: TaskRuntime) -> str | None:
    """Why the job manager must drop the write `current` -> `new`, or None if it is valid."""
    if (current.goal_state is S.DELETED and new.goal_state is not S.DELETED
            and current.desired_config_version == new.desired_config_version):
        return "goal DELETED stays until the desired config version changes"
    if new.run_id != current.run_id:
        if new.run_id < current.run_id:
            return f"run id may not decrease ({current.run_id} -> {new.run_id})"
        if new.state is not S.INITIALIZED:
            return f"a new run must start INITIALIZED, not {new.state.value}"
        return None
    if new.desired_run_id < current.desired_run_id:
        return (f"desired run id may not decrease "
                f"({current.desired_run_id} -> {new.desired_run_id})")
    old, nxt = current.state, new.state
    if nxt is old:
        return None
    if old.terminal:
        return f"{old.value} is terminal; only a new run can leave it"
    if nxt is S.LOST and old in NOT_LAUNCHED:
        return f"a {old.value} run was never launched: no host can have lost it"
    if nxt.owner == "host":
        if old.owner in ("host", "resmgr") or old in (S.INITIALIZED, S.LAUNCHED):
            return None
        if nxt.terminal and old is S.KILLING:
            return None
    if nxt.owner == "resmgr" and (old.owner == "resmgr" or old is S.INITIALIZED):
        return None
    if nxt is S.LAUNCHED and (old.owner == "resmgr" or old is S.INITIALIZED):
        return None
    if nxt is S.KILLING:
        return None
    return f"{old.value} -> {nxt.value} is not a valid task state change"
