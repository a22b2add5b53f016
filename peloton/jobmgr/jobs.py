"""Job operations behind the job APIs (v0 JobManager today; v1alpha shares them).

The servicers convert wire messages to core values and call these; every
rule about *whether* an operation is allowed lives here, once, and is
reported with our error tree (the servicers map it to the wire).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from peloton.common.clock import Clock
from peloton.core.errors import (
    AlreadyExists,
    Conflict,
    FailedPrecondition,
    InvalidArgument,
)
from peloton.core.lifecycle.workflow_transitions import initial_state
from peloton.core.model.ids import new_id, validate_uuid
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import JobState, JobType, WorkflowType
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.feasibility import PoolChecks, ShapesCache, refuse_if_never_runs
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.storage import JobQuery, JobQueryResult, ReadOnlyStore

log = logging.getLogger(__name__)


class JobOps:
    """Create, read, query, update and delete jobs."""

    def __init__(self, cache: JobCache, store: ReadOnlyStore, resmgr: ResourceManagerPort,
                 hostmgr: HostManagerPort, queue: GoalStateQueue, clock: Clock,
                 new_job_id: Callable[[], str] = new_id) -> None:
        self.cache = cache
        #: Draws the id of a job created without one (a member draws one it drives).
        self.new_job_id = new_job_id
        self.store = store
        self.resmgr = resmgr
        #: What every host could hold, for refusing jobs that can never run (read through
        #: `shapes`: one host manager call per create was one more wait of every create).
        self.hostmgr = hostmgr
        self.shapes = ShapesCache(hostmgr, clock.monotonic)
        #: The pool checks of creates and updates, those made at once sharing one call.
        self.pool_checks = PoolChecks(resmgr)
        self.queue = queue
        self.clock = clock

    def create(self, spec: JobSpec, job_id: str = "", rolling: UpdateSpec | None = None,
               opaque_data: str = "") -> str:
        """Store a new job and start creating its tasks; returns its id.

        With `rolling` (v1alpha CreateJob's create spec) the instances are added by an
        UPDATE workflow in batches, which may start paused, as Peloton's rolling create.
        The pool is validated here (`refuse_if_never_runs`), so a servicer need not.
        """
        given = bool(job_id)
        job_id = validate_uuid(job_id, "id") if given else self.new_job_id()
        refuse_if_never_runs(self.pool_checks, self.hostmgr, spec, self.shapes)
        now = self.clock.wall()
        spec = dataclasses.replace(spec, version=1, created_at=now)
        goal = JobState.SUCCEEDED if spec.type is JobType.BATCH else JobState.RUNNING
        runtime = JobRuntime(state=JobState.INITIALIZED, goal_state=goal, creation_time=now,
                             update_time=now, config_version=1)
        workflow = None
        if rolling is not None and spec.type is not JobType.BATCH:
            workflow = UpdateInfo(
                update_id=new_id(), job_id=job_id, type=WorkflowType.UPDATE,
                state=initial_state(rolling.start_paused), spec=rolling,
                config_version=spec.version, prev_config_version=0,
                instances_total=spec.instance_count,
                instances_added=tuple(range(spec.instance_count)), opaque_data=opaque_data)
        try:
            # The store refuses a taken id in the create's own transaction (its contract):
            # no read first, which was one more store round trip of every create.
            self.cache.create(job_id, spec, runtime, workflow)
        except AlreadyExists as exc:
            raise AlreadyExists(exc.message, field="id") from None
        log.info("created job %s (%s, %d instances) in pool %s", job_id, spec.name,
                 spec.instance_count, spec.respool_id)
        return job_id

    def get(self, job_id: str) -> tuple[JobSpec, JobRuntime]:
        """The current config and runtime of a job."""
        job_id = validate_uuid(job_id, "id")
        job = self.cache.get(job_id)
        if job is not None:
            return job.spec, job.runtime
        runtime = self.store.get_job_runtime(job_id)
        return self.store.get_job_config(job_id, runtime.config_version), runtime

    def query(self, query: JobQuery) -> JobQueryResult:
        """One page of matching jobs (from the job index)."""
        return self.store.query_jobs(query)

    def add_instances(self, job_id: str, spec: JobSpec) -> int:
        """v0 Update: a batch job may only grow; returns the new config version."""
        job_id = validate_uuid(job_id, "id")
        _, runtime = self.get(job_id)
        if runtime.state.terminal:
            raise InvalidArgument(f"job {job_id} is in a terminal state and cannot be updated",
                                  field="id")
        job = self.cache.track(job_id)
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
            grown = dataclasses.replace(
                old, instance_count=spec.instance_count,
                instance_tasks={**old.instance_tasks, **{
                    i: t for i, t in spec.instance_tasks.items() if i >= old.instance_count}},
                document=spec.document or old.document,
                document_kind=spec.document_kind or old.document_kind)
            refuse_if_never_runs(self.pool_checks, self.hostmgr, grown, self.shapes)
            new = job.new_config(grown)
            # INITIALIZED (as Peloton's Update does) makes the job engine's next look run
            # CREATE_TASKS for the new instances; left RUNNING, it would do nothing.
            job.change_runtime(lambda rt: dataclasses.replace(rt, state=JobState.INITIALIZED),
                               spec=new)
        return new.version

    def stop(self, job_id: str) -> None:
        """Kill every task of the job (goal KILLED)."""
        self._stop_for_good(self.cache.track(validate_uuid(job_id, "id")), JobState.KILLED)

    def _stop_for_good(self, job: CachedJob, goal: JobState) -> None:
        """Give a job the terminal `goal` (a new desired state version, unless it has it
        already); the job engine then kills the tasks.

        An active workflow goes on, as on Peloton: the workflow step sees the job's
        terminal goal and keeps every instance it touches from then on stopped
        (goalstate/update.py `_keep_stopped`), so a restart or update step that comes
        after the stop never runs an instance again, and the workflow completes.
        """
        with job.lock:
            job.change_runtime(lambda rt: None if rt.goal_state is goal else
                               dataclasses.replace(
                                   rt, goal_state=goal,
                                   desired_state_version=rt.desired_state_version + 1))

    def change_goal(self, job_id: str, goal: JobState, version: str = "") -> str:
        """v1alpha StartJob / StopJob: set the goal (RUNNING or KILLED) and bump the desired
        state version, a compare-and-set on the entity version ("" = any); returns the new one.

        The job goal-state engine then starts (state version behind) or kills the tasks.
        Stopping is refused while an active workflow is starting pods (as Peloton).  A
        batch job is started like a service, as Peloton's JobStart does: every task's goal
        becomes RUNNING, so its tasks run again and are restarted when they end.
        """
        job = self.cache.track(validate_uuid(job_id, "job_id"))
        with job.lock:
            job.check_version(version)
            update = job.update
            if goal is JobState.KILLED and update is not None and update.state.active and \
                    update.spec.start_tasks:
                raise Conflict("job has active update with start_pods set, cannot stop the "
                               "job now")
            job.change_runtime(lambda rt: dataclasses.replace(
                rt, goal_state=goal, desired_state_version=rt.desired_state_version + 1))
        return job.runtime.entity_version()

    def delete(self, job_id: str, force: bool = False) -> None:
        """Delete a terminal job and everything stored about it (force: kill it first)."""
        job_id = validate_uuid(job_id, "id")
        _, runtime = self.get(job_id)
        if not runtime.state.terminal and not force:
            raise FailedPrecondition(
                f"job {job_id} is {runtime.state.value}; stop it before deleting it", field="id")
        if force and not runtime.state.terminal:
            # As Peloton's DeleteJob: goal DELETED (a new desired state version); the job
            # engine kills the tasks, then deletes the job.  Tracked first: a job that is
            # not cached (recovered lazily) must be killed too, not just forgotten.
            self._stop_for_good(self.cache.track(job_id), JobState.DELETED)
            return
        self.cache.delete(job_id)

    def refresh(self, job_id: str) -> None:
        """Reload a job from storage into the cache and re-evaluate it and its tasks."""
        job_id = validate_uuid(job_id, "id")
        job = self.cache.track(job_id)
        job.reload()  # in place: a second object of the job could go stale
        for inst in job.instances():
            self.queue.enqueue_task(job_id, inst)

    def active(self) -> list[str]:
        """Ids of every active job."""
        return self.cache.active_ids()
