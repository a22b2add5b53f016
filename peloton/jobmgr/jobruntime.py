"""Job runtime: derive the job's state from its tasks and persist it when it changes.

Peloton derives job state from task counts rather than tracking it by
events; the counts are kept incrementally by the cache, so a refresh is
cheap and can run after every batch of task changes.  `RuntimeUpdater`
debounces refreshes: a job whose tasks changed is refreshed within
`runtime_update_interval`, once, however many events arrived meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging

import gevent
import gevent.event

from peloton.core.errors import Conflict
from peloton.core.lifecycle.job_state import derive_job_state
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.sla import start_within_limit

log = logging.getLogger(__name__)


def refresh_runtime(ctx: JobContext, job: CachedJob) -> bool:
    """Recompute and, if it changed, store the job runtime; True if it is now terminal."""
    with job.lock:
        for _ in range(3):
            rt = job.runtime
            counts = job.state_counts()
            controller = None
            if job.spec.default_task.controller or (0 in job.spec.instance_tasks and \
                    job.spec.instance_tasks[0].controller):
                t0 = job.get_task(0)
                controller = t0.state if t0 is not None else None
            # A daemon job's size is its number of instances (ids may have holes).
            daemon = job.spec.type is JobType.DAEMON
            size = len(job) if daemon else job.spec.instance_count
            state = derive_job_state(
                counts, instance_count=size, job_type=job.spec.type,
                current=rt.state, goal=rt.goal_state,
                partially_created=not daemon and len(job) < job.spec.instance_count,
                controller_state=controller)
            if rt.state is JobState.KILLING and not state.terminal:
                state = JobState.KILLING
            now = ctx.clock()
            stats = {s: n for s, n in counts.items()}
            start = rt.start_time or (now if counts.get(TaskState.RUNNING) or (state.terminal
                                      and counts.get(TaskState.SUCCEEDED)) else 0.0)
            completion = now if state.terminal and not rt.state.terminal else rt.completion_time
            if not state.terminal:
                completion = 0.0
            if state is rt.state and dict(rt.task_stats) == stats and start == rt.start_time \
                    and completion == rt.completion_time:
                return state.terminal
            new = dataclasses.replace(rt, state=state, task_stats=stats, start_time=start,
                                      completion_time=completion, update_time=now)
            try:
                job.runtime = ctx.store.update_job_runtime(job.job_id, new)
                return state.terminal
            except Conflict:
                job.runtime = ctx.store.get_job_runtime(job.job_id)
        log.warning("job %s: runtime kept losing its compare-and-set", job.job_id)
        return job.runtime.state.terminal


class RuntimeUpdater:
    """Refreshes the runtime of jobs whose tasks changed, at most once per interval."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self._dirty: set[str] = set()
        self._greenlet: gevent.Greenlet | None = None
        self._wake = gevent.event.Event()

    def mark(self, job_id: str) -> None:
        """A task of `job_id` changed."""
        self._dirty.add(job_id)
        self._wake.set()

    def start(self) -> None:
        """Begin refreshing in a greenlet."""
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop refreshing (pending refreshes are dropped; recovery redoes them)."""
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None

    def flush(self) -> None:
        """Refresh every dirty job now (also used by tests)."""
        dirty, self._dirty = self._dirty, set()
        for job_id in dirty:
            job = self.ctx.cache.get(job_id)
            if job is None:
                continue
            try:
                start_within_limit(self.ctx, job)
                if refresh_runtime(self.ctx, job):
                    self.ctx.enqueue_job(job_id)
            except Exception:
                log.exception("job %s: runtime refresh failed", job_id)
                self._dirty.add(job_id)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            gevent.sleep(self.ctx.config.runtime_update_interval)
            self.flush()

