"""Task goal-state entity: the core's (goal, state, versions) table turned into actions.

The hot path (create, place, launch, run, finish) never goes through this
engine: jobs queue their tasks in bulk and host events are applied in
batches.  The engine handles what needs a decision for one task: retries
after a failure, restarts, kills, launches that never reported back.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from peloton.common.goalstate import Action
from peloton.core.lifecycle.retry import batch_retry_allowed, service_restart_delay
from peloton.core.lifecycle.task_goalstate import TaskAction, action_for
from peloton.core.model.ids import RunId
from peloton.core.model.task import TaskRuntime
from peloton.core.states import JobType, TaskState
from peloton.jobmgr import sla, taskops
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext

log = logging.getLogger(__name__)
S = TaskState
THROTTLED = "Task throttled due to failure"
#: Failure reasons that are the system's fault, not the task's (at least 4 tries).
SYSTEM_REASONS = frozenset({"REASON_LAUNCH_FAILED", "REASON_CONTAINER_LAUNCH_FAILED",
                            "REASON_INVALID_OFFERS", "REASON_EXECUTOR_TERMINATED",
                            "REASON_AGENT_REMOVED", "REASON_AGENT_DISCONNECTED"})


class TaskEntity:
    """One task as the goal-state engine sees it."""

    __slots__ = ("ctx", "instance", "job_id")

    def __init__(self, ctx: JobContext, job_id: str, instance: int) -> None:
        self.ctx = ctx
        self.job_id = job_id
        self.instance = instance

    @property
    def id(self) -> str:
        """`<job>/<instance>`."""
        return f"{self.job_id}/{self.instance}"

    def actions(self) -> Sequence[Action]:
        """The one action the task needs now (none if the job or task is gone)."""
        job = self.ctx.cache.get(self.job_id)
        rt = job.get_task(self.instance) if job is not None else None
        if job is None or rt is None:
            return ()
        action = action_for(rt)
        if action is TaskAction.NOOP:
            return ()
        run = _ACTIONS.get(action)
        if run is None:
            log.warning("task %s: no implementation for %s (state %s, goal %s)", self.id,
                        action, rt.state.value, rt.goal_state.value)
            return ()
        return (Action(action.value, lambda: run(self.ctx, job, self.instance, rt)),)


def _start(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    if sla.limit_of(job) > 0:
        sla.start_within_limit(ctx, job)  # instances start in order, as room frees up
    else:
        taskops.enqueue(ctx, job, [inst])


def _stop(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    taskops.stop(ctx, job, [inst], reason=rt.termination)
    # A stop that leads to a new run (restart, update) continues once the run ended.
    if not rt.goal_state.terminal and job.task(inst).state.terminal:
        ctx.enqueue_task(job.job_id, inst)


def _initialize(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    taskops.initialize(ctx, job, [inst])


def _launch_retry(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    waited = ctx.clock() - rt.update_time
    if waited < ctx.config.launch_timeout:
        ctx.enqueue_task(job.job_id, inst, ctx.config.launch_timeout - waited)
        return
    log.warning("task %s/%d: %s for %.0fs, starting a new run", job.job_id, inst,
                rt.state.value, waited)
    ctx.hostmgr.kill([str(RunId(job.job_id, inst, rt.run_id))], 0.0)
    ctx.writer.apply_one(job, inst, lambda cur: dataclasses.replace(
        cur, state=S.LOST, message=f"no status from host after {waited:.0f}s",
        completion_time=ctx.clock(), update_time=ctx.clock(),
        failure_count=cur.failure_count + 1) if cur.run_id == rt.run_id else None)
    ctx.enqueue_task(job.job_id, inst)


def _fail_retry(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    policy = job.task_spec(inst, rt.config_version).restart_policy
    if batch_retry_allowed(rt.failure_count, policy.max_failures,
                           system_failure=rt.reason in SYSTEM_REASONS):
        taskops.initialize(ctx, job, [inst])
    else:
        ctx.on_tasks_changed(job.job_id)


def _terminated_retry(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    delay = service_restart_delay(rt.failure_count)
    due = rt.completion_time + delay if rt.completion_time else rt.update_time + delay
    wait = due - ctx.clock()
    if wait > 0 and job.spec.type is not JobType.BATCH:
        if THROTTLED not in rt.message:
            msg = f"{THROTTLED}: {rt.message}" if rt.message else THROTTLED
            ctx.writer.apply_one(job, inst, lambda cur: dataclasses.replace(cur, message=msg)
                                 if cur.run_id == rt.run_id and cur.state.terminal else None)
        ctx.enqueue_task(job.job_id, inst, wait)
        return
    taskops.initialize(ctx, job, [inst])


def _executor_shutdown(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    waited = ctx.clock() - rt.update_time
    if waited < ctx.config.kill_timeout:
        ctx.enqueue_task(job.job_id, inst, ctx.config.kill_timeout - waited)
        return
    ctx.hostmgr.kill([str(RunId(job.job_id, inst, rt.run_id))], 0.0)
    ctx.enqueue_task(job.job_id, inst, ctx.config.kill_timeout)


def _delete(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    ctx.store.delete_task_runtimes(job.job_id, [inst])
    job.drop_task(inst)
    ctx.on_tasks_changed(job.job_id)


def _invalid(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    log.error("task %s/%d has goal %s in state %s: nothing valid to do", job.job_id, inst,
              rt.goal_state.value, rt.state.value)


def _reload(ctx: JobContext, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
    job.set_task(inst, ctx.store.get_task_runtime(job.job_id, inst))
    ctx.enqueue_task(job.job_id, inst)


_ACTIONS = {
    TaskAction.START: _start,
    TaskAction.STOP: _stop,
    TaskAction.INITIALIZE: _initialize,
    TaskAction.LAUNCH_RETRY: _launch_retry,
    TaskAction.FAIL_RETRY: _fail_retry,
    TaskAction.TERMINATED_RETRY: _terminated_retry,
    TaskAction.EXECUTOR_SHUTDOWN: _executor_shutdown,
    TaskAction.DELETE: _delete,
    TaskAction.STATE_INVALID: _invalid,
    TaskAction.RELOAD_RUNTIME: _reload,
}
