"""Whether a run's end counts against its task's restart policy (`maxFailures`).

A run has *started* once its host reported it STARTING or RUNNING. A run that ended
before that was never the task's doing: a launch in flight when the host manager was
killed, or one the job manager gave up on after a pause, comes back LOST without a
process of the task ever running. Counting that as a failure ended jobs with
`maxFailures: 0` FAILED without running a single instruction.

So `END_RULES` maps (terminal state, started?) to a rule, and the job manager applies
it wherever a run ends (a host's status event, a launch that timed out). Peloton's
`jobmgr/task/event/update.go` (updateFailureCount) counts no LOST at all, and its
`goalstate/task_launch_retry.go` re-initializes a timed-out launch uncounted; we keep
counting a LOST run that had started (its host or agent died under it: the task's
restart budget is what bounds a task that keeps taking hosts down), and only lift the
count for runs that never started.

A run lost before it started is written LOST with reason `LOST_BEFORE_START`, so the
retry decision, made later from the stored runtime alone, knows it did not count and
runs the task again whatever its budget (`may_run_again`).

Whether a task runs again after its run ended is also what its job's state is derived
from: a task about to run again is not done (job_state.py), or a batch job would end,
and be untracked, between a run's end and the next run's start.  `AFTER_END` says it
per goal-state action the task table names for an ended run; `runs_again` reads it off a
stored runtime, with the same budget the task engine's FAIL_RETRY applies.
"""

from __future__ import annotations

from enum import StrEnum

from peloton.core.lifecycle.retry import batch_retry_allowed
from peloton.core.lifecycle.task_goalstate import TaskAction, action_for
from peloton.core.model.task import TaskRuntime
from peloton.core.states import TERMINAL_TASK_STATES, TaskState

S = TaskState

#: The reason of a run that was LOST before its host reported it STARTING or RUNNING.
LOST_BEFORE_START = "REASON_LOST_BEFORE_START"
#: Failure reasons that are the system's fault, not the task's (at least 4 tries, retry.py).
SYSTEM_REASONS = frozenset({"REASON_LAUNCH_FAILED", "REASON_CONTAINER_LAUNCH_FAILED",
                            "REASON_INVALID_OFFERS", "REASON_EXECUTOR_TERMINATED",
                            "REASON_AGENT_REMOVED", "REASON_AGENT_DISCONNECTED"})
#: Goals under which a run that ends KILLED was meant to stop.
STOP_GOALS = frozenset({S.KILLED, S.DELETED, S.PREEMPTING})


class EndRule(StrEnum):
    """How an ended run counts against its task's restart budget."""

    FAILURE = "failure"
    NOT_A_FAILURE = "not_a_failure"
    #: KILLED: a failure unless the run was being stopped (KILLING) or its goal was a stop.
    FAILURE_UNLESS_STOPPED = "failure_unless_stopped"
    #: SUCCEEDED: a failure only for a task that should keep running (a service).
    FAILURE_IF_SERVICE = "failure_if_service"


#: (how the run ended, whether it had started) -> rule.  Every terminal state has both rows.
END_RULES: dict[tuple[TaskState, bool], EndRule] = {
    (S.SUCCEEDED, True): EndRule.FAILURE_IF_SERVICE,
    (S.SUCCEEDED, False): EndRule.FAILURE_IF_SERVICE,
    # A run that failed before it started failed to launch (bad image, no such user): the
    # task's own doing as far as we can tell; system reasons get extra tries (retry.py).
    (S.FAILED, True): EndRule.FAILURE,
    (S.FAILED, False): EndRule.FAILURE,
    (S.LOST, True): EndRule.FAILURE,
    (S.LOST, False): EndRule.NOT_A_FAILURE,
    (S.KILLED, True): EndRule.FAILURE_UNLESS_STOPPED,
    (S.KILLED, False): EndRule.FAILURE_UNLESS_STOPPED,
    # DELETED is never a host's report; the instance is going away.
    (S.DELETED, True): EndRule.NOT_A_FAILURE,
    (S.DELETED, False): EndRule.NOT_A_FAILURE,
}
assert set(END_RULES) == {(s, b) for s in TERMINAL_TASK_STATES for b in (True, False)}


def started(rt: TaskRuntime) -> bool:
    """Has the current run been reported STARTING or RUNNING by its host?"""
    return rt.start_time > 0 or rt.state in (S.STARTING, S.RUNNING)


def counts_as_failure(before: TaskRuntime, ended: TaskState) -> bool:
    """Does the current run of `before` ending in `ended` count against maxFailures?"""
    rule = END_RULES[(ended, started(before))]
    if rule is EndRule.FAILURE:
        return True
    if rule is EndRule.FAILURE_UNLESS_STOPPED:
        return before.state is not S.KILLING and before.goal_state not in STOP_GOALS
    if rule is EndRule.FAILURE_IF_SERVICE:
        return before.goal_state is S.RUNNING
    return False


def end_reason(before: TaskRuntime, ended: TaskState, reported: str) -> str:
    """The reason to store for the end: `LOST_BEFORE_START` marks an uncounted loss."""
    if ended is S.LOST and not started(before):
        return LOST_BEFORE_START
    return reported


def may_run_again(rt: TaskRuntime, max_failures: int) -> bool:
    """May an ended batch task run again?  A run lost before it started always may; one
    that failed for a system reason (`SYSTEM_REASONS`) gets at least 4 tries."""
    if rt.state is S.LOST and rt.reason == LOST_BEFORE_START:
        return True
    return batch_retry_allowed(rt.failure_count, max_failures,
                               system_failure=rt.reason in SYSTEM_REASONS)


class Again(StrEnum):
    """Whether a task whose run ended starts another."""

    NO = "no"
    YES = "yes"
    #: While its restart policy allows (`may_run_again`): a batch task's FAIL_RETRY.
    WHILE_ALLOWED = "while_allowed"


#: The task table's action for an ended run -> does the task run again?  Every action the
#: table (task_goalstate.py) names for a terminal state has a row; a test walks them all.
AFTER_END: dict[TaskAction, Again] = {
    # Succeeded (a batch task), or stopped under a kill goal: ended for good.
    TaskAction.NOOP: Again.NO,
    TaskAction.DELETE: Again.NO,
    TaskAction.STATE_INVALID: Again.NO,
    # A restart or an update wants a new run on the desired run or config.
    TaskAction.INITIALIZE: Again.YES,
    # A service task always runs again, after its throttle.
    TaskAction.TERMINATED_RETRY: Again.YES,
    TaskAction.FAIL_RETRY: Again.WHILE_ALLOWED,
}


def runs_again(rt: TaskRuntime, max_failures: int) -> bool:
    """Will this task start another run?  False while its current run has not ended;
    `max_failures` is the restart policy of the config the run ended on."""
    if not rt.state.terminal:
        return False
    again = AFTER_END[action_for(rt)]
    if again is Again.WHILE_ALLOWED:
        return may_run_again(rt, max_failures)
    return again is Again.YES
