"""Task goal-state decisions: (goal, current state, versions) -> the one action to run.

Peloton's `jobmgr/goalstate/task.go`.  Versions are checked first: when the
task's config is behind its desired config (and the goal is not terminal),
or its run is not the desired run (and the goal is not KILLED or DELETED),
a terminal task is re-initialized as a new run and a live one is stopped
(`STALE_RULES`).  A run already KILLING is not stopped again: it waits for its end
and is killed again when that takes too long (EXECUTOR_SHUTDOWN), as with any goal;
Peloton's StopAction on it sends the kill again, and our stop, which only marks and
kills runs that are not KILLING yet, would leave a run whose kill was lost (its owner
stored KILLING and died before the kill reached the host) KILLING for ever.
Otherwise `TASK_RULES[goal][state]` decides.  Every valid goal has a row
that lists all 17 states; goals that are never valid map to STATE_INVALID.

A run that should keep running (goal RUNNING or SUCCEEDED) but whose health
check reports UNHEALTHY is failed: killed and counted as a failure of the task
(FAIL_UNHEALTHY), as Mesos' executor kills a task whose health check failed its
consecutive failures under Peloton; the task then restarts like any failed
task, and a rolling update counts the failure against the instance.

Deliberate difference: with a kill goal (KILLED, DELETED, PREEMPTING), the
resource-manager states READY, PLACING, PLACED, LAUNCHING and RESERVED also
map to `STOP` (Peloton leaves them at noop, relying on the job manager
rarely observing those states).
"""

from __future__ import annotations

from enum import StrEnum

from peloton.core.model.task import TaskRuntime
from peloton.core.states import HealthState, TaskState


class TaskAction(StrEnum):
    """What the goal-state engine does for a task."""

    NOOP = "noop"
    START = "start_task"
    STOP = "stop_task"
    INITIALIZE = "initialize_task"
    RELOAD_RUNTIME = "reload_runtime"
    LAUNCH_RETRY = "launch_retry"
    FAIL_RETRY = "fail_retry"
    FAIL_UNHEALTHY = "fail_unhealthy"
    TERMINATED_RETRY = "terminated_retry"
    EXECUTOR_SHUTDOWN = "executor_shutdown"
    DELETE = "delete_task"
    STATE_INVALID = "state_invalid"


S = TaskState
A = TaskAction

_KILL_ROW: dict[TaskState, TaskAction] = {
    S.INITIALIZED: A.STOP, S.PENDING: A.STOP, S.READY: A.STOP, S.PLACING: A.STOP,
    S.PLACED: A.STOP, S.LAUNCHING: A.STOP, S.LAUNCHED: A.STOP, S.STARTING: A.STOP,
    S.RUNNING: A.STOP, S.SUCCEEDED: A.NOOP, S.FAILED: A.NOOP, S.LOST: A.NOOP,
    S.PREEMPTING: A.NOOP, S.KILLING: A.EXECUTOR_SHUTDOWN, S.KILLED: A.NOOP, S.DELETED: A.NOOP,
    S.RESERVED: A.STOP,
}

#: goal -> current state -> action, for every goal a task may have.
TASK_RULES: dict[TaskState, dict[TaskState, TaskAction]] = {
    S.RUNNING: {
        S.INITIALIZED: A.START, S.PENDING: A.NOOP, S.READY: A.NOOP, S.PLACING: A.NOOP,
        S.PLACED: A.NOOP, S.LAUNCHING: A.NOOP, S.LAUNCHED: A.LAUNCH_RETRY,
        S.STARTING: A.LAUNCH_RETRY, S.RUNNING: A.NOOP, S.SUCCEEDED: A.TERMINATED_RETRY,
        S.FAILED: A.TERMINATED_RETRY, S.LOST: A.TERMINATED_RETRY, S.PREEMPTING: A.NOOP,
        S.KILLING: A.EXECUTOR_SHUTDOWN, S.KILLED: A.TERMINATED_RETRY, S.DELETED: A.NOOP,
        S.RESERVED: A.NOOP,
    },
    # Batch tasks run to completion; failures are retried up to the restart policy.
    S.SUCCEEDED: {
        S.INITIALIZED: A.START, S.PENDING: A.NOOP, S.READY: A.NOOP, S.PLACING: A.NOOP,
        S.PLACED: A.NOOP, S.LAUNCHING: A.NOOP, S.LAUNCHED: A.LAUNCH_RETRY,
        S.STARTING: A.LAUNCH_RETRY, S.RUNNING: A.NOOP, S.SUCCEEDED: A.NOOP,
        S.FAILED: A.FAIL_RETRY, S.LOST: A.FAIL_RETRY, S.PREEMPTING: A.NOOP, S.KILLING: A.NOOP,
        S.KILLED: A.FAIL_RETRY, S.DELETED: A.NOOP, S.RESERVED: A.NOOP,
    },
    S.KILLED: dict(_KILL_ROW),
    # PREEMPTING as a goal is the batch "kill on preempt" path.
    S.PREEMPTING: {**_KILL_ROW, S.PREEMPTING: A.STATE_INVALID},
    S.DELETED: {**_KILL_ROW, S.SUCCEEDED: A.DELETE, S.FAILED: A.DELETE, S.LOST: A.DELETE,
                S.KILLED: A.DELETE},
    # FAILED is never a valid goal.
    S.FAILED: {state: A.STATE_INVALID for state in TaskState},
}

#: current state -> action, for a run that is not the desired one (config or run behind).
STALE_RULES: dict[TaskState, TaskAction] = {
    state: (A.INITIALIZE if state.terminal else
            A.EXECUTOR_SHUTDOWN if state is S.KILLING else A.STOP)
    for state in TaskState
}

#: Goals no task should ever have.
INVALID_GOALS = frozenset(TaskState) - frozenset(TASK_RULES)


def task_action(goal: TaskState, state: TaskState, *, config_version: int = 0,
                desired_config_version: int = 0, run_id: int = 0,
                desired_run_id: int = 0,
                healthy: HealthState = HealthState.DISABLED) -> TaskAction:
    """The action that moves a task from `state` toward `goal`.

    A `desired_run_id` of 0 means "no desired run recorded" (never restart).
    """
    needs_update = config_version != desired_config_version and not goal.terminal
    needs_restart = (run_id != desired_run_id and desired_run_id != 0
                     and goal not in (S.KILLED, S.DELETED))
    if needs_update or needs_restart:
        return STALE_RULES[state]
    if goal in INVALID_GOALS:
        return A.STATE_INVALID
    if healthy is HealthState.UNHEALTHY and state is S.RUNNING and \
            goal in (S.RUNNING, S.SUCCEEDED):
        return A.FAIL_UNHEALTHY
    return TASK_RULES[goal][state]


def action_for(runtime: TaskRuntime) -> TaskAction:
    """`task_action` read off a stored task runtime."""
    return task_action(runtime.goal_state, runtime.state,
                       config_version=runtime.config_version,
                       desired_config_version=runtime.desired_config_version,
                       run_id=runtime.run_id, desired_run_id=runtime.desired_run_id,
                       healthy=runtime.healthy)
