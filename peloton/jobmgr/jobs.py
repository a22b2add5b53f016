"""Job operations behind the job APIs (v0 JobManager today; v1alpha shares them).

The servicers convert wire messages to core values and call these; every
rule about *whether* an operation is allowed lives here, once, and is
reported with our error tree (the servicers map it to the wire).
"""

from __future__ import annotations

import dataclasses
import logging

from peloton.core.errors import (
    AlreadyExists,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from peloton.core.model.ids import new_id, validate_uuid
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.states import JobState, JobType, WorkflowState, WorkflowType
from peloton.jobmgr import recovery
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.workflows import event
from peloton.storage import JobQuery, JobQueryResult

log = logging.getLogger(__name__)
#: Seconds between storing a new job and creating its tasks.
CREATE_DELAY = 0.02


class JobOps:
    """Create, read, query, update and delete jobs."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx

    def create(self, spec: JobSpec, job_id: str = "", rolling: UpdateSpec | None = None,
               opaque_data: str = "") -> str:
        """Store a new job and start creating its tasks; returns its id.

        With `rolling` (v1alpha CreateJob's create spec) the instances are added by an
        UPDATE workflow in batches, which may start paused, as Peloton's rolling create.
        """
        job_id = validate_uuid(job_id, "id") if job_id else new_id()
        self.ctx.resmgr.validate_pool(spec.respool_id)
        try:
            self.ctx.store.get_job_runtime(job_id)
            raise AlreadyExists(f"job {job_id} already exists", field="id")
        except NotFound:
            pass
        now = self.ctx.clock()
        spec = dataclasses.replace(spec, version=1, created_at=now)
        goal = JobState.SUCCEEDED if spec.type is JobType.BATCH else JobState.RUNNING
        runtime = JobRuntime(state=JobState.INITIALIZED, goal_state=goal, creation_time=now,
                             update_time=now, config_version=1)
        # One unit: a create that fails leaves no task config behind (storage contract).
        stored = self.ctx.store.create_job_with_tasks(job_id, spec, runtime, spec.default_task,
                                                      dict(spec.instance_tasks))
        job = self.ctx.cache.add(CachedJob(job_id, spec, stored))
        if rolling is not None and spec.type is not JobType.BATCH:
            self._rolling_create(job, rolling, opaque_data)
        # For a big job, a moment's delay lets the reply reach the client before creating
        # its tasks takes the process for a while; a small job starts at once.
        self.ctx.enqueue_job(job_id, CREATE_DELAY if spec.instance_count >= 1000 else 0.0)
        log.info("created job %s (%s, %d instances) in pool %s", job_id, spec.name,
                 spec.instance_count, spec.respool_id)
        return job_id

    def _rolling_create(self, job: CachedJob, rolling: UpdateSpec, opaque_data: str) -> None:
        now = self.ctx.clock()
        update = UpdateInfo(
            update_id=new_id(), job_id=job.job_id, type=WorkflowType.UPDATE,
            state=WorkflowState.PAUSED if rolling.start_paused else WorkflowState.INITIALIZED,
            spec=rolling, config_version=job.spec.version, prev_config_version=0,
            instances_total=job.spec.instance_count,
            instances_added=tuple(range(job.spec.instance_count)), opaque_data=opaque_data,
            creation_time=now, update_time=now)
        update = self.ctx.store.create_update(update)
        event(self.ctx, update, None)
        job.runtime = self.ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
            job.runtime, update_id=update.update_id, workflow_version=1, update_time=now))
        job.update = update
        self.ctx.on_update_due(job.job_id)

    def get(self, job_id: str) -> tuple[JobSpec, JobRuntime]:
        """The current config and runtime of a job."""
        job_id = validate_uuid(job_id, "id")
        job = self.ctx.cache.get(job_id)
        if job is not None:
            return job.spec, job.runtime
        runtime = self.ctx.store.get_job_runtime(job_id)
        return self.ctx.store.get_job_config(job_id, runtime.config_version), runtime

    def query(self, query: JobQuery) -> JobQueryResult:
        """One page of matching jobs (from the job index)."""
        return self.ctx.store.query_jobs(query)

    def add_instances(self, job_id: str, spec: JobSpec) -> int:
        """v0 Update: a batch job may only grow; returns the new config version."""
        job_id = validate_uuid(job_id, "id")
        _, runtime = self.get(job_id)
        if runtime.state.terminal:
            raise InvalidArgument(f"job {job_id} is in a terminal state and cannot be updated",
                                  field="id")
        job = recovery.track(self.ctx, job_id)
        old = job.spec
        if old.type is not JobType.BATCH:
            raise InvalidArgument("only batch jobs can be updated with JobManager.Update; "
                                  "use the update service for services", field="config.type")
        if spec.instance_count <= old.instance_count:
            raise InvalidArgument(
                f"instanceCount may only grow (from {old.instance_count}), "
                f"got {spec.instance_count}", field="config.instanceCount")
        for name in ("name", "type", "respool_id", "owning_team", "labels", "ldap_groups"):
            if getattr(spec, name) != getattr(old, name) and getattr(spec, name):
                raise InvalidArgument(f"{name} cannot change in an update", field=f"config.{name}")
        with job.lock:
            version = self.ctx.store.get_max_job_config_version(job_id) + 1
            new = dataclasses.replace(old, instance_count=spec.instance_count, version=version,
                                      instance_tasks={**old.instance_tasks, **{
                                          i: t for i, t in spec.instance_tasks.items()
                                          if i >= old.instance_count}},
                                      document=spec.document or old.document,
                                      document_kind=spec.document_kind or old.document_kind)
            self.ctx.store.create_task_configs(job_id, version, new.default_task,
                                               dict(new.instance_tasks))
            self.ctx.store.add_job_config(job_id, new)
            # INITIALIZED (as Peloton's Update does) makes the job engine's next look run
            # CREATE_TASKS for the new instances; left RUNNING, it would do nothing.
            job.runtime = self.ctx.store.update_job_runtime(job_id, dataclasses.replace(
                job.runtime, config_version=version, state=JobState.INITIALIZED,
                update_time=self.ctx.clock()))
            job.spec = new
            job.specs[version] = new
        self.ctx.enqueue_job(job_id)
        return version

    def stop(self, job_id: str) -> None:
        """Kill every task of the job (goal KILLED)."""
        job = recovery.track(self.ctx, validate_uuid(job_id, "id"))
        with job.lock:
            if job.runtime.goal_state is not JobState.KILLED:
                job.runtime = self.ctx.store.update_job_runtime(job_id, dataclasses.replace(
                    job.runtime, goal_state=JobState.KILLED, update_time=self.ctx.clock(),
                    desired_state_version=job.runtime.desired_state_version + 1))
        self.ctx.enqueue_job(job_id)

    def change_goal(self, job_id: str, goal: JobState, version: str = "") -> str:
        """v1alpha StartJob / StopJob: set the goal (RUNNING or KILLED) and bump the desired
        state version, a compare-and-set on the entity version ("" = any); returns the new one.

        The job goal-state engine then starts (state version behind) or kills the tasks.
        Stopping is refused while an active workflow is starting pods (as Peloton).
        """
        from peloton.jobmgr.workflows import WorkflowOps

        job = recovery.track(self.ctx, validate_uuid(job_id, "job_id"))
        if goal is JobState.RUNNING and job.spec.type is JobType.BATCH:
            raise InvalidArgument("StartJob starts stateless jobs; start the tasks of a batch "
                                  "job with TaskManager.Start", field="job_id")
        with job.lock:
            WorkflowOps.check_version(job, version)
            update = job.update
            if goal is JobState.KILLED and update is not None and update.state.active and \
                    update.spec.start_tasks:
                raise Conflict("job has active update with start_pods set, cannot stop the "
                               "job now")
            job.runtime = self.ctx.store.update_job_runtime(job.job_id, dataclasses.replace(
                job.runtime, goal_state=goal, update_time=self.ctx.clock(),
                desired_state_version=job.runtime.desired_state_version + 1))
        self.ctx.enqueue_job(job.job_id)
        return job.runtime.entity_version()

    def delete(self, job_id: str, force: bool = False) -> None:
        """Delete a terminal job and everything stored about it (force: kill it first)."""
        job_id = validate_uuid(job_id, "id")
        _, runtime = self.get(job_id)
        if not runtime.state.terminal and not force:
            raise FailedPrecondition(
                f"job {job_id} is {runtime.state.value}; stop it before deleting it", field="id")
        job = self.ctx.cache.get(job_id)
        if force and job is not None and not runtime.state.terminal:
            with job.lock:
                job.runtime = self.ctx.store.update_job_runtime(job_id, dataclasses.replace(
                    job.runtime, goal_state=JobState.DELETED, update_time=self.ctx.clock()))
            self.ctx.enqueue_job(job_id)
            return
        if job is not None:
            from peloton.jobmgr.goalstate.job import untrack

            untrack(self.ctx, job)
        self.ctx.store.delete_job(job_id)

    def refresh(self, job_id: str) -> None:
        """Reload a job from storage into the cache and re-evaluate it."""
        job_id = validate_uuid(job_id, "id")
        self.ctx.cache.remove(job_id)
        recovery.track(self.ctx, job_id)
        self.ctx.enqueue_job(job_id)
        for inst in self.ctx.cache.get(job_id).instances():  # type: ignore[union-attr]
            self.ctx.enqueue_task(job_id, inst)

    def active(self) -> list[str]:
        """Ids of every active job."""
        return self.ctx.store.get_active_jobs()
