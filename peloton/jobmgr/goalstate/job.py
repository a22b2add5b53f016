"""Job goal-state actions: the core's job table (peloton.core.lifecycle.job_goalstate) in bulk.

Job actions work on all of a job's tasks at once (create 50,000 runtimes in
one transaction and queue them in one call; kill them with one call per
daemon) instead of sending every task through the task engine.  `ACTIONS`
maps every action the table names to its implementation; a missing one fails
at import (`require_every_action`), never silently at run time.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Sequence

import gevent

from peloton.common.goalstate import Action
from peloton.core.lifecycle.job_goalstate import JobAction, job_actions, main_job_action
from peloton.core.lifecycle.job_state import derive_job_state
from peloton.core.lifecycle.run_end import runs_again
from peloton.core.model.job import JobRuntime
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr import runs, sla
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.goalstate.tables import require_every_action
from peloton.jobmgr.runcontrol import RunControl, holds_host
from peloton.jobmgr.task_writes import retry_until_stored

log = logging.getLogger(__name__)
S = TaskState
#: Task runtimes created (and queued) per step of a job's creation.  A step encodes its
#: rows, then its enqueue request, on the hub without yielding: at 5,000 each held the hub
#: ~0.1 s (several times that under load), and each hop of a CreateJob answered meanwhile
#: waited for it.
CREATE_CHUNK = 1_000


def derived_runtime(job: CachedJob, now: float) -> Callable[[JobRuntime], JobRuntime | None]:
    """The change that brings a job runtime in line with its tasks (None: already is)."""
    def change(rt: JobRuntime) -> JobRuntime | None:
        counts = job.state_counts()
        spec = job.spec
        controller = None
        if spec.default_task.controller or (0 in spec.instance_tasks and
                                            spec.instance_tasks[0].controller):
            t0 = job.get_task(0)
            controller = t0.state if t0 is not None else None
        # A daemon job's size is its number of instances (ids may have holes).
        daemon = spec.type is JobType.DAEMON
        size = len(job) if daemon else spec.instance_count
        state = derive_job_state(
            counts, instance_count=size, job_type=spec.type, current=rt.state,
            goal=rt.goal_state, partially_created=not daemon and len(job) < spec.instance_count,
            controller_state=controller, rerunning=lambda: _rerunning(job))
        if rt.state is JobState.KILLING and not state.terminal:
            state = JobState.KILLING
        start = rt.start_time or (now if counts.get(S.RUNNING) or (
            state.terminal and counts.get(S.SUCCEEDED)) else 0.0)
        completion = now if state.terminal and not rt.state.terminal else rt.completion_time
        if not state.terminal:
            completion = 0.0
        stats = dict(counts)
        if state is rt.state and dict(rt.task_stats) == stats and start == rt.start_time \
                and completion == rt.completion_time:
            return None
        return dataclasses.replace(rt, state=state, task_stats=stats, start_time=start,
                                   completion_time=completion)

    return change


def _rerunning(job: CachedJob) -> Counter[TaskState]:
    """Per ended state, the job's tasks that will run again (core run_end.py)."""
    return Counter(rt.state for i, rt in job.tasks() if rt.state.terminal and runs_again(
        rt, job.task_spec(i, rt.config_version).restart_policy.max_failures))


