"""Bulk control of task runs, shared by goal-state actions, API operations and the evictor.

Each method takes a cached job and a set of instances and does one thing to
all of them with as few round trips as possible: one resource-manager call,
one host-manager call, one batched runtime write (through the job aggregate).
All are idempotent: running one twice, or on tasks already in the target
state, changes nothing.  A task write that kept losing its compare-and-set
(task_writes.py) is never dropped: each method does what it can with the
instances that were stored, then raises TaskWriteConflict for the rest, so a
goal-state action is evaluated again, a loop's round is retried and an API
call answers Conflict.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from peloton.common.clock import Clock
from peloton.core.model.evolve import evolve
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import JobType, TaskState
from peloton.jobmgr import runs
from peloton.jobmgr.aggregate import CachedJob, TaskChange
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.sched import NeedsCache, gangs
from peloton.jobmgr.task_writes import TaskWriteOutcome

log = logging.getLogger(__name__)
S = TaskState

#: States in which the run is only known to the job manager and the resource manager.
NOT_ON_HOST = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.PLACED,
                         S.LAUNCHING, S.RESERVED})
#: States in which the run may be on a host.
ON_HOST = frozenset({S.LAUNCHED, S.STARTING, S.RUNNING, S.PREEMPTING})


class RunControl:
    """Queue, stop, retarget and restart the runs of many tasks at once."""

    def __init__(self, resmgr: ResourceManagerPort, hostmgr: HostManagerPort, clock: Clock,
                 config: JobManagerConfig, needs: NeedsCache, queue: GoalStateQueue) -> None:
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.clock = clock
        self.config = config
        self.needs = needs
        self.queue = queue

    def enqueue(self, job: CachedJob, instances: Collection[int]) -> list[int]:
        """Queue INITIALIZED (or PENDING) runs in the resource manager; returns those queued.

        Runtimes move to PENDING first, so a crash between the two steps leaves
        PENDING tasks, which recovery queues again.
        """
        now = self.clock.wall()
        want = [i for i in instances if (rt := job.get_task(i)) is not None
                and rt.state in (S.INITIALIZED, S.PENDING)
                and rt.goal_state in (S.RUNNING, S.SUCCEEDED)]
        if not want:
            return []
        queued = job.write_tasks({i: (lambda rt: runs.queued(rt, now)
                                      if rt.state is S.INITIALIZED else None) for i in want})
        conflicts = [queued] if queued.conflict else []
        ready = [i for i in want if i not in queued.unwritten and job.task(i).state is S.PENDING]
        by_version: dict[int, list[tuple[int, TaskRuntime]]] = {}
        for i in ready:
            rt = job.task(i)
            by_version.setdefault(rt.config_version, []).append((i, rt))
        failed: set[int] = set()
        for version, pairs in by_version.items():
            spec = job.specs.get(version) or job.spec
            for failure in self.resmgr.enqueue_gangs(
                    spec.respool_id, gangs(job.job_id, spec, pairs, self.needs)):
                log.warning("job %s instance %d not queued: %s", job.job_id,
                            failure.task_id.instance, failure.reason)
                failed.add(failure.task_id.instance)
                noted = job.write_task(failure.task_id.instance, _with_message(failure.reason))
                if noted.conflict:
                    conflicts.append(noted)
        _raise_first(conflicts)
        return [i for i in ready if i not in failed]

    def stop(self, job: CachedJob, instances: Collection[int],
             reason: TerminationReason = TerminationReason.KILLED_ON_REQUEST,
             grace: float | None = None, goal: TaskState | None = None) -> None:
        """Stop the current run of each instance: forget queued ones, kill ones on a host.

        With `goal` the same write also sets that goal (a job kill: goal KILLED), so the
        task engine has nothing to decide afterwards; without it the goal stays (a restart
        or an update stops the old run and starts the next).
        """
        now = self.clock.wall()
        queued = [i for i in instances if (rt := job.get_task(i)) is not None
                  and rt.state in NOT_ON_HOST]
        hosted = [i for i in instances if (rt := job.get_task(i)) is not None
                  and rt.state in ON_HOST]

        def with_goal(rt: TaskRuntime, inst: int) -> TaskRuntime:
            if goal is None:
                return rt
            return evolve(rt, goal_state=goal, desired_host=_goal_host(job, inst, rt, goal))

        conflicts: list[TaskWriteOutcome] = []
        if queued:
            self.resmgr.kill_tasks([TaskId(job.job_id, i) for i in queued])

            def drop(inst: int) -> TaskChange:
                def change(rt: TaskRuntime) -> TaskRuntime | None:
                    if rt.state not in NOT_ON_HOST:
                        return None
                    return with_goal(runs.killed(rt, now, reason,
                                                 "task stopped before it was launched"), inst)

                return change

            dropped = job.write_tasks({i: drop(i) for i in queued})
            if dropped.conflict:
                conflicts.append(dropped)
        if hosted:
            run_ids = {i: str(RunId(job.job_id, i, job.task(i).run_id)) for i in hosted}
            if grace is None:
                grace = min((job.task_spec(i).kill_grace_period_secs for i in hosted),
                            default=self.config.kill_grace_secs)

            def mark(inst: int) -> TaskChange:
                def change(rt: TaskRuntime) -> TaskRuntime | None:
                    return with_goal(runs.killing(rt, now, reason), inst) \
                        if rt.state in ON_HOST else None

                return change

            marked = job.write_tasks({i: mark(i) for i in hosted})
            if marked.conflict:
                conflicts.append(marked)
            # The task engine looks again after the kill timeout and kills once more if the
            # run has not ended (a kill lost on the way, the host manager down): a write to
            # KILLING schedules nothing by itself (goalstate/queue.py `_PASSIVE`).
            for inst in marked.written:
                self.queue.enqueue_task(job.job_id, inst, self.config.kill_timeout)
            # A run whose KILLING was not stored is not killed yet: killed now, it would end
            # with its goal unchanged and be started again.  The retry kills it.
            to_kill = [run for i, run in run_ids.items() if i not in marked.unwritten]
            if to_kill:
                self.hostmgr.kill(to_kill, grace)
        _raise_first(conflicts)

    def set_goal(self, job: CachedJob, instances: Collection[int], goal: TaskState, *,
                 bump_run: bool = False, reason: TerminationReason | None = None) -> list[int]:
        """Change the goal of instances (and, with `bump_run`, ask for a fresh run); returns
        the instances written.  The task engine then acts on each (the aggregate's rule)."""
        now = self.clock.wall()

        def change_of(inst: int) -> TaskChange:
            def change(rt: TaskRuntime) -> TaskRuntime | None:
                desired = rt.run_id + 1 if bump_run and not rt.state.terminal else rt.desired_run_id
                if bump_run and rt.state.terminal:
                    desired = max(rt.desired_run_id, rt.run_id + 1)
                term = reason if reason is not None else rt.termination
                host = _goal_host(job, inst, rt, goal)
                if rt.goal_state is goal and desired == rt.desired_run_id and \
                        term is rt.termination and host == rt.desired_host:
                    return None
                return evolve(rt, goal_state=goal, desired_run_id=desired,
                              termination=term, desired_host=host, update_time=now)

            return change

        return sorted(job.write_tasks({i: change_of(i) for i in instances}).stored())

    def desire_config(self, job: CachedJob, instances: Collection[int], version: int) -> None:
        """Have instances move to config `version` (the task engine restarts them on it)."""
        def change(rt: TaskRuntime) -> TaskRuntime | None:
            if rt.desired_config_version == version:
                return None
            return evolve(rt, desired_config_version=version, failure_count=0)

        job.write_tasks({i: change for i in instances}).stored()

    def initialize(self, job: CachedJob, instances: Collection[int]) -> list[int]:
        """Start a new run of each terminal instance (config <- desired config) and queue it."""
        now = self.clock.wall()
        changes = {}
        for i in instances:
            rt = job.get_task(i)
            if rt is None:
                continue
            spec = job.task_spec(i, rt.desired_config_version)
            changes[i] = _new_run(now, spec.health_checked, spec.stateful)
        started = job.write_tasks(changes)
        if started.written:
            self.enqueue(job, list(started.written))
        return sorted(started.stored())


def holds_host(job: CachedJob, instance: int) -> bool:
    """The instance is pinned to its desired host for good (a daemon instance, a stateful
    task), not only sent back there once by an in-place update."""
    return job.spec.type is JobType.DAEMON or job.task_spec(instance).stateful


def _goal_host(job: CachedJob, instance: int, rt: TaskRuntime, goal: TaskState) -> str:
    """The desired host once the goal is `goal`: a stop on request releases it."""
    if goal is not S.KILLED:
        return rt.desired_host
    return runs.stopped_desired_host(rt, pinned=holds_host(job, instance))


def _raise_first(conflicts: list[TaskWriteOutcome]) -> None:
    """Raise the first write that was not stored (after the rest of the work was done)."""
    if conflicts:
        raise conflicts[0].error()


def _with_message(message: str) -> TaskChange:
    def change(rt: TaskRuntime) -> TaskRuntime:
        return evolve(rt, message=message)

    return change


def _new_run(now: float, health_check: bool, stateful: bool) -> TaskChange:
    def change(cur: TaskRuntime) -> TaskRuntime | None:
        if not cur.state.terminal:
            return None
        nxt = runs.new_run(cur, now, health_check=health_check)
        if stateful and cur.host:
            # A stateful task owns data on its host: its next run goes back there, never
            # silently elsewhere.
            nxt = evolve(nxt, desired_host=cur.host)
        return nxt

    return change
