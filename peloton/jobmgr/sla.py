"""Job SLA enforcement: at most N instances running at once, and a run-time deadline.

* `maximumRunningInstances` (batch jobs): only that many instances are queued or running at
  a time; the rest wait INITIALIZED and are started as earlier ones finish (the job
  goal-state's EVALUATE_SLA action calls `start_within_limit` on every evaluation, and a
  job is evaluated after every batch of task changes).
* `maxRunningTime`: a task RUNNING longer than that many seconds is killed with the
  reason DEADLINE_TIMEOUT_EXCEEDED (Peloton's deadline tracker, here checked every few
  seconds instead of every 30 minutes).
"""

from __future__ import annotations

import logging

from peloton.common.clock import Clock
from peloton.common.loop import Loop
from peloton.core.model.task import TerminationReason
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.runcontrol import RunControl

log = logging.getLogger(__name__)
S = TaskState
#: States of a task that count against maximumRunningInstances.
ACTIVE = frozenset({S.PENDING, S.READY, S.PLACING, S.PLACED, S.LAUNCHING, S.LAUNCHED,
                    S.STARTING, S.RUNNING, S.KILLING, S.PREEMPTING})


def limit_of(job: CachedJob) -> int:
    """The job's cap on instances in flight (0: none)."""
    return job.spec.sla.maximum_running_instances if job.spec.type is JobType.BATCH else 0


def start_within_limit(control: RunControl, job: CachedJob) -> list[int]:
    """Queue waiting (INITIALIZED) instances up to the job's limit; returns those queued."""
    cap = limit_of(job)
    if cap <= 0 or job.runtime.goal_state is JobState.KILLED:
        return []
    active = sum(n for state, n in job.counts.items() if state in ACTIVE)
    room = cap - active
    if room <= 0:
        return []
    waiting = [i for i, rt in job.tasks() if rt.state is S.INITIALIZED
               and rt.goal_state is S.SUCCEEDED][:room]
    return control.enqueue(job, waiting) if waiting else []


def overdue(job: CachedJob, now: float) -> list[int]:
    """Instances running past the job's maxRunningTime (`now`: wall seconds)."""
    limit = job.spec.sla.max_running_time_secs
    if limit <= 0:
        return []
    return [i for i, rt in job.tasks() if rt.state is S.RUNNING and rt.start_time
            and now - rt.start_time > limit and rt.goal_state not in (S.KILLED, S.DELETED)]


class DeadlineTracker:
    """Kills tasks that run past their job's maxRunningTime."""

    def __init__(self, cache: JobCache, control: RunControl, clock: Clock,
                 interval: float = 2.0) -> None:
        self.cache = cache
        self.control = control
        self.clock = clock
        self.interval = interval
        self._loop = Loop("deadlines", self.check_once, interval=interval, log=log)

    def start(self) -> None:
        """Begin checking in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop checking."""
        self._loop.stop()

    def check_once(self) -> int:
        """One pass over the cached jobs; returns how many tasks were stopped."""
        now = self.clock.wall()
        stopped = 0
        for job in self.cache:
            late = overdue(job, now)
            if late:
                log.info("job %s: instances %s exceeded maxRunningTime %ss", job.job_id, late,
                         job.spec.sla.max_running_time_secs)
                self.control.set_goal(job, late, S.KILLED,
                                      reason=TerminationReason.DEADLINE_TIMEOUT_EXCEEDED)
                stopped += len(late)
        return stopped