class JobActions:
    """What the job goal-state engine does; `resolve` turns a job id into its actions."""

    def __init__(self, cache: JobCache, control: RunControl, queue: GoalStateQueue) -> None:
        self.cache = cache
        self.control = control
        self.queue = queue

    def resolve(self, job_id: str) -> Sequence[Action]:
        """The job's main action and Peloton's follow-ups, in order (none if it is gone)."""
        job = self.cache.get(job_id)
        if job is None:
            return ()
        rt = job.runtime
        names = job_actions(rt.goal_state, rt.state, state_version=rt.state_version,
                            desired_state_version=rt.desired_state_version)
        return [Action(name.value, _bind(ACTIONS[name], self, job) if name in FOLLOW_UPS
                       else _bind_main(ACTIONS[name], self, job, name)) for name in names]

    def create_tasks(self, job: CachedJob) -> None:
        """Create the runtimes a job is missing (PENDING, run 1) and queue them all."""
        with job.lock:
            spec = job.spec
            goal = S.SUCCEEDED if spec.type is JobType.BATCH else S.RUNNING
            if job.runtime.goal_state is JobState.KILLED:
                return
            now = self.control.clock.wall()
            missing = [i for i in range(spec.instance_count) if job.get_task(i) is None]
            if spec.type is JobType.DAEMON:
                missing = []  # the daemon controller creates instances, one per host
            if job.update is not None and job.update.state.active:
                # A rolling create or update adds these itself, batch by batch.
                adding = set(job.update.instances_added)
                missing = [i for i in missing if i not in adding]
            limited = sla.limit_of(job) > 0
            # Chunks let placement start on the first tasks early, and other greenlets run
            # between them (API replies and events interleave with a huge job's creation).
            for lo in range(0, len(missing), CREATE_CHUNK):
                chunk = missing[lo:lo + CREATE_CHUNK]
                job.create_tasks({i: runs.initial(
                    goal, spec.version, now,
                    health_check=spec.task_spec(i).health_checked, waiting=limited)
                    for i in chunk})
                if limited:
                    sla.start_within_limit(self.control, job)
                else:
                    self.control.enqueue(job, chunk)
                gevent.sleep(0)
            created = set(missing)
            if limited:
                sla.start_within_limit(self.control, job)
            else:
                self.control.enqueue(job, [i for i, rt in job.tasks() if rt.state in (
                    S.INITIALIZED, S.PENDING) and i not in created])
            if job.runtime.state in (JobState.INITIALIZED, JobState.UNINITIALIZED):
                job.change_runtime(lambda rt: dataclasses.replace(
                    rt, state=JobState.PENDING, state_version=rt.desired_state_version))

    def start_tasks(self, job: CachedJob) -> None:
        """Bring a stopped service job back: every task goal RUNNING with a fresh run."""
        with job.lock:
            self.create_tasks(job)
            stopped = [i for i, rt in job.tasks() if rt.goal_state is not S.RUNNING]
            self.control.set_goal(job, stopped, S.RUNNING, bump_run=True)
            job.change_runtime(lambda rt: dataclasses.replace(
                rt, state_version=rt.desired_state_version))

    def kill(self, job: CachedJob) -> None:
        """Stop every task of the job (goal KILLED), in bulk."""
        with job.lock:
            live = [i for i, rt in job.tasks() if not rt.state.terminal]
            # Live runs are stopped and get their goal in one write each (the task engine
            # then has nothing to decide); the others only get the goal.  A kill is never
            # dropped: writes that keep losing their compare-and-set are tried again, then
            # raise (TaskWriteConflict), so the engine evaluates the job again and the
            # runtime below is not moved on before every goal is stored.
            retry_until_stored(lambda todo: self.control.stop(
                job, todo, TerminationReason.KILLED_ON_REQUEST, goal=S.KILLED), live)

            def goal_killed(inst: int) -> Callable[[TaskRuntime], TaskRuntime | None]:
                def change(rt: TaskRuntime) -> TaskRuntime | None:
                    if rt.goal_state is S.KILLED:
                        return None
                    # Peloton's job kill: the host an in-place update gave the task is released.
                    return dataclasses.replace(
                        rt, goal_state=S.KILLED, termination=TerminationReason.KILLED_ON_REQUEST,
                        desired_host=runs.stopped_desired_host(rt, pinned=holds_host(job, inst)))

                return change

            retry_until_stored(lambda todo: job.write_tasks(
                {i: goal_killed(i) for i in todo}).stored(), job.instances())
            alive = any(not rt.state.terminal for _, rt in job.tasks())

            def killing(rt: JobRuntime) -> JobRuntime | None:
                # The kill is what the desired state asked for: the state version catches up
                # (Peloton's killJob), so a later workflow that brings the job back starts
                # only its own instances, not every stopped task (START_TASKS).
                state = JobState.KILLING if alive else rt.state
                if rt.state is state and rt.state_version == rt.desired_state_version:
                    return None
                return dataclasses.replace(rt, state=state,
                                           state_version=rt.desired_state_version)

            job.change_runtime(killing)

    def refresh_runtime(self, job: CachedJob) -> None:
        """Derive the job runtime from its tasks and store it if it changed."""
        job.change_runtime(derived_runtime(job, self.control.clock.wall()))

    def untrack(self, job: CachedJob) -> None:
        """A finished job leaves the active set and the cache (it stays in storage), unless a
        workflow is still active on it (an update of a stopped job): the workflow needs the
        cached job, and the job is evaluated again when the workflow ends."""
        if job.update is not None and job.update.state.active:
            self.refresh_runtime(job)
            return
        self.cache.untrack(job)

    def kill_and_untrack(self, job: CachedJob) -> None:
        """Kill what still runs; untrack once nothing does."""
        self.kill(job)
        if all(rt.state.terminal for _, rt in job.tasks()):
            self.refresh_runtime(job)
            self.untrack(job)

    def delete(self, job: CachedJob) -> None:
        """Remove every trace of a finished job."""
        self.cache.delete(job.job_id)

    def kill_and_delete(self, job: CachedJob) -> None:
        """Kill what still runs; delete once nothing does."""
        self.kill(job)
        if all(rt.state.terminal for _, rt in job.tasks()):
            self.cache.delete(job.job_id)

    def delete_from_active(self, job: CachedJob) -> None:
        """A terminal batch job with a terminal goal is no longer recovered on restart."""
        rt = job.runtime
        if job.spec.type is JobType.BATCH and rt.state.terminal and rt.goal_state.terminal:
            job.deactivate()

    def enqueue_update(self, job: CachedJob) -> None:
        """A job with an active workflow gets it evaluated."""
        if job.update is not None and job.update.state.active:
            self.queue.enqueue_update(job.job_id)

    def reload(self, job: CachedJob) -> None:
        """Re-read the job runtime from storage (the job is evaluated again)."""
        job.reload_runtime()

    def evaluate_sla(self, job: CachedJob) -> None:
        """Start waiting instances of a job with maximumRunningInstances as room frees up."""
        sla.start_within_limit(self.control, job)

    def invalid(self, job: CachedJob) -> None:
        """Log a (goal, state) pair that has no valid action."""
        log.error("job %s: goal %s in state %s has no valid action", job.job_id,
                  job.runtime.goal_state.value, job.runtime.state.value)


