"""Workflow goal-state entity: one step of a rolling update, restart, start or stop.

Keyed by job id, so a job's workflow is never evaluated twice at once.  A
step asks the core planner (`plan_update_step`) which instances are done,
failed or in flight and which to touch next (never more than the batch
size in flight), then touches them: new instances are created, changed
ones get the target config as their desired config (the task goal-state
engine then stops the old run and starts a new one), removed ones get the
goal DELETED.  Task events re-evaluate the workflow; a periodic re-check
covers anything missed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from peloton.common.goalstate import Action
from peloton.core.lifecycle.workflow_goalstate import WorkflowAction, workflow_actions
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.model.update import UpdateInfo
from peloton.core.states import TaskState, WorkflowState, WorkflowType
from peloton.core.update_plan import Decision, UpdateStep, plan_update_step
from peloton.jobmgr import runs, taskops
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.workflows import event, save
from peloton.jobmgr.writer import Change

log = logging.getLogger(__name__)
S = TaskState
W = WorkflowState
#: A running workflow is looked at again at least this often (seconds), events or not.
RECHECK = 2.0


class UpdateEntity:
    """The active workflow of one job."""

    __slots__ = ("ctx", "job_id")

    def __init__(self, ctx: JobContext, job_id: str) -> None:
        self.ctx = ctx
        self.job_id = job_id

    @property
    def id(self) -> str:
        """The job id (one workflow per job at a time)."""
        return self.job_id

    def actions(self) -> Sequence[Action]:
        """What the workflow needs now."""
        job = self.ctx.cache.get(self.job_id)
        if job is None or job.update is None:
            return ()
        names = workflow_actions(job.update.state)
        ctx = self.ctx
        out = []
        for name in names:
            if name is WorkflowAction.START:
                out.append(Action(name.value, lambda: _start(ctx, job)))
            elif name is WorkflowAction.RUN:
                out.append(Action(name.value, lambda: run_step(ctx, job)))
            elif name is WorkflowAction.CHECK_FOR_ABORT:
                out.append(Action(name.value, lambda: _check_for_abort(ctx, job)))
            elif name is WorkflowAction.WRITE_PROGRESS:
                out.append(Action(name.value, lambda: _progress(ctx, job)))
        return out


def _check_for_abort(ctx: JobContext, job: CachedJob) -> None:
    update = job.update
    if update is not None and update.state.active and job.runtime.update_id != update.update_id:
        save(ctx, job, dataclasses.replace(update, state=W.ABORTED, prev_state=update.state,
                                           message="superseded by a newer workflow",
                                           completion_time=ctx.clock()))


def _start(ctx: JobContext, job: CachedJob) -> None:
    update = job.update
    if update is None or update.state is not W.INITIALIZED:
        return
    save(ctx, job, dataclasses.replace(update, state=W.ROLLING_FORWARD, prev_state=update.state))
    run_step(ctx, job)


def _progress(ctx: JobContext, job: CachedJob) -> None:
    if job.update is not None:
        _record(ctx, job, job.update, _plan(job, job.update))


def _plan(job: CachedJob, update: UpdateInfo) -> UpdateStep:
    instances = set(update.instances_added) | set(update.instances_updated) | \
        set(update.instances_removed)
    runtimes = {i: rt for i in instances if (rt := job.get_task(i)) is not None}
    return plan_update_step(kind=update.type, spec=update.spec,
                            target_version=update.config_version,
                            added=update.instances_added, updated=update.instances_updated,
                            removed=update.instances_removed, runtimes=runtimes,
                            rolling_back=update.rollback)


def _record(ctx: JobContext, job: CachedJob, update: UpdateInfo, step: UpdateStep) -> UpdateInfo:
    newly_done = set(step.done) - set(update.instances_done)
    newly_failed = set(step.failed) - set(update.instances_failed)
    current = tuple(sorted(set(step.in_flight) | set(step.picked)))
    if not newly_done and not newly_failed and current == update.instances_current:
        return update
    for inst in sorted(newly_done):
        event(ctx, update, inst, W.SUCCEEDED)
    for inst in sorted(newly_failed):
        event(ctx, update, inst, W.FAILED, "instance exceeded its update attempts")
    return save(ctx, job, dataclasses.replace(update, instances_done=tuple(sorted(step.done)),
                                              instances_failed=tuple(sorted(step.failed)),
                                              instances_current=current))


def run_step(ctx: JobContext, job: CachedJob) -> None:
    """One step of a rolling workflow (idempotent; safe to run on every task event)."""
    with job.lock:
        update = job.update
        if update is None or update.state not in (W.ROLLING_FORWARD, W.ROLLING_BACKWARD):
            return
        step = _plan(job, update)
        if step.decision is Decision.SUCCEED:
            update = _record(ctx, job, update, step)
            final = W.ROLLED_BACK if update.rollback else W.SUCCEEDED
            save(ctx, job, dataclasses.replace(update, state=final, prev_state=update.state,
                                               completion_time=ctx.clock()))
            ctx.on_tasks_changed(job.job_id)
            return
        if step.decision is Decision.FAIL:
            update = _record(ctx, job, update, step)
            save(ctx, job, dataclasses.replace(
                update, state=W.FAILED, prev_state=update.state, completion_time=ctx.clock(),
                message=f"{len(step.failed)} instances failed (limit "
                        f"{update.spec.max_failure_instances})"))
            return
        if step.decision is Decision.ROLL_BACK:
            start_rollback(ctx, job, _record(ctx, job, update, step))
            return
        _apply(ctx, job, update, step)
        _record(ctx, job, update, step)
    if ctx.update_engine is not None:
        ctx.update_engine.enqueue_after(UpdateEntity(ctx, job.job_id), RECHECK)


def _apply(ctx: JobContext, job: CachedJob, update: UpdateInfo, step: UpdateStep) -> None:
    target = update.config_version
    now = ctx.clock()
    for inst in step.picked:
        event(ctx, update, inst, W.ROLLING_BACKWARD if update.rollback else W.ROLLING_FORWARD)
    if step.to_add:
        _add(ctx, job, step.to_add, target, now)
    if step.to_update:
        _touch(ctx, job, update, step.to_update, target)
    if step.to_remove:
        _remove(ctx, job, step.to_remove, target)


def _add(ctx: JobContext, job: CachedJob, instances: Sequence[int], target: int,
         now: float) -> None:
    spec = job.specs.get(target, job.spec)
    missing = [i for i in instances if job.get_task(i) is None]
    if missing:
        fresh = {i: runs.initial(S.RUNNING, target, now,
                                 health_check=spec.task_spec(i).health_check is not None)
                 for i in missing}
        ctx.store.create_task_runtimes(job.job_id, fresh)
        for i, rt in ctx.store.get_task_runtimes(job.job_id, missing).items():
            job.set_task(i, rt)
        taskops.enqueue(ctx, job, missing)
    existing = [i for i in instances if i not in missing]
    if existing:
        taskops.set_goal(ctx, job, existing, S.RUNNING)
        ctx.writer.apply(job, {i: _desire(target) for i in existing})
        for i in existing:
            ctx.enqueue_task(job.job_id, i)
    ctx.on_tasks_changed(job.job_id)


def _touch(ctx: JobContext, job: CachedJob, update: UpdateInfo, instances: Sequence[int],
           target: int) -> None:
    kind = update.type
    in_place = update.spec.in_place
    reason = (TerminationReason.KILLED_FOR_RESTART if kind is WorkflowType.RESTART
              else TerminationReason.KILLED_FOR_UPDATE)

    def change(rt: TaskRuntime) -> TaskRuntime | None:
        if rt.desired_config_version == target:
            return None
        if kind is WorkflowType.STOP:
            if rt.state.terminal:  # already stopped: nothing to run again
                return dataclasses.replace(rt, goal_state=S.KILLED, config_version=target,
                                           desired_config_version=target)
            return dataclasses.replace(rt, goal_state=S.KILLED, desired_config_version=target,
                                       termination=TerminationReason.KILLED_ON_REQUEST)
        if kind is WorkflowType.START and rt.state is S.RUNNING and rt.goal_state is S.RUNNING:
            # Running already on an identical spec: just record the version.
            return dataclasses.replace(rt, config_version=target, desired_config_version=target)
        goal = S.RUNNING if (update.spec.start_tasks or kind is WorkflowType.START
                             or rt.goal_state in (S.DELETED, S.RUNNING)) else rt.goal_state
        return dataclasses.replace(
            rt, desired_config_version=target, failure_count=0, goal_state=goal,
            termination=reason if not rt.state.terminal else rt.termination,
            desired_host=rt.host if in_place and rt.host else rt.desired_host)

    ctx.writer.apply(job, {i: change for i in instances})
    if kind is WorkflowType.STOP:
        taskops.stop(ctx, job, [i for i in instances if not job.task(i).state.terminal],
                     TerminationReason.KILLED_ON_REQUEST)
    for i in instances:
        ctx.enqueue_task(job.job_id, i)
    ctx.on_tasks_changed(job.job_id)


def _remove(ctx: JobContext, job: CachedJob, instances: Sequence[int], target: int) -> None:
    present = [i for i in instances if job.get_task(i) is not None]
    taskops.set_goal(ctx, job, present, S.DELETED)
    ctx.writer.apply(job, {i: _desire(target) for i in present})
    for i in present:
        ctx.enqueue_task(job.job_id, i)


def _desire(target: int) -> Change:
    def change(rt: TaskRuntime) -> TaskRuntime | None:
        if rt.desired_config_version == target:
            return None
        return dataclasses.replace(rt, desired_config_version=target, failure_count=0)

    return change


def start_rollback(ctx: JobContext, job: CachedJob, update: UpdateInfo) -> UpdateInfo:
    """Turn a failing (or asked-to-roll-back) update around to the config it came from."""
    if update.prev_config_version == 0:
        # Rolling back a job's first deployment: back to no instances at all.
        source = dataclasses.replace(job.spec, instance_count=0, instance_tasks={})
    else:
        source = job.specs.get(update.prev_config_version) or ctx.store.get_job_config(
            job.job_id, update.prev_config_version)
    number = ctx.store.get_max_job_config_version(job.job_id) + 1
    now = ctx.clock()
    back = dataclasses.replace(source, version=number, created_at=now)
    ctx.store.create_task_configs(job.job_id, number, back.default_task, dict(back.instance_tasks))
    ctx.store.add_job_config(job.job_id, back)
    touched = set(update.instances_done) | set(update.instances_failed) | \
        set(update.instances_current)
    updated = sorted(touched & set(update.instances_updated))
    rolled = dataclasses.replace(
        update, state=W.ROLLING_BACKWARD, prev_state=update.state, rollback=True,
        prev_config_version=update.config_version, config_version=number,
        instances_added=tuple(sorted(touched & set(update.instances_removed))),
        instances_removed=tuple(sorted(touched & set(update.instances_added))),
        instances_updated=tuple(updated), instances_done=(), instances_failed=(),
        instances_current=(),
        instances_total=len(touched),
        message=f"rolling back to configuration version {update.prev_config_version}")
    stored = save(ctx, job, rolled)
    job.runtime = ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
        job.runtime, config_version=number, workflow_version=job.runtime.workflow_version + 1,
        update_time=now))
    job.spec = back
    job.specs[number] = back
    ctx.on_update_due(job.job_id)
    log.info("job %s: rolling back workflow %s to version %d", job.job_id, update.update_id,
             number)
    return stored

