"""Task operations behind the task APIs (v0 TaskManager; v1alpha PodService shares them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.events import PodEvent
from peloton.core.model.ids import RunId, validate_uuid
from peloton.core.model.task import TaskRuntime, TaskSpec, TerminationReason
from peloton.core.ports import HostManagerPort
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.lifecycle_lock import KillLocked
from peloton.jobmgr.runcontrol import RunControl
from peloton.storage import ReadOnlyStore

S = TaskState


def default_goal(job_type: JobType) -> TaskState:
    """What a task of this kind of job is running toward."""
    return S.SUCCEEDED if job_type is JobType.BATCH else S.RUNNING


def clamp_ranges(ranges: Sequence[tuple[int, int]], count: int) -> list[int]:
    """Instances in [from, to) ranges, clamped to the job; no ranges means all."""
    if not ranges:
        return list(range(count))
    out: set[int] = set()
    for lo, hi in ranges:
        if lo > hi:
            raise InvalidArgument(f"instance range {lo}:{hi} has from > to", field="ranges")
        out.update(range(lo, min(hi, count)))
    return sorted(out)


class TaskOps:
    """Read and control the tasks of a job."""

    def __init__(self, cache: JobCache, store: ReadOnlyStore, hostmgr: HostManagerPort,
                 control: RunControl, queue: GoalStateQueue) -> None:
        self.cache = cache
        self.store = store
        self.hostmgr = hostmgr
        self.control = control
        self.queue = queue

    def _job(self, job_id: str) -> CachedJob:
        return self.cache.track(validate_uuid(job_id, "jobId"))

    def runtimes(self, job_id: str, instances: Sequence[int] | None = None
                 ) -> dict[int, TaskRuntime]:
        """Runtimes of some (or all) instances, from the cache or storage."""
        job_id = validate_uuid(job_id, "jobId")
        job = self.cache.get(job_id)
        if job is None:
            self.store.get_job_runtime(job_id)  # NotFound for an unknown job
            return self.store.get_task_runtimes(job_id, instances)
        wanted = job.instances() if instances is None else instances
        return {i: rt for i in wanted if (rt := job.get_task(i)) is not None}

    def get(self, job_id: str, instance: int) -> tuple[TaskSpec, TaskRuntime]:
        """One task's spec (at its config version) and runtime."""
        rts = self.runtimes(job_id, [instance])
        if instance not in rts:
            raise NotFound(f"instance {instance} of job {job_id} not found", field="instanceId")
        rt = rts[instance]
        return self.spec(job_id, instance, rt.config_version), rt

    def spec(self, job_id: str, instance: int, version: int) -> TaskSpec:
        """The spec an instance runs at a config version."""
        job = self.cache.get(job_id)
        if job is not None and version in job.specs:
            return job.task_spec(instance, version)
        return self.store.get_task_config(job_id, instance, version)

    def start(self, job_id: str, ranges: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
        """Start stopped tasks (goal KILLED) with a fresh run; returns (started, invalid)."""
        job_id = validate_uuid(job_id, "jobId")
        cached = self.cache.get(job_id)
        runtime = cached.runtime if cached is not None else self.store.get_job_runtime(job_id)
        spec = cached.spec if cached is not None else self.store.get_job_config(
            job_id, runtime.config_version)
        if spec.type is JobType.BATCH and runtime.state.terminal:
            raise InvalidArgument("cannot start tasks in a terminated job", field="jobId")
        job = self._job(job_id)
        goal = default_goal(job.spec.type)
        job_goal = JobState.SUCCEEDED if goal is S.SUCCEEDED else JobState.RUNNING
        job.change_runtime(lambda rt: None if rt.goal_state in (
            JobState.SUCCEEDED, JobState.RUNNING) else dataclasses.replace(
                rt, goal_state=job_goal, state=JobState.PENDING))
        wanted = clamp_ranges(ranges, job.spec.instance_count)
        stopped = [i for i in wanted if (rt := job.get_task(i)) is not None
                   and rt.goal_state is S.KILLED]
        started = self.control.set_goal(job, stopped, goal, bump_run=True,
                                        reason=TerminationReason.NONE)
        invalid = [i for i in stopped if i not in started]
        return started, invalid

    def stop(self, job_id: str, ranges: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
        """Stop tasks (goal KILLED); stopping every task also sets the job's goal."""
        job = self._job(job_id)
        wanted = clamp_ranges(ranges, job.spec.instance_count)
        live = [i for i in wanted if job.get_task(i) is not None]
        stopped = self.control.set_goal(job, live, S.KILLED,
                                        reason=TerminationReason.KILLED_ON_REQUEST)
        if len(live) == len(job):
            job.change_runtime(lambda rt: None if rt.goal_state is JobState.KILLED else
                               dataclasses.replace(rt, goal_state=JobState.KILLED))
        already = [i for i in live if i not in stopped]
        self._stop_runs(job, [i for i in live if not job.task(i).state.terminal])
        return sorted(set(stopped) | set(already)), [i for i in wanted if i not in live]

    def _stop_runs(self, job: CachedJob, instances: list[int]) -> None:
        """Kill the instances' runs now; while AdminService locks kills, leave them KILLING
        for the task engine's KILLING timeout to kill once the lock is gone (the API call
        has recorded the goal, as Peloton's, which only wrote goals)."""
        try:
            self.control.stop(job, instances, TerminationReason.KILLED_ON_REQUEST)
        except KillLocked:
            for inst in instances:
                self.queue.enqueue_task(job.job_id, inst)

    def restart(self, job_id: str, ranges: Sequence[tuple[int, int]]) -> list[int]:
        """Restart tasks: each gets a fresh run (the current one is killed first)."""
        job = self._job(job_id)
        wanted = [i for i in clamp_ranges(ranges, job.spec.instance_count)
                  if job.get_task(i) is not None]
        by_goal: dict[TaskState, list[int]] = {}
        for i in wanted:
            rt = job.task(i)
            goal = rt.goal_state if not rt.goal_state.terminal or rt.goal_state is S.SUCCEEDED \
                else default_goal(job.spec.type)
            by_goal.setdefault(goal, []).append(i)
        for goal, insts in by_goal.items():
            self.control.set_goal(job, insts, goal, bump_run=True,
                                  reason=TerminationReason.KILLED_FOR_RESTART)
        return wanted

    def sandbox(self, job_id: str, instance: int, run: int | None = None
                ) -> tuple[str, str, list[tuple[str, int]]]:
        """(hostname, run id, files) of a run's sandbox (default: the current run)."""
        _, rt = self.get(job_id, instance)
        run_id = str(RunId(job_id, instance, run if run else rt.run_id))
        if not rt.host and run is None:
            raise InvalidArgument(f"task {job_id}-{instance} has not been launched on a host "
                                  "yet", field="instanceId")
        address, files = self.hostmgr.sandbox_files(rt.host, run_id)
        return address, run_id, files

    def events(self, job_id: str, instance: int, run: int | None = None,
               limit: int = 0) -> list[PodEvent]:
        """History of an instance (newest first), of one run or of all runs."""
        self.runtimes(job_id, [instance])
        return self.store.get_pod_events(job_id, instance, run, limit or None)

    def delete_events(self, job_id: str, instance: int, up_to_run: int, from_run: int = 1) -> None:
        """Delete the history of runs from_run..up_to_run of an instance."""
        self.cache.delete_history(validate_uuid(job_id, "jobId"), instance, from_run,
                                     up_to_run + 1)

    def stop_one(self, job_id: str, instance: int) -> None:
        """v1alpha StopPod: stop one instance (goal KILLED), leaving the job's goal alone."""
        job = self._job(job_id)
        rt = job.get_task(instance)
        if rt is None:
            raise NotFound(f"instance {instance} of job {job_id} not found", field="instanceId")
        if rt.goal_state is S.KILLED:
            return
        self.control.set_goal(job, [instance], S.KILLED,
                              reason=TerminationReason.KILLED_ON_REQUEST)
        if not job.task(instance).state.terminal:
            self._stop_runs(job, [instance])

    def refresh(self, job_id: str, instance: int) -> None:
        """Reload one task runtime from storage into the cache and re-evaluate it."""
        job = self._job(job_id)
        self.store.get_task_runtime(job.job_id, instance)  # NotFound for an unknown instance
        job.reload_tasks([instance])
        self.queue.enqueue_task(job.job_id, instance)
        self.queue.enqueue_job(job.job_id)