def _bind(fn: Callable[[JobActions, CachedJob], None], actions: JobActions,
          job: CachedJob) -> Callable[[], None]:
    return lambda: fn(actions, job)


#: Peloton's follow-up actions: harmless to run on a runtime that moved on.
FOLLOW_UPS = frozenset({JobAction.DELETE_FROM_ACTIVE_JOBS, JobAction.ENQUEUE_JOB_UPDATE,
                        JobAction.RUNTIME_UPDATE, JobAction.EVALUATE_SLA})


def _bind_main(fn: Callable[[JobActions, CachedJob], None], actions: JobActions,
               job: CachedJob, name: JobAction) -> Callable[[], None]:
    """The main action, run only if the job's runtime still calls for it.

    It was chosen from the runtime when the key was resolved; a call may have changed the
    goal since (a StartJob just after the engine chose to kill and untrack a stopped job:
    the kill would then undo the start).  Under the job lock the choice is made again; a
    changed one is left to the next evaluation."""
    def run() -> None:
        with job.lock:
            rt = job.runtime
            now = main_job_action(rt.goal_state, rt.state, state_version=rt.state_version,
                                  desired_state_version=rt.desired_state_version)
            if now is not name:
                log.info("job %s: %s no longer called for (now %s)", job.job_id, name.value,
                         now.value)
                actions.queue.enqueue_job(job.job_id)
                return
            fn(actions, job)

    return run


#: Every action the job table names (NOOP is never asked to run).
ACTIONS: dict[JobAction, Callable[[JobActions, CachedJob], None]] = {
    JobAction.CREATE_TASKS: JobActions.create_tasks,
    JobAction.RECOVER: JobActions.create_tasks,
    JobAction.START_TASKS: JobActions.start_tasks,
    JobAction.KILL: JobActions.kill,
    JobAction.UNTRACK: JobActions.untrack,
    JobAction.KILL_AND_UNTRACK: JobActions.kill_and_untrack,
    JobAction.DELETE: JobActions.delete,
    JobAction.KILL_AND_DELETE: JobActions.kill_and_delete,
    JobAction.RELOAD: JobActions.reload,
    JobAction.STATE_INVALID: JobActions.invalid,
    JobAction.DELETE_FROM_ACTIVE_JOBS: JobActions.delete_from_active,
    JobAction.ENQUEUE_JOB_UPDATE: JobActions.enqueue_update,
    JobAction.RUNTIME_UPDATE: JobActions.refresh_runtime,
    JobAction.EVALUATE_SLA: JobActions.evaluate_sla,
}
require_every_action("job", JobAction, ACTIONS)
