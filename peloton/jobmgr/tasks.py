"""Task operations behind the task APIs (v0 TaskManager; v1alpha PodService shares them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.events import PodEvent
from peloton.core.model.ids import RunId, validate_uuid
from peloton.core.model.task import TaskRuntime, TaskSpec, TerminationReason
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr import recovery, taskops
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext

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

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx

    def _job(self, job_id: str) -> CachedJob:
        return recovery.track(self.ctx, validate_uuid(job_id, "jobId"))

    def runtimes(self, job_id: str, instances: Sequence[int] | None = None
                 ) -> dict[int, TaskRuntime]:
        """Runtimes of some (or all) instances, from the cache or storage."""
        job_id = validate_uuid(job_id, "jobId")
        job = self.ctx.cache.get(job_id)
        if job is None:
            self.ctx.store.get_job_runtime(job_id)  # NotFound for an unknown job
            return self.ctx.store.get_task_runtimes(job_id, instances)
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
        job = self.ctx.cache.get(job_id)
        if job is not None and version in job.specs:
            return job.task_spec(instance, version)
        return self.ctx.store.get_task_config(job_id, instance, version)

    def start(self, job_id: str, ranges: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
        """Start stopped tasks (goal KILLED) with a fresh run; returns (started, invalid)."""
        job_id = validate_uuid(job_id, "jobId")
        cached = self.ctx.cache.get(job_id)
        runtime = cached.runtime if cached is not None else self.ctx.store.get_job_runtime(job_id)
        spec = cached.spec if cached is not None else self.ctx.store.get_job_config(
            job_id, runtime.config_version)
        if spec.type is JobType.BATCH and runtime.state.terminal:
            raise InvalidArgument("cannot start tasks in a terminated job", field="jobId")
        job = self._job(job_id)
        goal = default_goal(job.spec.type)
        with job.lock:
            if job.runtime.goal_state is not JobState.SUCCEEDED and \
                    job.runtime.goal_state is not JobState.RUNNING:
                job.runtime = self.ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
                    job.runtime, goal_state=JobState.SUCCEEDED if goal is S.SUCCEEDED
                    else JobState.RUNNING, state=JobState.PENDING, update_time=self.ctx.clock()))
        wanted = clamp_ranges(ranges, job.spec.instance_count)
        stopped = [i for i in wanted if (rt := job.get_task(i)) is not None
                   and rt.goal_state is S.KILLED]
        started = taskops.set_goal(self.ctx, job, stopped, goal, bump_run=True,
                                   reason=TerminationReason.NONE)
        invalid = [i for i in stopped if i not in started]
        self.ctx.enqueue_job(job.job_id)
        return started, invalid

    def stop(self, job_id: str, ranges: Sequence[tuple[int, int]]) -> tuple[list[int], list[int]]:
        """Stop tasks (goal KILLED); stopping every task also sets the job's goal."""
        job = self._job(job_id)
        wanted = clamp_ranges(ranges, job.spec.instance_count)
        live = [i for i in wanted if job.get_task(i) is not None]
        stopped = taskops.set_goal(self.ctx, job, live, S.KILLED,
                                   reason=TerminationReason.KILLED_ON_REQUEST)
        if len(live) == len(job) and job.runtime.goal_state is not JobState.KILLED:
            with job.lock:
                job.runtime = self.ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
                    job.runtime, goal_state=JobState.KILLED, update_time=self.ctx.clock()))
        already = [i for i in live if i not in stopped]
        taskops.stop(self.ctx, job, [i for i in live if not job.task(i).state.terminal],
                     TerminationReason.KILLED_ON_REQUEST)
        self.ctx.enqueue_job(job.job_id)
        return sorted(set(stopped) | set(already)), [i for i in wanted if i not in live]

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
            taskops.set_goal(self.ctx, job, insts, goal, bump_run=True,
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
        address, files = self.ctx.hostmgr.sandbox_files(rt.host, run_id)
        return address, run_id, files

    def read_file(self, job_id: str, instance: int, path: str, run: int | None = None,
                  offset: int = 0, length: int = 1 << 20) -> bytes:
        """Bytes of a sandbox file of a run (stdout, stderr)."""
        _, rt = self.get(job_id, instance)
        run_id = str(RunId(job_id, instance, run if run else rt.run_id))
        return self.ctx.hostmgr.read_sandbox(rt.host, run_id, path, offset, length)

    def events(self, job_id: str, instance: int, run: int | None = None,
               limit: int = 0) -> list[PodEvent]:
        """History of an instance (newest first), of one run or of all runs."""
        self.runtimes(job_id, [instance])
        return self.ctx.store.get_pod_events(job_id, instance, run, limit or None)

    def delete_events(self, job_id: str, instance: int, up_to_run: int, from_run: int = 1) -> None:
        """Delete the history of runs from_run..up_to_run of an instance."""
        self.ctx.store.delete_pod_events(validate_uuid(job_id, "jobId"), instance, from_run,
                                         up_to_run + 1)

    def stop_one(self, job_id: str, instance: int) -> None:
        """v1alpha StopPod: stop one instance (goal KILLED), leaving the job's goal alone."""
        job = self._job(job_id)
        rt = job.get_task(instance)
        if rt is None:
            raise NotFound(f"instance {instance} of job {job_id} not found", field="instanceId")
        if rt.goal_state is S.KILLED:
            return
        taskops.set_goal(self.ctx, job, [instance], S.KILLED,
                         reason=TerminationReason.KILLED_ON_REQUEST)
        if not job.task(instance).state.terminal:
            taskops.stop(self.ctx, job, [instance], TerminationReason.KILLED_ON_REQUEST)
        self.ctx.on_tasks_changed(job.job_id)

    def refresh(self, job_id: str, instance: int) -> None:
        """Reload one task runtime from storage into the cache and re-evaluate it."""
        job = self._job(job_id)
        rt = self.ctx.store.get_task_runtime(job.job_id, instance)
        job.drop_task(instance)
        job.set_task(instance, rt)
        self.ctx.enqueue_task(job.job_id, instance)
        self.ctx.enqueue_job(job.job_id)
