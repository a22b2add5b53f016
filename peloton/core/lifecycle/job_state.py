"""A job's state, derived from how many of its tasks are in each state.

Peloton derives job state rather than tracking it by events
(`jobmgr/goalstate/job_runtime_updater.go`).  With N = instance count, the
first matching rule wins:

1. SUCCEEDED >= N                                   -> SUCCEEDED
2. SUCCEEDED + FAILED + LOST >= N                   -> FAILED
3. KILLED > 0 and SUCCEEDED + FAILED + KILLED + LOST >= N -> KILLED
4. the job is already KILLING                       -> KILLING
5. any task RUNNING                                 -> RUNNING
6. otherwise                                        -> PENDING

For a batch job, a task whose run ended but that will run again (its restart
policy allows another try: `run_end.runs_again`) is not counted in its ended
state: it is not done.  Counted, it ended the job FAILED between a run's end
and the next run's start, and a FAILED batch job is untracked, so the task never
ran again.  (Peloton counts it, and relies on the task engine starting the next
run before the job's debounced runtime update looks; a busy or failing task
engine loses that race.)  A
service's tasks always run again, so for services the rules count the last ends,
as Peloton does: a service job is never untracked, and loses nothing by it.

Before those: more tasks than N (a shrinking update that failed) is
PENDING for batch jobs and for services whose goal is not terminal.  A
job whose tasks are not all created yet is INITIALIZED (batch) or decided
by its terminal goal (service).  A job with a controller task ends in the
state of task 0 once the rules say it is terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from peloton.core.states import JobState, JobType, TaskState

S = TaskState
#: The task states the rules count as ended (any other task is still to run).
_ENDED = (S.SUCCEEDED, S.FAILED, S.LOST, S.KILLED)
_Count = Callable[[TaskState], int]


def derive_job_state(counts: Mapping[TaskState, int], *, instance_count: int,
                     job_type: JobType, current: JobState, goal: JobState,
                     partially_created: bool = False,
                     controller_state: TaskState | None = None,
                     rerunning: Callable[[], Mapping[TaskState, int]] | None = None,
                     ) -> JobState:
    """The job state implied by task `counts` (see the module docstring for the rules).

    `partially_created` is set by the caller while fewer task records exist
    than `instance_count` because creation has not finished;
    `controller_state` is the state of task 0 when the job has a controller.
    `rerunning` returns, per ended state, how many of `counts` will run again
    (`run_end.runs_again`); it is called only for a batch job whose counts
    alone would end it, since counting them means looking at every task.
    """
    created = sum(counts.values())
    if partially_created and created < instance_count:
        return _partially_created(lambda state: counts.get(state, 0), created, job_type, goal)
    again: Mapping[TaskState, int] = {}
    if job_type is JobType.BATCH and rerunning is not None and \
            sum(counts.get(s, 0) for s in _ENDED) >= instance_count:
        again = rerunning()

    def n(state: TaskState) -> int:
        """Tasks in `state`, less those that will run again."""
        return counts.get(state, 0) - again.get(state, 0)

    state = _by_counts(n, created, instance_count, job_type, current, goal)
    if controller_state is not None and state.terminal:
        if controller_state is S.SUCCEEDED:
            return JobState.SUCCEEDED
        if controller_state in (S.FAILED, S.LOST):
            return JobState.FAILED
        return JobState.KILLED
    return state


def _by_counts(n: _Count, created: int, total: int, job_type: JobType, current: JobState,
               goal: JobState) -> JobState:
    if created > total and (job_type is JobType.BATCH or not goal.terminal):
        return JobState.PENDING
    done = n(S.SUCCEEDED) + n(S.FAILED) + n(S.LOST)
    if n(S.SUCCEEDED) >= total:
        return JobState.SUCCEEDED
    if done >= total:
        return JobState.FAILED
    if n(S.KILLED) > 0 and done + n(S.KILLED) >= total:
        return JobState.KILLED
    if current is JobState.KILLING:
        return JobState.KILLING
    if n(S.RUNNING) > 0:
        return JobState.RUNNING
    return JobState.PENDING


def _partially_created(n: _Count, created: int, job_type: JobType,
                       goal: JobState) -> JobState:
    if job_type is JobType.BATCH:
        return JobState.INITIALIZED
    if goal.terminal:
        ended = n(S.SUCCEEDED) + n(S.FAILED) + n(S.LOST)
        if n(S.KILLED) > 0 and ended + n(S.KILLED) == created:
            return JobState.KILLED
        if created == 0:
            return JobState.KILLED
        if ended == created:
            return JobState.FAILED
    return JobState.PENDING

