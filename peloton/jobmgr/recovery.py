"""Loading jobs into the cache: on start (recovery) and when a finished job is touched again.

Recovery reads the active-job set, loads each job's config, runtime,
tasks and workflow, and rebuilds the rest of the cluster's view from it:
runs already placed or running are handed to the resource manager with
their allocation (`recover_task`), queued runs are queued again, and the
host manager is asked to re-report every run we believe is alive, so a
launch lost in the crash comes back LOST and is retried.  A job whose
stored data is corrupt is skipped with an error naming it; it never stops
the daemon.
"""

from __future__ import annotations

import logging

from peloton.core.errors import DataCorruption, NotFound
from peloton.core.model.ids import RunId
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import TaskState
from peloton.jobmgr import taskops
from peloton.jobmgr.cache import CachedJob
from peloton.jobmgr.context import JobContext
from peloton.jobmgr.sched import rm_task

log = logging.getLogger(__name__)
S = TaskState
_HELD = frozenset({S.LAUNCHED, S.STARTING, S.RUNNING, S.KILLING, S.PREEMPTING})
_QUEUED = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING,
                     S.RESERVED})


def load_job(ctx: JobContext, job_id: str) -> CachedJob:
    """Read one job (config versions its tasks use, runtime, tasks, active workflow)."""
    runtime = ctx.store.get_job_runtime(job_id)
    spec = ctx.store.get_job_config(job_id, runtime.config_version)
    job = CachedJob(job_id, spec, runtime)
    for inst, rt in ctx.store.get_task_runtimes(job_id).items():
        job.set_task(inst, rt)
    versions = {rt.config_version for _, rt in job.tasks()} | \
        {rt.desired_config_version for _, rt in job.tasks()}
    for version in versions - {spec.version, 0}:
        try:
            job.specs[version] = ctx.store.get_job_config(job_id, version)
        except NotFound:
            log.warning("job %s: config version %d of a task is gone", job_id, version)
    if runtime.update_id:
        try:
            update = ctx.store.get_update(runtime.update_id)
            job.update = update
            for version in (update.config_version, update.prev_config_version):
                if version and version not in job.specs:
                    job.specs[version] = ctx.store.get_job_config(job_id, version)
        except NotFound:
            log.warning("job %s: workflow %s is gone", job_id, runtime.update_id)
    return job


def track(ctx: JobContext, job_id: str) -> CachedJob:
    """The cached job, loading it (and marking it active again) if it is not cached."""
    job = ctx.cache.get(job_id)
    if job is not None:
        return job
    job = ctx.cache.add(load_job(ctx, job_id))
    ctx.store.add_active_job(job_id)
    return job


def recover(ctx: JobContext) -> int:
    """Load every active job and hand its runs back to the other daemons; returns jobs loaded."""
    alive: list[str] = []
    adopted: dict[str, list[LaunchSpec]] = {}
    loaded = 0
    for job_id in ctx.store.get_active_jobs():
        try:
            job = ctx.cache.add(load_job(ctx, job_id))
        except NotFound:
            log.warning("active job %s has no runtime; dropping it from the active set", job_id)
            ctx.store.delete_active_job(job_id)
            continue
        except DataCorruption as exc:
            log.error("cannot recover job %s: %s", job_id, exc)
            continue
        loaded += 1
        queued = []
        for inst, rt in job.tasks():
            if rt.state in _HELD:
                spec = job.spec_version(rt.config_version) or job.spec
                ctx.resmgr.recover_task(spec.respool_id,
                                        rm_task(job_id, spec, inst, rt, ctx.needs),
                                        rt.state, rt.host)
                run_id = str(RunId(job_id, inst, rt.run_id))
                alive.append(run_id)
                if rt.host:
                    adopted.setdefault(rt.host, []).append(
                        LaunchSpec(run_id=run_id, spec=spec.task_spec(inst), ports=rt.ports))
                if rt.state is not S.RUNNING or rt.run_id != rt.desired_run_id:
                    ctx.enqueue_task(job_id, inst)
            elif rt.state in _QUEUED:
                queued.append(inst)
            elif rt.goal_state is not rt.state:
                ctx.enqueue_task(job_id, inst)
        if queued:
            if job.spec.sla.maximum_running_instances > 0:
                # Waiting instances of a limited job start as room frees up, not all at once.
                queued = [i for i in queued if job.task(i).state is not S.INITIALIZED]
            taskops.enqueue(ctx, job, queued)
        ctx.enqueue_job(job_id)
        ctx.on_tasks_changed(job_id)
    for host, specs in adopted.items():
        ctx.hostmgr.adopt(host, specs)
    if alive:
        ctx.hostmgr.reconcile(alive)
    log.info("recovered %d active jobs (%d runs on hosts)", loaded, len(alive))
    return loaded
