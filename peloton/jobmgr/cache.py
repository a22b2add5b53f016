"""The set of cached jobs: which active jobs the job manager holds, and loading them.

A job is cached from its creation (or from recovery, or from the first call that
touches a finished job again: `track`) until it finishes and is untracked.  Every
change to a cached job, and every store write about jobs, is in aggregate.py; this
module only finds, loads and forgets jobs and asks the aggregate for the rest.

While recovery runs in the background (recovery.py), the active jobs it has not loaded
yet are *deferred*: a lookup of one (`get`, `track`, `delete`) first has recovery load it
and hand its runs back, in the caller, exactly once whoever asks first (a per-job lock;
the others wait for it), so a call, a status event or a placement never finds an active
job missing.  Iterating the cache and `len` see loaded jobs only: what the loops and the
goal-state engines act on (a job is enqueued when loaded).
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections.abc import Callable, Iterable, Iterator

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
#: Recovery of one deferred job: `load(job_id, add)` reads it, caches it with `add` (False:
#: forgotten meanwhile, drop it) and hands its runs back; lookups wait until it returns.
Loader = Callable[[str, Callable[[CachedJob], bool]], None]


class _Once:
    """One deferred job's load: the first lookup runs it, the others wait for it."""

    __slots__ = ("lock", "requeued", "started")

    def __init__(self) -> None:
        # Re-entrant: the loading greenlet may look the job up itself while handing back.
        self.lock = gevent.lock.RLock()
        self.started = False
        #: The load has queued the job's runs again (`JobCache.requeued`).
        self.requeued = False


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
        # Active jobs recovery has not loaded yet, and how it loads one (module docstring).
        self._deferred: dict[str, _Once] = {}
        self._loader: Loader | None = None

    @property
    def listeners(self) -> Listeners:
        """Told of changes to every cached job (the watch API subscribes here)."""
        return self.deps.listeners

    def get(self, job_id: str) -> CachedJob | None:
        """The cached job, or None if it is not active (a deferred job is loaded first)."""
        if job_id in self._deferred:
            self.ensure(job_id)
        return self._jobs.get(job_id)

    def defer(self, job_ids: Iterable[str], loader: Loader) -> list[str]:
        """Note active jobs recovery will load (neither cached nor deferred yet): until it
        has, a lookup of one has `loader` load it first.  Returns the ids deferred."""
        self._loader = loader
        deferred = [j for j in job_ids if j not in self._jobs and j not in self._deferred]
        for job_id in deferred:
            self._deferred[job_id] = _Once()
        return deferred

    def requeued(self, job_id: str) -> None:
        """The load of deferred `job_id` has had the resource manager forget the job's
        queued runs (placements taken included) and is about to queue them again."""
        once = self._deferred.get(job_id)
        if once is not None:
            once.requeued = True

    def placement_is_void(self, job_id: str) -> bool:
        """A placement of `job_id` in hand now was taken before the job's recovery had the
        resource manager forget its queued runs, which it will queue again: the job is
        deferred and not re-queued yet (a placement of a run queued afresh needs that
        queueing, which follows the mark).  Once re-queued, a placement is launched
        even while the load still runs: the run's fresh placement comes back fast, and
        voiding it left the run PENDING until the resource manager's launch timeout.
        (One taken just before the re-queue and seen after it is launched too: the run
        starts once, and the resource manager's fresh entry for it follows its status.)"""
        once = self._deferred.get(job_id)
        return once is not None and not once.requeued

    @property
    def deferred(self) -> list[str]:
        """Ids of the active jobs not loaded yet (recovery still running)."""
        return list(self._deferred)

    def is_deferred(self, job_id: str) -> bool:
        """`job_id` is active but not loaded yet (or its load is under way)."""
        return job_id in self._deferred

    def next_deferred(self, count: int) -> list[str]:
        """Up to `count` of the deferred ids, oldest first (what recovery loads next)."""
        return list(itertools.islice(self._deferred, count))

    def ensure(self, job_id: str, loader: Loader | None = None) -> None:
        """Load `job_id` if it is deferred (by `loader`, default the deferring one), once:
        a caller that finds the load under way waits for it.  A load that raises before
        it cached the job (storage unavailable) leaves it deferred, for the next lookup."""
        once = self._deferred.get(job_id)
        if once is None:
            return
        with once.lock:
            if once.started or self._deferred.get(job_id) is not once:
                return  # loaded while we waited (or forgotten), or our own lookup within
            load = loader or self._loader
            assert load is not None, "a deferred job without a loader"
            once.started = True

            def add(job: CachedJob) -> bool:
                # Not if it was forgotten while it loaded (its partition moved away).
                if self._deferred.get(job_id) is not once:
                    return False
                self._jobs[job_id] = job
                return True

            try:
                load(job_id, add)
            except BaseException:
                if job_id not in self._jobs:  # not cached: the next lookup tries again,
                    once.started = False      # and recovery after the others
                    if self._deferred.get(job_id) is once:
                        self._deferred[job_id] = self._deferred.pop(job_id)
                raise
            finally:
                if once.started and self._deferred.get(job_id) is once:
                    del self._deferred[job_id]

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

    def track(self, job_id: str) -> CachedJob:
        """The cached job, loading it (and marking it active again) if it is not cached."""
        job = self.get(job_id)
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
            self._deferred.pop(job_id, None)  # a load under way is not cached either
            job = self._jobs.pop(job_id, None) or self._retired.pop(job_id, None)
            self.deps.task_configs.forget_job(job_id)
            if job is not None:
                job.retire(None)  # a later write through it does not bring it back

    def delete(self, job_id: str) -> None:
        """Remove every trace of a job (untracking it first if it is cached)."""
        job = self.get(job_id)
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
