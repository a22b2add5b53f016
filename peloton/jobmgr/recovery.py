"""Recovery: loading the active jobs on start and handing their runs to the other daemons.

Recovery reads the active-job set, loads each job (config versions, runtime,
tasks, workflow: `JobCache.load`), and rebuilds the rest of the cluster's view
from it: runs already placed or running are handed to the resource manager
with their allocation (`recover_task`), queued runs are queued again, and the
host manager is asked to re-report every run we believe is alive, so a launch
lost in the crash comes back LOST and is retried.  A job whose stored data is
corrupt is skipped with an error naming it; it never stops the daemon.
`hand_back` does the same for a resource or host manager that started over.

With all-active job managers only the jobs this one owns are loaded (`owns`,
ownership.py), and a partition taken over later is recovered on its own
(`recover(only=...)`), the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from peloton.core.errors import DataCorruption, NotFound
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.sched import LaunchSpec
from peloton.core.ports import HostManagerPort, RecoveredRun, ResourceManagerPort
from peloton.core.states import TaskState
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.runcontrol import RunControl
from peloton.jobmgr.sched import rm_task

log = logging.getLogger(__name__)
S = TaskState
#: Runs per RecoverTasks call: a restart hands back every run, one call per task cost a
#: millisecond each over gRPC (a minute for 50,000 runs).
RECOVER_CHUNK = 1000
_HELD = frozenset({S.LAUNCHED, S.STARTING, S.RUNNING, S.KILLING, S.PREEMPTING})
_QUEUED = frozenset({S.INITIALIZED, S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING,
                     S.RESERVED})


class Recovery:
    """Rebuilds the cache from storage and the other daemons' view from the cache."""

    def __init__(self, cache: JobCache, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 control: RunControl, queue: GoalStateQueue,
                 owns: Callable[[str], bool] = lambda _job_id: True) -> None:
        self.cache = cache
        self.owns = owns
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.control = control
        self.queue = queue

    def recover(self, only: Callable[[str], bool] | None = None) -> int:
        """Load every active job this job manager owns (and `only` accepts: one partition
        taken over) and hand its runs back to the other daemons; returns jobs loaded."""
        handed = _HandBack(self, to_resmgr=True)
        loaded = 0
        for job_id in self.cache.active_ids():
            if not self.owns(job_id) or (only is not None and not only(job_id)):
                continue  # another member's, or already cached
            try:
                job = self.cache.add(self.cache.load(job_id))
            except NotFound:
                log.warning("active job %s has no runtime; dropping it from the active set",
                            job_id)
                self.cache.drop_active(job_id)
                continue
            except DataCorruption as exc:
                log.error("cannot recover job %s: %s", job_id, exc)
                continue
            loaded += 1
            queued = handed.job(job)
            for inst, rt in job.tasks():
                if rt.state in _HELD:
                    if rt.state is not S.RUNNING or rt.run_id != rt.desired_run_id:
                        self.queue.enqueue_task(job_id, inst)
                elif rt.state not in _QUEUED and rt.goal_state is not rt.state:
                    self.queue.enqueue_task(job_id, inst)
            if queued:
                startable = _startable(job, queued)
                # A previous leader may have taken placements of these runs and stopped
                # before launching them; the resource manager would hold them until its
                # launch timeout.  Forgetting them there first queues them afresh (a no-op
                # for a fresh one).
                self.resmgr.kill_tasks([TaskId(job_id, i) for i in startable])
                self.control.enqueue(job, startable)
            self.queue.enqueue_job(job_id)
        handed.to_hosts()
        log.info("recovered %d active jobs (%d runs on hosts)", loaded, len(handed.alive))
        return loaded

    def hand_back(self, *, to_resmgr: bool, to_hostmgr: bool) -> int:
        """Hand the cached jobs' runs to a resource or host manager that started over (a new
        leader term has empty state); returns the runs on hosts.  Idempotent on the other
        side."""
        handed = _HandBack(self, to_resmgr=to_resmgr)
        for job in list(self.cache):  # a snapshot: jobs come and go while this yields
            queued = handed.job(job)
            if to_resmgr and queued:
                self.control.enqueue(job, _startable(job, queued))
        if to_hostmgr:
            handed.to_hosts()
        log.info("handed back %d jobs (%d runs on hosts) to the %s", len(self.cache),
                 len(handed.alive), " and ".join(
                     n for n, on in (("resource manager", to_resmgr),
                                     ("host manager", to_hostmgr)) if on))
        return len(handed.alive)


def _startable(job: CachedJob, queued: list[int]) -> list[int]:
    """The queued instances to queue again now."""
    if job.spec.sla.maximum_running_instances > 0:
        # Waiting instances of a limited job start as room frees up, not all at once.
        return [i for i in queued if job.task(i).state is not S.INITIALIZED]
    return queued


class _HandBack:
    """Collects what the other daemons must be told about the runs of cached jobs.

    Runs on hosts are recovered in the resource manager (with their allocation) as they
    are seen, and gathered per host for the host manager (`adopt`, then `reconcile`, so a
    launch lost in a crash comes back LOST and is retried).  Queued runs are returned per
    job for the caller to queue again.
    """

    def __init__(self, recovery: Recovery, *, to_resmgr: bool) -> None:
        self.recovery = recovery
        self.to_resmgr = to_resmgr
        self.alive: list[str] = []
        self.adopted: dict[str, list[LaunchSpec]] = {}

    def job(self, job: CachedJob) -> list[int]:
        """Note one job's runs; returns its queued instances."""
        resmgr, needs, job_id = self.recovery.resmgr, self.recovery.control.needs, job.job_id
        queued: list[int] = []
        held: list[RecoveredRun] = []
        for inst, rt in list(job.tasks()):
            if rt.state in _HELD:
                spec = job.specs.get(rt.config_version) or job.spec
                if self.to_resmgr:
                    held.append(RecoveredRun(spec.respool_id,
                                             rm_task(job_id, spec, inst, rt, needs),
                                             rt.state, rt.host))
                run_id = str(RunId(job_id, inst, rt.run_id))
                self.alive.append(run_id)
                if rt.host:
                    self.adopted.setdefault(rt.host, []).append(
                        LaunchSpec(run_id=run_id, spec=spec.task_spec(inst), ports=rt.ports,
                                   pool=spec.respool_id))
            elif rt.state in _QUEUED:
                queued.append(inst)
        # The job's held runs are back in the resource manager before its queued ones (or
        # any later job's) are queued again, so admission never counts their room as free.
        for start in range(0, len(held), RECOVER_CHUNK):
            resmgr.recover_tasks(held[start:start + RECOVER_CHUNK])
        return queued

    def to_hosts(self) -> None:
        """Tell the host manager where the runs are, and have it re-report them."""
        hostmgr = self.recovery.hostmgr
        for host, specs in self.adopted.items():
            hostmgr.adopt(host, specs)
        if self.alive:
            hostmgr.reconcile(self.alive)
