"""DAEMON jobs: exactly one instance on every eligible host, following hosts as they come and go.

Each instance is pinned to one host (`desired_host`, placed only there).
A host is eligible when it is UP and connected and its labels satisfy the
job's host constraint.  When a host becomes eligible the job gains an
instance pinned to it (a new config version with a larger instance count;
ids are the smallest free ones, so a departed host's id is reused); when a
host stops being eligible its instance is stopped and deleted.  Instance
ids may therefore have holes: a daemon job's size is the number of its
instances, not the largest id.
"""

from __future__ import annotations

import dataclasses
import logging

from peloton.common.loop import Loop
from peloton.core.model.constraints import LabelKind, Verdict, evaluate
from peloton.core.model.task import TaskSpec
from peloton.core.ports import HostManagerPort, HostSummary
from peloton.core.states import HostState, JobState, JobType, TaskState
from peloton.jobmgr import runs
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.runcontrol import RunControl

log = logging.getLogger(__name__)
S = TaskState


def eligible(spec: TaskSpec, host: HostSummary) -> bool:
    """Can a daemon instance of this spec run on this host?"""
    if not host.connected or host.info.state is not HostState.UP:
        return False
    if not spec.resources.fits_in(host.capacity):
        return False
    if spec.constraint is None:
        return True
    labels = host.info.labels
    verdict = evaluate(spec.constraint, LabelKind.HOST,
                       lambda label: sum(1 for lb in labels if lb == label))
    return verdict is not Verdict.MISMATCH


def pinned_hosts(job: CachedJob) -> dict[str, int]:
    """Host -> instance for the daemon job's live instances."""
    return {rt.desired_host: i for i, rt in job.tasks()
            if rt.desired_host and rt.goal_state not in (S.DELETED, S.KILLED)}


def reconcile_job(control: RunControl, job: CachedJob,
                  hosts: list[HostSummary]) -> tuple[int, int]:
    """Add instances for new eligible hosts and delete those of departed ones; (added, removed)."""
    if job.spec.type is not JobType.DAEMON or job.runtime.goal_state is not JobState.RUNNING:
        return 0, 0
    with job.lock:
        spec = job.spec
        wanted = {h.info.hostname for h in hosts if eligible(spec.default_task, h)}
        pinned = pinned_hosts(job)
        gone = [i for host, i in pinned.items() if host not in wanted]
        new_hosts = sorted(wanted - set(pinned))
        if gone:
            control.set_goal(job, gone, S.DELETED)
        if not new_hosts:
            return 0, len(gone)
        used = {i for i, _ in job.tasks()} - set(gone)
        free = (i for i in range(len(used) + len(new_hosts) + len(gone) + 1) if i not in used)
        ids = [next(free) for _ in new_hosts]
        _add(control, job, dict(zip(ids, new_hosts, strict=True)))
    log.info("daemon job %s: %d instances added, %d removed", job.job_id, len(new_hosts),
             len(gone))
    return len(new_hosts), len(gone)


def _add(control: RunControl, job: CachedJob, placement: dict[int, str]) -> None:
    old = job.spec
    new = job.new_config(dataclasses.replace(
        old, instance_count=max(old.instance_count, max(placement) + 1)))
    job.change_runtime(lambda rt: rt, spec=new)  # the job moves to the bigger config
    # A deleted instance's runtime not yet gone: forget it first.
    job.delete_tasks([i for i in placement if job.get_task(i) is not None])
    now = control.clock.wall()
    health = new.default_task.health_checked
    job.create_tasks({i: dataclasses.replace(runs.initial(S.RUNNING, new.version, now,
                                                          health_check=health),
                                             desired_host=host)
                      for i, host in placement.items()})
    control.enqueue(job, list(placement))


class DaemonController:
    """Keeps every DAEMON job matched to the cluster's hosts."""

    def __init__(self, cache: JobCache, hostmgr: HostManagerPort, control: RunControl,
                 interval: float = 2.0) -> None:
        self.cache = cache
        self.hostmgr = hostmgr
        self.control = control
        self.interval = interval
        self._loop = Loop("daemon-jobs", self.reconcile_once, interval=interval, log=log)

    def start(self) -> None:
        """Begin reconciling in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop reconciling."""
        self._loop.stop()

    def reconcile_once(self) -> tuple[int, int]:
        """One pass over every daemon job; (instances added, instances removed)."""
        jobs = [j for j in self.cache if j.spec.type is JobType.DAEMON]
        if not jobs:
            return 0, 0
        hosts = self.hostmgr.host_summaries()
        added = removed = 0
        for job in jobs:
            a, r = reconcile_job(self.control, job, hosts)
            added, removed = added + a, removed + r
        return added, removed
