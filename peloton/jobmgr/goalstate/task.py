"""Task goal-state actions: the core's (goal, state, versions) table turned into actions.

The hot path (create, place, launch, run, finish) never goes through this
engine: jobs queue their tasks in bulk and host events are applied in
batches.  The engine handles what needs a decision for one task: retries
after a failure, restarts, kills, launches that never reported back.
A task is enqueued by the job aggregate when a write changes what its table
decides (see peloton.jobmgr.aggregate), and by the actions below when they
must look again later (a launch or a restart that has to wait).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from peloton.common.clock import Clock
from peloton.common.goalstate import Action
from peloton.core.lifecycle.retry import service_restart_delay
from peloton.core.lifecycle.run_end import counts_as_failure, end_reason, may_run_again
from peloton.core.lifecycle.task_goalstate import TaskAction, action_for
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.ports import HostManagerPort
from peloton.core.states import HealthState, JobType, TaskState
from peloton.jobmgr import sla
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.goalstate.queue import GoalStateQueue, TaskKey
from peloton.jobmgr.goalstate.tables import require_every_action
from peloton.jobmgr.runcontrol import RunControl

log = logging.getLogger(__name__)
S = TaskState
THROTTLED = "Task throttled due to failure"
#: The reason of a run killed because its health check failed (Mesos' reason name).
HEALTH_CHECK_FAILED = "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED"

#: An action's implementation: (actions, job, instance, the runtime it was chosen for).
Impl = Callable[["TaskActions", CachedJob, int, TaskRuntime], None]


class TaskActions:
    """What the task goal-state engine does; `resolve` turns a task key into its action."""

    def __init__(self, cache: JobCache, control: RunControl, hostmgr: HostManagerPort,
                 queue: GoalStateQueue, clock: Clock, config: JobManagerConfig) -> None:
        self.cache = cache
        self.control = control
        self.hostmgr = hostmgr
        self.queue = queue
        self.clock = clock
        self.config = config

    def resolve(self, key: TaskKey) -> Sequence[Action]:
        """The one action the task needs now (none if the job or task is gone)."""
        job_id, inst = key
        job = self.cache.get(job_id)
        rt = job.get_task(inst) if job is not None else None
        if job is None or rt is None:
            return ()
        action = action_for(rt)
        if action is TaskAction.NOOP:
            return ()
        impl = ACTIONS[action]
        return (Action(action.value, lambda: impl(self, job, inst, rt)),)

    def start(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """Queue an INITIALIZED run (instances of a limited job start in order, as room frees)."""
        if sla.limit_of(job) > 0:
            sla.start_within_limit(self.control, job)
        else:
            self.control.enqueue(job, [inst])

    def stop(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """Stop the current run (a restart or update continues once it ended)."""
        self.control.stop(job, [inst], reason=rt.termination)

    def initialize(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """Start the next run of an ended task, on its desired config."""
        self.control.initialize(job, [inst])

    def launch_retry(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """A run that never reported back from its host in time is lost: kill and replace it."""
        waited = self.clock.wall() - rt.update_time
        timeout = self.config.launch_timeout
        if waited < timeout:
            self.queue.enqueue_task(job.job_id, inst, timeout - waited)
            return
        log.warning("task %s/%d: %s for %.0fs, starting a new run", job.job_id, inst,
                    rt.state.value, waited)
        self.hostmgr.kill([str(RunId(job.job_id, inst, rt.run_id))], 0.0)
        now = self.clock.wall()

        def lost(cur: TaskRuntime) -> TaskRuntime | None:
            if cur.run_id != rt.run_id or cur.state not in (S.LAUNCHED, S.STARTING):
                return None
            # A run still LAUNCHED never started: not a failure (core run_end.py).
            counted = 1 if counts_as_failure(cur, S.LOST) else 0
            return dataclasses.replace(
                cur, state=S.LOST, message=f"no status from host after {waited:.0f}s",
                reason=end_reason(cur, S.LOST, cur.reason), completion_time=now,
                update_time=now, failure_count=cur.failure_count + counted)

        if job.write_task(inst, lost).stored():
            # The resource manager may hold the run's allocation (LAUNCHING or LAUNCHED
            # there) and no host will report its end: give it back.
            self.control.resmgr.kill_tasks([TaskId(job.job_id, inst)])

    def fail_retry(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """A failed batch task runs again while its restart policy allows (the same rule
        its job's state is derived by: core run_end.py `runs_again`)."""
        policy = job.task_spec(inst, rt.config_version).restart_policy
        if may_run_again(rt, policy.max_failures):
            self.control.initialize(job, [inst])

    def fail_unhealthy(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """A run whose health check failed is killed and counts as a failure of the task
        (Mesos' executor does this under Peloton); it then restarts like any failed run."""
        def failed(cur: TaskRuntime) -> TaskRuntime | None:
            if cur.run_id != rt.run_id or cur.state is not S.RUNNING or \
                    cur.healthy is not HealthState.UNHEALTHY:
                return None
            return dataclasses.replace(cur, failure_count=cur.failure_count + 1,
                                       reason=HEALTH_CHECK_FAILED,
                                       message=f"killed: {cur.message or 'health check failed'}")

        if job.write_task(inst, failed).stored():
            self.control.stop(job, [inst], TerminationReason.FAILED)

    def terminated_retry(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """An ended service task runs again, after a throttle that doubles per failure."""
        delay = service_restart_delay(rt.failure_count)
        due = rt.completion_time + delay if rt.completion_time else rt.update_time + delay
        wait = due - self.clock.wall()
        if wait > 0 and job.spec.type is not JobType.BATCH:
            if THROTTLED not in rt.message:
                msg = f"{THROTTLED}: {rt.message}" if rt.message else THROTTLED
                job.write_task(inst, lambda cur: dataclasses.replace(cur, message=msg)
                               if cur.run_id == rt.run_id and cur.state.terminal else None
                               ).stored()
            self.queue.enqueue_task(job.job_id, inst, wait)
            return
        self.control.initialize(job, [inst])

    def executor_shutdown(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """A run KILLING for too long is killed again, without a grace period."""
        waited = self.clock.wall() - rt.update_time
        timeout = self.config.kill_timeout
        if waited < timeout:
            self.queue.enqueue_task(job.job_id, inst, timeout - waited)
            return
        self.hostmgr.kill([str(RunId(job.job_id, inst, rt.run_id))], 0.0)
        self.queue.enqueue_task(job.job_id, inst, timeout)

    def delete(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """An ended instance with goal DELETED goes away."""
        job.delete_tasks([inst])

    def invalid(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """Log a (goal, state) pair that has no valid action."""
        log.error("task %s/%d has goal %s in state %s: nothing valid to do", job.job_id, inst,
                  rt.goal_state.value, rt.state.value)

    def reload(self, job: CachedJob, inst: int, rt: TaskRuntime) -> None:
        """Re-read the task runtime from storage and decide again."""
        job.reload_tasks([inst])
        self.queue.enqueue_task(job.job_id, inst)


#: Every action the task table names (NOOP is never asked to run).
ACTIONS: dict[TaskAction, Impl] = {
    TaskAction.START: TaskActions.start,
    TaskAction.STOP: TaskActions.stop,
    TaskAction.INITIALIZE: TaskActions.initialize,
    TaskAction.LAUNCH_RETRY: TaskActions.launch_retry,
    TaskAction.FAIL_RETRY: TaskActions.fail_retry,
    TaskAction.FAIL_UNHEALTHY: TaskActions.fail_unhealthy,
    TaskAction.TERMINATED_RETRY: TaskActions.terminated_retry,
    TaskAction.EXECUTOR_SHUTDOWN: TaskActions.executor_shutdown,
    TaskAction.DELETE: TaskActions.delete,
    TaskAction.STATE_INVALID: TaskActions.invalid,
    TaskAction.RELOAD_RUNTIME: TaskActions.reload,
}
require_every_action("task", TaskAction, ACTIONS)
