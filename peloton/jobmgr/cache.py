"""The set of cached jobs: which active jobs the job manager holds, and loading them.

A job is cached from its creation (or from recovery, or from the first call that
touches a finished job again: `track`) until it finishes and is untracked.  Every
change to a cached job, and every store write about jobs, is in aggregate.py; this
module only finds, loads and forgets jobs and asks the aggregate for the rest.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator

import gevent.lock

from peloton.core.errors import NotFound
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.update import UpdateInfo
from peloton.jobmgr.aggregate import (
    CachedJob,
    create_job,
    delete_history,
    delete_job,
    drop_active,
)
from peloton.jobmgr.job_deps import JobDeps, Listeners

log = logging.getLogger(__name__)


class JobCache:
    """The cached (active) jobs by id."""

    def __init__(self, deps: JobDeps) -> None:
        self.deps = deps
        self._jobs: dict[str, CachedJob] = {}
        # Untracked jobs someone may still hold (a call that read one just before the job
        # engine untracked it).  Weak: a job nobody holds is gone, and the next `track`
        # loads it afresh; one still held is taken back, so a job never has two objects.
        self._retired: weakref.WeakValueDictionary[str, CachedJob] = \
            weakref.WeakValueDictionary()
        # Loading yields (store reads): two calls tracking one job must not both load it.
        self._loading = gevent.lock.RLock()

    @property
    def listeners(self) -> Listeners:
        """Told of changes to every cached job (the watch API subscribes here)."""
        return self.deps.listeners

    def get(self, job_id: str) -> CachedJob | None:
        """The cached job, or None if it is not active."""
        return self._jobs.get(job_id)

    def __iter__(self) -> Iterator[CachedJob]:
        return iter(list(self._jobs.values()))

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def active_ids(self) -> list[str]:
        """Ids in the stored active-job set (what recovery loads)."""
        return self.deps.store.get_active_jobs()

    def create(self, job_id: str, spec: JobSpec, runtime: JobRuntime,
               workflow: UpdateInfo | None = None) -> CachedJob:
        """Store a new job (see `aggregate.create_job`), cache it and have it evaluated."""
        job = self._jobs[job_id] = create_job(self.deps, job_id, spec, runtime, workflow)
        self.deps.queue.enqueue_job(job_id)
        if workflow is not None:
            self.deps.queue.enqueue_update(job_id)
        return job

    def load(self, job_id: str) -> CachedJob:
        """Read one job from storage, not yet cached: config versions its tasks and workflow
        use, runtime, tasks, workflow (NotFound, DataCorruption)."""
        store = self.deps.store
        runtime = store.get_job_runtime(job_id)
        spec = store.get_job_config(job_id, runtime.config_version)
        tasks = store.get_task_runtimes(job_id)
        update = None
        if runtime.update_id:
            try:
                update = store.get_update(runtime.update_id)
            except NotFound:
                log.warning("job %s: workflow %s is gone", job_id, runtime.update_id)
        versions = {rt.config_version for rt in tasks.values()} | \
            {rt.desired_config_version for rt in tasks.values()}
        if update is not None:
            versions |= {update.config_version, update.prev_config_version}
        specs = {}
        for version in sorted(versions - {spec.version, 0}):
            try:
                specs[version] = store.get_job_config(job_id, version)
            except NotFound:
                log.warning("job %s: config version %d of a task is gone", job_id, version)
        return CachedJob(self.deps, job_id, spec, runtime, tasks=tasks, specs=specs,
                         update=update)

    def add(self, job: CachedJob) -> CachedJob:
        """Cache a loaded job (replacing any previous entry); recovery's way in."""
        self._jobs[job.job_id] = job
        return job

    def track(self, job_id: str) -> CachedJob:
        """The cached job, loading it (and marking it active again) if it is not cached."""
        job = self._jobs.get(job_id)
        if job is not None:
            return job
        with self._loading:
            job = self._jobs.get(job_id)
            if job is None:
                job = self._retired.pop(job_id, None)
                if job is None:
                    job = self.load(job_id)
                else:
                    job.retire(None)  # back in now, not on its next write
                self._jobs[job_id] = job
                job.activate()
        # Evaluated once: a job tracked by a call that then changed nothing (refused, say)
        # is untracked again instead of staying cached and active.
        self.deps.queue.enqueue_job(job_id)
        return job

    def untrack(self, job: CachedJob) -> None:
        """A finished job leaves the active set and the cache (it stays in storage).

        A holder of the object that writes to it later brings it back (CachedJob.retire)."""
        with self._loading:
            if self._jobs.get(job.job_id) is not job:
                return
            del self._jobs[job.job_id]
            self._retired[job.job_id] = job
            job.retire(self._take_back)
            # Under the lock: a write taking the job back waits, so its activate and
            # enqueue come after this deactivate and forget, never before.
            job.deactivate()
            self.deps.queue.forget_job(job.job_id, job.instances())
            self.deps.task_configs.forget_job(job.job_id)

    def _take_back(self, job: CachedJob) -> None:
        """A retired job is written to again: cached, active and evaluated once more."""
        with self._loading:
            current = self._jobs.get(job.job_id)
            if current is job:
                return
            if current is not None:  # cannot happen while every load goes through track
                log.error("job %s: two cached objects; keeping the newer", job.job_id)
                return
            self._retired.pop(job.job_id, None)
            self._jobs[job.job_id] = job
            job.activate()
        log.info("job %s: written to after it was untracked; tracked again", job.job_id)
        self.deps.queue.enqueue_job(job.job_id)

    def forget(self, job_id: str) -> None:
        """Drop a job from the cache only, for good (the next `track` reads it again)."""
        with self._loading:
            job = self._jobs.pop(job_id, None) or self._retired.pop(job_id, None)
            self.deps.task_configs.forget_job(job_id)
            if job is not None:
                job.retire(None)  # a later write through it does not bring it back

    def delete(self, job_id: str) -> None:
        """Remove every trace of a job (untracking it first if it is cached)."""
        job = self._jobs.get(job_id)
        if job is not None:
            self.untrack(job)
        self.forget(job_id)
        delete_job(self.deps.store, job_id)

    def drop_active(self, job_id: str) -> None:
        """Remove an id from the active set without loading it (it has no runtime)."""
        drop_active(self.deps.store, job_id)

    def delete_history(self, job_id: str, instance: int, from_run: int, to_run: int) -> None:
        """Delete the history of runs [from_run, to_run) of an instance."""
        delete_history(self.deps.store, job_id, instance, from_run, to_run)
