"""Workflow operations: create (update, restart, start, stop), pause, resume, abort, roll back.

A workflow moves a job's instances to a new config version in batches.
Every workflow creates a new config version — a restart is an update to
an identical copy — so "has this instance been handled" is always "does it
run the target version", and versions never repeat (a stale client's
entity version can never match again).  Creating a workflow aborts the
job's active one; every mutating call is a compare-and-set on the job's
entity version `<config>-<desired state>-<workflow>` and a stale version
is rejected with Conflict (gRPC ABORTED).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from peloton.common.clock import Clock
from peloton.core.errors import Conflict, FailedPrecondition, InvalidArgument, NotFound
from peloton.core.lifecycle.workflow_transitions import initial_state
from peloton.core.model.ids import new_id, validate_uuid
from peloton.core.model.job import JobSpec
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import JobState, JobType, WorkflowState, WorkflowType
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.feasibility import refuse_if_never_runs
from peloton.jobmgr.goalstate.job import JobActions
from peloton.jobmgr.goalstate.update import UpdateActions
from peloton.storage import ReadOnlyStore

log = logging.getLogger(__name__)
W = WorkflowState


Diff = tuple[list[int], list[int], list[int], list[int]]


def instance_diff(job: CachedJob, new: JobSpec) -> Diff:
    """(added, removed, updated, unchanged) instances of `job` going to config `new`.

    As Peloton's GetInstancesToProcessForUpdate, each existing instance is compared
    with the config it runs (its runtime's config version), not the job's current one:
    an instance left on an older config by an aborted update, or on its own config by
    an update pinned to other instances, is updated exactly when its spec differs; and
    one whose config is not its desired config (mid-update) is always updated.
    """
    old = job.spec
    added = list(range(old.instance_count, new.instance_count))
    removed = list(range(new.instance_count, old.instance_count))
    updated: list[int] = []
    unchanged: list[int] = []
    for inst in range(min(old.instance_count, new.instance_count)):
        rt = job.get_task(inst)
        if rt is None:
            current = old.task_spec(inst)
        elif rt.config_version != rt.desired_config_version:
            updated.append(inst)
            continue
        else:
            current = job.load_config(rt.config_version).task_spec(inst) \
                if rt.config_version else old.task_spec(inst)
        (unchanged if current == new.task_spec(inst) else updated).append(inst)
    return added, removed, updated, unchanged


class WorkflowOps:
    """Create and steer the workflows of jobs."""

    def __init__(self, cache: JobCache, store: ReadOnlyStore, jobs: JobActions, updates: UpdateActions,
                 resmgr: ResourceManagerPort, hostmgr: HostManagerPort, clock: Clock) -> None:
        self.cache = cache
        self.store = store
        #: For refusing an update no host or pool limit could ever run.
        self.resmgr, self.hostmgr = resmgr, hostmgr
        self.job_actions = jobs
        self.update_actions = updates
        self.clock = clock

    def job(self, job_id: str) -> CachedJob:
        """The cached job (loaded if needed)."""
        return self.cache.track(validate_uuid(job_id, "job_id"))

    # -- creation ----------------------------------------------------------------
    def create(self, job_id: str, kind: WorkflowType, spec: UpdateSpec, *,
               new_spec: JobSpec | None = None, version: str = "",
               instances: Sequence[int] | None = None, opaque_data: str = "") -> UpdateInfo:
        """Start a workflow; returns it (the job's new entity version is on the job)."""
        job = self.job(job_id)
        with job.lock:
            job.check_version(version)
            if job.runtime.state in (JobState.INITIALIZED, JobState.UNINITIALIZED):
                # The job's tasks are not all created yet (it was created a moment ago):
                # create them now, so the workflow starts from a whole job.
                self.job_actions.create_tasks(job)
            old = job.spec
            starts = kind in (WorkflowType.RESTART, WorkflowType.START) or spec.start_tasks
            if starts and job.runtime.goal_state.terminal and \
                    any(not rt.state.terminal for _, rt in job.tasks()):
                # Peloton: the kill must finish before the job can be brought back.
                raise Conflict("job is being terminated, cannot update with start_pods set now",
                               field="job_id")
            if kind is WorkflowType.UPDATE:
                if new_spec is None:
                    raise InvalidArgument("an update needs a job spec", field="spec")
                self._check_replace(old, new_spec)
                target = dataclasses.replace(new_spec, respool_id=new_spec.respool_id or
                                             old.respool_id, type=old.type)
                refuse_if_never_runs(self.resmgr, self.hostmgr, target)
                added, removed, updated, _ = instance_diff(job, target)
            else:
                target = old
                wanted = instances if instances is not None else range(old.instance_count)
                bad = [i for i in wanted if i < 0 or i >= old.instance_count]
                if bad:
                    raise InvalidArgument(f"instances {bad} are outside the job's "
                                          f"{old.instance_count} instances", field="ranges")
                added, removed, updated = [], [], sorted(set(wanted))
            if job.update is not None and job.update.state.active:
                self._finish(job, job.update, W.ABORTED, "superseded by a newer workflow")
            target = job.new_config(target)
            update = job.create_workflow(UpdateInfo(
                update_id=new_id(), job_id=job.job_id, type=kind,
                state=initial_state(spec.start_paused), spec=spec,
                config_version=target.version,
                prev_config_version=old.version,
                instances_total=len(added) + len(updated) + len(removed),
                instances_added=tuple(added), instances_updated=tuple(updated),
                instances_removed=tuple(removed), opaque_data=opaque_data))
            # A restart, a start, or an update that starts pods brings a stopped job back
            # (Peloton's updateJobRuntime): its goal is RUNNING again.  The desired state
            # version stays, so only the workflow's instances start, batch by batch.
            job.change_runtime(lambda rt: dataclasses.replace(
                rt, workflow_version=rt.workflow_version + 1,
                goal_state=JobState.RUNNING if starts else rt.goal_state),
                spec=target, workflow=update)
        log.info("job %s: %s workflow %s to version %d (%d added, %d updated, %d removed)",
                 job.job_id, kind.value, update.update_id, target.version, len(added),
                 len(updated), len(removed))
        return update

    def preview(self, job_id: str, new_spec: JobSpec, version: str = "") -> Diff:
        """What an UPDATE to `new_spec` would do, changing nothing (v1alpha GetReplaceJobDiff):
        (added, removed, updated, unchanged) instances, after the same checks as `create`."""
        job = self.job(job_id)
        job.check_version(version)
        self._check_replace(job.spec, new_spec)
        return instance_diff(job, dataclasses.replace(
            new_spec, respool_id=new_spec.respool_id or job.spec.respool_id, type=job.spec.type))

    @staticmethod
    def _check_replace(old: JobSpec, new: JobSpec) -> None:
        # A new name is accepted, as Peloton (validateJobConfigUpdate checks only the type
        # and the pool); the name history keeps the name the job was created with.
        if old.type is JobType.BATCH:
            raise InvalidArgument("batch jobs are not updated with workflows; use "
                                  "JobManager.Update to add instances", field="job_id")
        if new.respool_id and new.respool_id != old.respool_id:
            raise InvalidArgument("a job cannot change resource pool in an update",
                                  field="spec.respool_id")

    # -- steering ---------------------------------------------------------------------
    def _active(self, job: CachedJob) -> UpdateInfo:
        update = job.update
        if update is None or not update.state.active:
            raise FailedPrecondition(f"job {job.job_id} has no active workflow", field="job_id")
        return update

    def pause(self, job_id: str, version: str = "", opaque_data: str | None = None) -> str:
        """Pause the job's active workflow; returns the new entity version."""
        job = self.job(job_id)
        with job.lock:
            job.check_version(version)
            update = self._active(job)
            if update.state is not W.PAUSED:
                job.move_workflow(update, W.PAUSED, opaque_data=opaque_data)
            return self._bump(job)

    def resume(self, job_id: str, version: str = "", opaque_data: str | None = None) -> str:
        """Resume a paused workflow where it left off; returns the new entity version."""
        job = self.job(job_id)
        with job.lock:
            job.check_version(version)
            update = self._active(job)
            if update.state is W.PAUSED:
                back = update.prev_state if update.prev_state is not W.PAUSED else W.INITIALIZED
                job.move_workflow(update, back, opaque_data=opaque_data)
                self._step_now(job)
            return self._bump(job)

    def _step_now(self, job: CachedJob) -> None:
        """Take the resumed workflow's next step before answering (as Aurora's resume does), so
        a client reading it right after sees the next batch started; the engine retries a
        step that fails here."""
        try:
            if job.update is not None and job.update.state is W.INITIALIZED:
                self.update_actions.start(job)
            else:
                self.update_actions.run_step(job)
        except Exception:  # the workflow is resumed: the engine takes the step again
            log.exception("job %s: first step after resuming failed", job.job_id)

    def abort(self, job_id: str, version: str = "", opaque_data: str | None = None) -> str:
        """Stop the active workflow where it is (instances stay as they are)."""
        job = self.job(job_id)
        with job.lock:
            job.check_version(version)
            update = self._active(job)
            if opaque_data is not None:
                update = dataclasses.replace(update, opaque_data=opaque_data)
            self._finish(job, update, W.ABORTED, "aborted on request")
            return self._bump(job)

    def rollback(self, job_id: str, update_id: str = "") -> UpdateInfo:
        """Roll the active update back to the config it started from."""
        job = self.job(job_id)
        with job.lock:
            update = self._active(job)
            if update_id and update.update_id != update_id:
                raise InvalidArgument(f"update {update_id} is not the job's active workflow",
                                      field="updateId")
            return self.update_actions.start_rollback(job, update)

    def get(self, update_id: str) -> UpdateInfo:
        """A workflow by id (NotFound if unknown)."""
        return self.store.get_update(validate_uuid(update_id, "update_id"))

    def for_job(self, job_id: str, limit: int = 0) -> list[UpdateInfo]:
        """The job's workflows, newest first."""
        job_id = validate_uuid(job_id, "job_id")
        updates = sorted(self.store.get_updates_for_job(job_id),
                         key=lambda u: u.creation_time, reverse=True)
        if not updates:
            self.store.get_job_runtime(job_id)  # NotFound for an unknown job
        return updates[:limit] if limit else updates

    def current(self, job_id: str) -> UpdateInfo | None:
        """The job's latest workflow (active or not), or None."""
        job = self.cache.get(job_id)
        if job is not None and job.update is not None:
            return job.update
        try:
            runtime = self.store.get_job_runtime(job_id)
            return self.store.get_update(runtime.update_id) if runtime.update_id else None
        except NotFound:
            return None

    def _finish(self, job: CachedJob, update: UpdateInfo, state: WorkflowState,
                message: str) -> None:
        job.move_workflow(update, state, message=message)

    @staticmethod
    def _bump(job: CachedJob) -> str:
        job.change_runtime(lambda rt: dataclasses.replace(
            rt, workflow_version=rt.workflow_version + 1))
        return job.runtime.entity_version()
