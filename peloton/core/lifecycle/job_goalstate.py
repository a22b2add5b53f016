"""Job goal-state decisions: (goal, current state, state versions) -> actions to run in order.

Peloton's `jobmgr/goalstate/job.go`.  The main action comes from
`JOB_RULES[goal][state]` (every valid goal has a row listing all ten job
states); for stateless jobs whose state version is behind the desired
state version, goal RUNNING starts (or creates) tasks instead.  Follow-up
actions are appended as Peloton does: drop the job from the active set
when it is a terminal batch job, look at pending updates, then refresh the
runtime and evaluate the SLA unless the job is being untracked or
recovered.
"""

from __future__ import annotations

from enum import StrEnum

from peloton.core.states import JobState


class JobAction(StrEnum):
    """What the goal-state engine does for a job."""

    NOOP = "noop"
    CREATE_TASKS = "create_tasks"
    START_TASKS = "job_start"
    KILL = "job_kill"
    UNTRACK = "untrack"
    KILL_AND_UNTRACK = "kill_untrack"
    RECOVER = "recover"
    DELETE = "delete"
    KILL_AND_DELETE = "kill_and_delete"
    RELOAD = "reload"
    STATE_INVALID = "state_invalid"
    # Follow-ups.
    DELETE_FROM_ACTIVE_JOBS = "delete_from_active_jobs"
    ENQUEUE_JOB_UPDATE = "enqueue_job_update"
    RUNTIME_UPDATE = "runtime_update"
    EVALUATE_SLA = "evaluate_sla"


J = JobState
A = JobAction

#: goal -> current state -> main action, for every goal a job may have.
JOB_RULES: dict[JobState, dict[JobState, JobAction]] = {
    J.RUNNING: {
        J.UNKNOWN: A.RELOAD, J.INITIALIZED: A.CREATE_TASKS, J.PENDING: A.NOOP,
        J.RUNNING: A.NOOP, J.SUCCEEDED: A.NOOP, J.FAILED: A.NOOP, J.KILLED: A.NOOP,
        J.KILLING: A.STATE_INVALID, J.UNINITIALIZED: A.RECOVER, J.DELETED: A.NOOP,
    },
    J.SUCCEEDED: {
        J.UNKNOWN: A.RELOAD, J.INITIALIZED: A.CREATE_TASKS, J.PENDING: A.NOOP,
        J.RUNNING: A.NOOP, J.SUCCEEDED: A.UNTRACK, J.FAILED: A.UNTRACK, J.KILLED: A.UNTRACK,
        J.KILLING: A.STATE_INVALID, J.UNINITIALIZED: A.RECOVER, J.DELETED: A.NOOP,
    },
    J.KILLED: {
        J.UNKNOWN: A.RELOAD, J.INITIALIZED: A.KILL, J.PENDING: A.KILL, J.RUNNING: A.KILL,
        J.SUCCEEDED: A.KILL_AND_UNTRACK, J.FAILED: A.KILL_AND_UNTRACK,
        J.KILLED: A.KILL_AND_UNTRACK, J.KILLING: A.NOOP, J.UNINITIALIZED: A.KILL_AND_UNTRACK,
        J.DELETED: A.NOOP,
    },
    J.DELETED: {
        J.UNKNOWN: A.RELOAD, J.INITIALIZED: A.KILL, J.PENDING: A.KILL, J.RUNNING: A.KILL,
        J.SUCCEEDED: A.KILL_AND_DELETE, J.FAILED: A.KILL_AND_DELETE,
        J.KILLED: A.KILL_AND_DELETE, J.KILLING: A.KILL, J.UNINITIALIZED: A.DELETE,
        J.DELETED: A.NOOP,
    },
    # FAILED is never a valid goal.
    J.FAILED: {state: (A.RELOAD if state is J.UNKNOWN else A.STATE_INVALID)
               for state in JobState},
}

#: Goals no job should have; UNKNOWN as a goal means "not loaded yet".
INVALID_GOALS = frozenset(JobState) - frozenset(JOB_RULES)


def main_job_action(goal: JobState, state: JobState, *, state_version: int = 0,
                    desired_state_version: int = 0) -> JobAction:
    """The one domain action for a job."""
    if goal is J.UNKNOWN:
        return A.RELOAD
    if state_version < desired_state_version and goal is J.RUNNING:
        return A.CREATE_TASKS if state is J.INITIALIZED else A.START_TASKS
    if goal in INVALID_GOALS:
        return A.STATE_INVALID
    return JOB_RULES[goal][state]


def job_actions(goal: JobState, state: JobState, *, state_version: int = 0,
                desired_state_version: int = 0) -> tuple[JobAction, ...]:
    """The main action plus Peloton's follow-ups, in the order they run."""
    main = main_job_action(goal, state, state_version=state_version,
                           desired_state_version=desired_state_version)
    if main is A.RELOAD:
        return (main,)
    out = [] if main is A.NOOP else [main]
    out.append(A.DELETE_FROM_ACTIVE_JOBS)
    if main in (A.DELETE, A.KILL_AND_DELETE):
        return tuple(out)
    out.append(A.ENQUEUE_JOB_UPDATE)
    if main not in (A.UNTRACK, A.KILL_AND_UNTRACK, A.RECOVER):
        out += [A.RUNTIME_UPDATE, A.EVALUATE_SLA]
    return tuple(out)
