"""Job goal-state entity: the core's job table turned into bulk actions.

Job actions work on all of a job's tasks at once (create 50,000 runtimes in
one transaction and queue them in one call; kill them with one call per
daemon) instead of sending every task through the task engine.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

import gevent

from peloton.common.goalstate import Action
from peloton.core.lifecycle.job_goalstate import JobAction, job_actions
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr import runs, sla, taskops
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.jobruntime import refresh_runtime

log = logging.getLogger(__name__)
S = TaskState
#: Task runtimes created (and queued) per step of a job's creation.
CREATE_CHUNK = 20_000


class JobEntity:
    """One job as the goal-state engine sees it."""

    __slots__ = ("ctx", "job_id")

    def __init__(self, ctx: JobContext, job_id: str) -> None:
        self.ctx = ctx
        self.job_id = job_id

    @property
    def id(self) -> str:
        """The job id."""
        return self.job_id

    def actions(self) -> Sequence[Action]:
        """The job's main action and Peloton's follow-ups, in order."""
        job = self.ctx.cache.get(self.job_id)
        if job is None:
            return ()
        rt = job.runtime
        names = job_actions(rt.goal_state, rt.state, state_version=rt.state_version,
                            desired_state_version=rt.desired_state_version)
        out = []
        for name in names:
            fn = _ACTIONS.get(name)
            if fn is not None:
                out.append(Action(name.value, _bind(fn, self.ctx, job)))
        return out


def _bind(fn: Callable[[JobContext, CachedJob], None], ctx: JobContext,
          job: CachedJob) -> Callable[[], None]:
    return lambda: fn(ctx, job)


def create_tasks(ctx: JobContext, job: CachedJob) -> None:
    """Create the runtimes a job is missing (PENDING, run 1) and queue them all."""
    with job.lock:
        spec = job.spec
        goal = S.SUCCEEDED if spec.type is JobType.BATCH else S.RUNNING
        if job.runtime.goal_state is JobState.KILLED:
            return
        now = ctx.clock()
        missing = [i for i in range(spec.instance_count) if job.get_task(i) is None]
        if spec.type is JobType.DAEMON:
            missing = []  # the daemon controller creates instances, one per host
        if job.update is not None and job.update.state.active:
            # A rolling create or update adds these itself, batch by batch.
            adding = set(job.update.instances_added)
            missing = [i for i in missing if i not in adding]
        limited = sla.limit_of(job) > 0
        # Chunks keep the process responsive while a huge job is created (API replies and
        # events interleave), and let placement start on the first tasks early.
        for lo in range(0, len(missing), CREATE_CHUNK):
            chunk = missing[lo:lo + CREATE_CHUNK]
            fresh = {i: runs.initial(goal, spec.version, now,
                                     health_check=spec.task_spec(i).health_check is not None,
                                     waiting=limited)
                     for i in chunk}
            ctx.store.create_task_runtimes(job.job_id, fresh)
            # Created runtimes are stored at revision 1 (the store's contract); no re-read.
            for i, rt in fresh.items():
                job.set_task(i, dataclasses.replace(rt, revision=1))
            if limited:
                sla.start_within_limit(ctx, job)
            else:
                taskops.enqueue(ctx, job, chunk)
            gevent.sleep(0)
        created = set(missing)
        if limited:
            sla.start_within_limit(ctx, job)
        else:
            pending = [i for i, rt in job.tasks() if rt.state in (S.INITIALIZED, S.PENDING)
                       and i not in created]
            taskops.enqueue(ctx, job, pending)
        if job.runtime.state in (JobState.INITIALIZED, JobState.UNINITIALIZED):
            job.runtime = ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
                job.runtime, state=JobState.PENDING, update_time=now,
                state_version=job.runtime.desired_state_version))
    ctx.on_tasks_changed(job.job_id)


def start_tasks(ctx: JobContext, job: CachedJob) -> None:
    """Bring a stopped service job back: every task goal RUNNING with a fresh run."""
    with job.lock:
        create_tasks(ctx, job)
        stopped = [i for i, rt in job.tasks() if rt.goal_state is not S.RUNNING]
        taskops.set_goal(ctx, job, stopped, S.RUNNING, bump_run=True)
        job.runtime = ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
            job.runtime, state_version=job.runtime.desired_state_version,
            update_time=ctx.clock()))


def kill(ctx: JobContext, job: CachedJob) -> None:
    """Stop every task of the job (goal KILLED), in bulk."""
    with job.lock:
        live = [i for i, rt in job.tasks() if not rt.state.terminal]
        target = [i for i, rt in job.tasks() if rt.goal_state is not S.KILLED]

        def goal_killed(rt: TaskRuntime) -> TaskRuntime | None:
            if rt.goal_state is S.KILLED:
                return None
            return dataclasses.replace(rt, goal_state=S.KILLED,
                                       termination=TerminationReason.KILLED_ON_REQUEST)

        ctx.writer.apply(job, {i: goal_killed for i in target})
        taskops.stop(ctx, job, live, TerminationReason.KILLED_ON_REQUEST)
        if any(not rt.state.terminal for _, rt in job.tasks()) and \
                job.runtime.state is not JobState.KILLING:
            job.runtime = ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
                job.runtime, state=JobState.KILLING, update_time=ctx.clock()))
    ctx.on_tasks_changed(job.job_id)


def untrack(ctx: JobContext, job: CachedJob) -> None:
    """A finished job leaves the active set and the cache (it stays queryable in storage)."""
    ctx.store.delete_active_job(job.job_id)
    ctx.cache.remove(job.job_id)
    for inst in job.instances():
        if ctx.task_engine is not None:
            ctx.task_engine.delete(f"{job.job_id}/{inst}")
    if ctx.job_engine is not None:
        ctx.job_engine.delete(job.job_id)


def kill_and_untrack(ctx: JobContext, job: CachedJob) -> None:
    """Kill what still runs; untrack once nothing does."""
    kill(ctx, job)
    if all(rt.state.terminal for _, rt in job.tasks()):
        refresh_runtime(ctx, job)
        untrack(ctx, job)


def delete(ctx: JobContext, job: CachedJob) -> None:
    """Remove every trace of a finished job."""
    untrack(ctx, job)
    ctx.store.delete_job(job.job_id)


def kill_and_delete(ctx: JobContext, job: CachedJob) -> None:
    """Kill what still runs; delete once nothing does."""
    kill(ctx, job)
    if all(rt.state.terminal for _, rt in job.tasks()):
        delete(ctx, job)


def delete_from_active(ctx: JobContext, job: CachedJob) -> None:
    """A terminal batch job with a terminal goal is no longer recovered on restart."""
    rt = job.runtime
    if job.spec.type is JobType.BATCH and rt.state.terminal and rt.goal_state.terminal:
        ctx.store.delete_active_job(job.job_id)


def runtime_update(ctx: JobContext, job: CachedJob) -> None:
    """Recompute the job state from its tasks."""
    if refresh_runtime(ctx, job) and job.runtime.goal_state.terminal:
        # Untracking is the next evaluation's main action.
        ctx.enqueue_job(job.job_id)


def enqueue_update(ctx: JobContext, job: CachedJob) -> None:
    """A job with an active workflow gets it evaluated."""
    if job.update is not None and not job.update.state.terminal:
        ctx.on_update_due(job.job_id)


def reload(ctx: JobContext, job: CachedJob) -> None:
    """Re-read the job runtime from storage."""
    job.runtime = ctx.store.get_job_runtime(job.job_id)
    ctx.enqueue_job(job.job_id)


def evaluate_sla(ctx: JobContext, job: CachedJob) -> None:
    """Start waiting instances of a job with maximumRunningInstances as room frees up."""
    sla.start_within_limit(ctx, job)


def invalid(ctx: JobContext, job: CachedJob) -> None:
    """Log a (goal, state) pair that has no valid action."""
    log.error("job %s: goal %s in state %s has no valid action", job.job_id,
              job.runtime.goal_state.value, job.runtime.state.value)


_ACTIONS: dict[JobAction, Callable[[JobContext, CachedJob], None]] = {
    JobAction.CREATE_TASKS: create_tasks,
    JobAction.RECOVER: create_tasks,
    JobAction.START_TASKS: start_tasks,
    JobAction.KILL: kill,
    JobAction.UNTRACK: untrack,
    JobAction.KILL_AND_UNTRACK: kill_and_untrack,
    JobAction.DELETE: delete,
    JobAction.KILL_AND_DELETE: kill_and_delete,
    JobAction.RELOAD: reload,
    JobAction.STATE_INVALID: invalid,
    JobAction.DELETE_FROM_ACTIVE_JOBS: delete_from_active,
    JobAction.ENQUEUE_JOB_UPDATE: enqueue_update,
    JobAction.RUNTIME_UPDATE: runtime_update,
    JobAction.EVALUATE_SLA: evaluate_sla,
}
