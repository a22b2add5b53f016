"""Workflow goal-state actions: one step of a rolling update, restart, start or stop.

Keyed by job id, so a job's workflow is never evaluated twice at once.  A
step asks the core planner (`plan_update_step`) which instances are done,
failed or in flight and which to touch next (as the update's strategy
allows), then touches them: new instances are created, changed ones get the
target config as their desired config (the task goal-state engine then
stops the old run and starts a new one), removed ones get the goal DELETED.
At a batch boundary of an auto-pausing update the step pauses the workflow
instead.  Task events re-evaluate the workflow; a re-check at the end of the
first watch time in progress, and a periodic one, cover the rest.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from peloton.common.goalstate import Action
from peloton.core.lifecycle.workflow_goalstate import WorkflowAction, workflow_actions
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.model.update import UpdateInfo
from peloton.core.states import JobState, JobType, TaskState, WorkflowState, WorkflowType
from peloton.core.update_plan import Decision, UpdateStep, plan_update_step
from peloton.jobmgr import runs
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.goalstate.tables import require_every_action
from peloton.jobmgr.runcontrol import RunControl, holds_host
from peloton.storage.history_store import PodEventReads

log = logging.getLogger(__name__)
S = TaskState
W = WorkflowState
#: A running workflow is looked at again at least this often (seconds), events or not.
RECHECK = 2.0
#: Job goals under which a workflow step runs nothing (the job was stopped or deleted).
_STOPPED_GOALS = frozenset({JobState.KILLED, JobState.DELETED})


def _plan(job: CachedJob, update: UpdateInfo, now: float) -> UpdateStep:
    instances = set(update.instances_added) | set(update.instances_updated) | \
        set(update.instances_removed)
    runtimes = {i: rt for i in instances if (rt := job.get_task(i)) is not None}
    return plan_update_step(kind=update.type, spec=update.spec,
                            target_version=update.config_version,
                            added=update.instances_added, updated=update.instances_updated,
                            removed=update.instances_removed, runtimes=runtimes,
                            rolling_back=_rolling_back(update), now=now,
                            done_before=update.instances_done,
                            failed_before=update.instances_failed,
                            autopaused_at=update.autopaused_at)


def _rolling_back(update: UpdateInfo) -> bool:
    """A rollback: turned around by the job manager, or started as one (a bridge's)."""
    return update.rollback or update.spec.rollback_order


class UpdateActions:
    """What the workflow goal-state engine does; `resolve` turns a job id into its actions."""

    def __init__(self, cache: JobCache, control: RunControl, queue: GoalStateQueue,
                 history: PodEventReads) -> None:
        self.cache = cache
        self.control = control
        self.queue = queue
        #: Pod events, for the last run of an instance an update removed and adds back.
        self.history = history

    def resolve(self, job_id: str) -> Sequence[Action]:
        """What the job's workflow needs now (none if there is none)."""
        job = self.cache.get(job_id)
        if job is None or job.update is None:
            return ()
        return [Action(name.value, _bind(ACTIONS[name], self, job))
                for name in workflow_actions(job.update.state)]

    def check_for_abort(self, job: CachedJob) -> None:
        """A workflow superseded by a newer one (the job points elsewhere) is aborted."""
        update = job.update
        if update is not None and update.state.active and \
                job.runtime.update_id != update.update_id:
            job.move_workflow(update, W.ABORTED, message="superseded by a newer workflow")

    def start(self, job: CachedJob) -> None:
        """A new workflow starts rolling forward with its first step."""
        update = job.update
        if update is None or update.state is not W.INITIALIZED:
            return
        job.move_workflow(update, W.ROLLING_FORWARD)
        self.run_step(job)

    def write_progress(self, job: CachedJob) -> None:
        """A paused workflow still records which instances finished."""
        if job.update is not None:
            self._record(job, job.update, _plan(job, job.update, self._now()))

    def clear(self, job: CachedJob) -> None:
        """A finished workflow is no longer evaluated (it stays the job's last workflow)."""
        self.queue.forget_update(job.job_id)

    def run_step(self, job: CachedJob) -> None:
        """One step of a rolling workflow (idempotent; safe to run on every task event)."""
        with job.lock:
            update = job.update
            if update is None or update.state not in (W.ROLLING_FORWARD, W.ROLLING_BACKWARD):
                return
            step = _plan(job, update, self._now())
            if step.decision is Decision.SUCCEED:
                update = self._record(job, update, step)
                final = W.ROLLED_BACK if update.rollback else W.SUCCEEDED
                job.move_workflow(update, final)
                return
            if step.decision is Decision.FAIL:
                update = self._record(job, update, step)
                job.move_workflow(update, W.FAILED,
                                  message=f"{len(step.failed)} instances failed (limit "
                                          f"{update.spec.max_failure_instances})")
                return
            if step.decision is Decision.ROLL_BACK:
                self.start_rollback(job, self._record(job, update, step))
                return
            if step.decision is Decision.PAUSE:
                update = self._record(job, update, step)
                job.move_workflow(dataclasses.replace(update, autopaused_at=step.touched),
                                  W.PAUSED,
                                  message=f"paused after a batch: {step.touched} of "
                                          f"{update.instances_total} instances done")
                return
            self._apply(job, update, step)
            self._record(job, update, step)
        wait = RECHECK
        if step.watch_until is not None:
            # Look again when the first watched instance's watch time is up.
            wait = min(wait, max(0.0, step.watch_until - self._now()))
        self.queue.enqueue_update(job.job_id, wait)

    def _record(self, job: CachedJob, update: UpdateInfo, step: UpdateStep) -> UpdateInfo:
        newly_done = set(step.done) - set(update.instances_done)
        newly_failed = set(step.failed) - set(update.instances_failed)
        current = tuple(sorted(set(step.in_flight) | set(step.picked)))
        if not newly_done and not newly_failed and current == update.instances_current:
            return update
        done_as = W.ROLLED_BACK if _rolling_back(update) else W.SUCCEEDED
        for inst in sorted(newly_done):
            job.workflow_event(update, inst, done_as)
        for inst in sorted(newly_failed):
            job.workflow_event(update, inst, W.FAILED, "instance exceeded its update attempts")
        return job.save_workflow(dataclasses.replace(
            update, instances_done=tuple(sorted(step.done)),
            instances_failed=tuple(sorted(step.failed)), instances_current=current))

    def _apply(self, job: CachedJob, update: UpdateInfo, step: UpdateStep) -> None:
        target = update.config_version
        for inst in step.picked:
            job.workflow_event(update, inst,
                               W.ROLLING_BACKWARD if _rolling_back(update) else W.ROLLING_FORWARD)
        if step.to_add:
            self._add(job, step.to_add, target)
        if step.to_update:
            self._touch(job, update, step.to_update, target)
        if step.to_remove:
            present = [i for i in step.to_remove if job.get_task(i) is not None]
            self.control.set_goal(job, present, S.DELETED)
            self.control.desire_config(job, present, target)

    def _add(self, job: CachedJob, instances: Sequence[int], target: int) -> None:
        spec = job.specs.get(target, job.spec)
        stopped = _keep_stopped(job)
        missing = [i for i in instances if job.get_task(i) is None]
        if missing:
            now = self._now()
            # An instance an earlier update removed goes on from its last run (Peloton's
            # updateWithRecentRunID): run ids only grow, and the ended run's history stays.
            job.create_tasks({i: runs.initial(
                S.RUNNING, target, now, health_check=spec.task_spec(i).health_checked,
                after_run=self._last_run(job.job_id, i), stopped=stopped) for i in missing})
            if not stopped:
                self.control.enqueue(job, missing)
        existing = [i for i in instances if i not in missing]
        if existing:
            self.control.set_goal(job, existing, S.KILLED if stopped else S.RUNNING)
            self.control.desire_config(job, existing, target)

    def _last_run(self, job_id: str, inst: int) -> int:
        events = self.history.get_pod_events(job_id, inst, limit=1)
        return max((e.run_id for e in events), default=0)

    def _touch(self, job: CachedJob, update: UpdateInfo, instances: Sequence[int],
               target: int) -> None:
        kind = update.type
        in_place = update.spec.in_place
        reason = (TerminationReason.KILLED_FOR_RESTART if kind is WorkflowType.RESTART
                  else TerminationReason.KILLED_FOR_UPDATE)
        default_goal = S.SUCCEEDED if job.spec.type is JobType.BATCH else S.RUNNING
        stopped = _keep_stopped(job)

        def change_of(inst: int) -> Callable[[TaskRuntime], TaskRuntime | None]:
            return lambda rt: change(inst, rt)

        def change(inst: int, rt: TaskRuntime) -> TaskRuntime | None:
            if rt.desired_config_version == target:
                return None
            if kind is WorkflowType.STOP:
                if rt.state.terminal:  # already stopped: nothing to run again
                    return dataclasses.replace(rt, goal_state=S.KILLED, config_version=target,
                                               desired_config_version=target)
                return dataclasses.replace(rt, goal_state=S.KILLED,
                                           desired_config_version=target,
                                           termination=TerminationReason.KILLED_ON_REQUEST)
            if kind is WorkflowType.START and rt.state is S.RUNNING and \
                    rt.goal_state is S.RUNNING:
                # Running already on an identical spec: just record the version.
                return dataclasses.replace(rt, config_version=target,
                                           desired_config_version=target)
            # A restart or start runs the instance (Peloton's restart and start strategies
            # set the job type's default goal); an update keeps a stopped instance stopped
            # unless it starts pods.
            if stopped:
                goal = S.KILLED
            elif kind in (WorkflowType.START, WorkflowType.RESTART):
                goal = default_goal
            elif update.spec.start_tasks or rt.goal_state in (S.DELETED, S.RUNNING):
                goal = S.RUNNING
            else:
                goal = rt.goal_state
            return dataclasses.replace(
                rt, desired_config_version=target, failure_count=0, goal_state=goal,
                termination=reason if not rt.state.terminal else rt.termination,
                desired_host=runs.desired_host_for_update(rt, in_place=in_place,
                                                          pinned=holds_host(job, inst)))

        job.write_tasks({i: change_of(i) for i in instances}).stored()
        if kind is WorkflowType.STOP:
            self.control.stop(job, [i for i in instances if not job.task(i).state.terminal],
                              TerminationReason.KILLED_ON_REQUEST)

    def start_rollback(self, job: CachedJob, update: UpdateInfo) -> UpdateInfo:
        """Turn a failing (or asked-to-roll-back) update around to the config it came from.

        A workflow already rolling back is left as it is (Peloton's RollbackWorkflow):
        turning it around again would send the job back to the config that failed.
        """
        with job.lock:
            if update.rollback or update.state is W.ROLLING_BACKWARD:
                return update
            if update.prev_config_version == 0:
                # Rolling back a job's first deployment: back to no instances at all.
                source = dataclasses.replace(job.spec, instance_count=0, instance_tasks={})
            else:
                source = job.load_config(update.prev_config_version)
            back = job.new_config(source)
            touched = set(update.instances_done) | set(update.instances_failed) | \
                set(update.instances_current)
            rolled = job.move_workflow(dataclasses.replace(
                update, rollback=True,
                prev_config_version=update.config_version, config_version=back.version,
                instances_added=tuple(sorted(touched & set(update.instances_removed))),
                instances_removed=tuple(sorted(touched & set(update.instances_added))),
                instances_updated=tuple(sorted(touched & set(update.instances_updated))),
                instances_done=(), instances_failed=(), instances_current=(),
                instances_total=len(touched)), W.ROLLING_BACKWARD,
                message=f"rolling back to configuration version {update.prev_config_version}")
            job.change_runtime(lambda rt: dataclasses.replace(
                rt, workflow_version=rt.workflow_version + 1), spec=back)
        log.info("job %s: rolling back workflow %s to version %d", job.job_id, update.update_id,
                 back.version)
        return rolled

    def _now(self) -> float:
        return self.control.clock.wall()


def _keep_stopped(job: CachedJob) -> bool:
    """The job was stopped (or deleted) while its workflow is active: the workflow goes on,
    as on Peloton, but whatever it touches now stays stopped.

    Peloton's addInstancesInUpdate creates an added instance KILLED under a KILLED job;
    we apply the same rule to every instance a step touches, so a restart step that runs
    after StopJob (Aurora's restartShards then killTasks) does not run the job again with
    goal KILLED.  A stopped instance whose desired config is the target counts as done.
    """
    return job.runtime.goal_state in _STOPPED_GOALS


def _bind(fn: Callable[[UpdateActions, CachedJob], None], actions: UpdateActions,
          job: CachedJob) -> Callable[[], None]:
    return lambda: fn(actions, job)


#: Every action the workflow table names (NOOP is never asked to run).  COMPLETE (every
#: instance at its target) is a step whose plan says SUCCEED.
ACTIONS: dict[WorkflowAction, Callable[[UpdateActions, CachedJob], None]] = {
    WorkflowAction.START: UpdateActions.start,
    WorkflowAction.RUN: UpdateActions.run_step,
    WorkflowAction.COMPLETE: UpdateActions.run_step,
    WorkflowAction.WRITE_PROGRESS: UpdateActions.write_progress,
    WorkflowAction.CLEAR: UpdateActions.clear,
    WorkflowAction.CHECK_FOR_ABORT: UpdateActions.check_for_abort,
}
require_every_action("workflow", WorkflowAction, ACTIONS)
