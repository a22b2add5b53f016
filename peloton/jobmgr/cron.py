"""The cron scheduler: starts the runs of cron jobs when due (a job manager component).

It runs in the leading job manager (it is one of the job manager's
components, started on leadership after recovery and stopped on its loss) or,
with all-active job managers, in every member, each advancing only the cron jobs
of the partitions it holds (`Ownership.owns_schedule`: a cron job belongs to its
name's partition, and its runs' ids are drawn in that partition, so the owner
creates and stops them as its own jobs).  It changes jobs only through the
operations the API uses, given as callables by the composition root
(`CronJobActions`): create a job, stop a job, read a job's runtime.

Each tick reads every cron job from the store and advances the ones it owns one
step (`advance`); every step is a compare-and-set on the cron job's row, written
under the cron job's partition fence when members run it, so a second job
manager that still believes it leads or owns the partition (its claim superseded
by a new owner's), or an API call changing the job at the same moment, can never
make a due time run twice.  The new owner of a partition reads the schedule's
bookkeeping from the store, so a due time its previous owner claimed is never
claimed again; one that fell due while the partition was between owners is run
once by the new owner, as after a leader change (the latest such due time only,
if the new owner was watching by then, give or take `grace_ms`):

1. a claimed run (`pending`) is finished first: if it must kill the previous
   run (KILL_EXISTING), that run is stopped and the claim waits until the
   run has no active task; then the run's job is created with the claim's
   deterministic id (creating it twice is AlreadyExists, so a new leader
   that finds the claim just finishes it), and the claim is cleared;
2. otherwise the due time to run now is computed by
   peloton/core/cron/trigger.py (once per due time, no catch-up of runs
   missed while no leader watched except within `grace_ms`), and claimed
   with what the collision policy says (start, kill first, or skip: a
   skipped due time is claimed too, so it is not retried).

`start_now` (Aurora's startCronJob) claims a run outside the schedule and
advances it at once.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from peloton.common.loop import Loop
from peloton.core.cron.model import CronJob, PendingRun, run_job_id, schedule_partition
from peloton.core.cron.schedule import parse
from peloton.core.cron.trigger import DEFAULT_GRACE_MS, Collision, collision, due_run
from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.jobmgr.ownership import Ownership
from peloton.storage.cron_store import CronJobStore
from peloton.storage.leader_store import FencedOut
from peloton.storage.partition_fences import PartitionNotHeld

log = logging.getLogger(__name__)


class CronJobActions(Protocol):
    """What a cron run does to jobs, through the operations the API uses."""

    def create(self, spec: JobSpec, job_id: str) -> object:
        """Create a job with id `job_id`; AlreadyExists when it exists."""
        ...

    def stop(self, job_id: str) -> None:
        """Kill every task of a job (idempotent)."""
        ...

    def runtime(self, job_id: str) -> JobRuntime:
        """A job's runtime; NotFound when there is no such job."""
        ...


@dataclass(frozen=True, slots=True)
class FunctionActions:
    """CronJobActions made of three callables (how the composition root wires them)."""

    create: Callable[[JobSpec, str], object]
    stop: Callable[[str], None]
    runtime: Callable[[str], JobRuntime]


class CronScheduler:
    """Starts cron runs when due; `start()` / `stop()` like every component."""

    name = "cron"

    def __init__(self, store: CronJobStore, actions: CronJobActions, now_ms: Callable[[], int], *,
                 interval_s: float = 1.0, grace_ms: int = DEFAULT_GRACE_MS,
                 ownership: Ownership | None = None) -> None:
        self.store = store
        self.actions = actions
        self.now_ms = now_ms
        self.grace_ms = grace_ms
        #: Which cron jobs this scheduler advances (default: every one, a lone job manager).
        self.ownership = ownership or Ownership()
        #: When this scheduler began watching (the lower bound of runs it may still start).
        self.watching_since_ms = now_ms()
        self._loop = Loop("cron", self.tick, interval=interval_s, log=log)

    def start(self) -> None:
        """Begin watching cron jobs (on gaining leadership)."""
        self.watching_since_ms = self.now_ms()
        self._loop.start()

    def stop(self) -> None:
        """Stop watching (on losing leadership); claims left pending are finished by the next leader."""
        self._loop.stop()

    def tick(self) -> None:
        """Advance every cron job this job manager owns once."""
        for job in self.store.get_cron_jobs():
            # Asked per job: a partition released during the tick is left at once.
            if not self.ownership.owns_schedule(job.name):
                continue
            try:
                self.advance(job)
            except Conflict:
                log.info("cron job %s changed while advancing it; next tick", job.name)
            except (FencedOut, PartitionNotHeld) as exc:
                log.info("cron job %s moved to another member while advancing it: %s",
                         job.name, exc)
            except Exception:
                log.exception("cron job %s could not be advanced", job.name)

    def active(self, job_id: str) -> bool:
        """Whether a run's job still has work going (unknown jobs have none)."""
        if not job_id:
            return False
        try:
            return not self.actions.runtime(job_id).state.terminal
        except NotFound:
            return False

    def advance(self, job: CronJob) -> CronJob:
        """One step of `job` (see the module docstring); returns it as stored afterwards."""
        if job.pending is not None:
            return self._finish(job, job.pending)
        due = due_run(parse(job.schedule), job.last_due_ms, self.watching_since_ms, self.now_ms(),
                      self.grace_ms)
        if due is None:
            return job
        claimed = self._claim(job, str(due), due)
        return self._finish(claimed, claimed.pending) if claimed.pending is not None else claimed

    def start_now(self, name: str) -> str:
        """Start a run of `name` outside its schedule (Aurora's startCronJob); returns the run's
        job id, or "" when the collision policy skips it.  NotFound for an unknown cron job;
        PartitionNotHeld (retryable) when another member owns it (the call belongs there)."""
        job = self.store.get_cron_job(name)
        if not self.ownership.owns_schedule(name):
            raise PartitionNotHeld(f"cron job {name} is in partition "
                                   f"{schedule_partition(name, self.ownership.count)}, which "
                                   "another member holds")
        if job.pending is not None:
            log.info("cron job %s: a run is already starting (%s)", name, job.pending.job_id)
            return job.pending.job_id
        claimed = self._claim(job, f"manual-{uuid.uuid4()}", 0)
        if claimed.pending is None:
            return ""
        run = claimed.pending.job_id
        self._finish(claimed, claimed.pending)
        return run

    def _claim(self, job: CronJob, tag: str, due_ms: int) -> CronJob:
        """Claim a run (due time `due_ms`, 0 for a manual start) as the collision policy says."""
        previous_active = self.active(job.last_run_job_id)
        decision = collision(job.policy, previous_active)
        last_due = max(job.last_due_ms, due_ms)
        if decision is Collision.SKIP:
            log.info("cron job %s: run %s skipped, %s still active (CANCEL_NEW)", job.name, tag,
                     job.last_run_job_id)
            return self.store.update_cron_job(dataclasses.replace(job, last_due_ms=last_due))
        kill = job.last_run_job_id if decision is Collision.KILL_FIRST else ""
        pending = PendingRun(run_job_id(job.name, tag, self.ownership.count), due_ms,
                             kill_job_id=kill)
        log.info("cron job %s: run %s claimed as job %s%s", job.name, tag, pending.job_id,
                 f", killing {kill} first" if kill else "")
        return self.store.update_cron_job(dataclasses.replace(job, last_due_ms=last_due, pending=pending))

    def _finish(self, job: CronJob, pending: PendingRun) -> CronJob:
        if pending.kill_job_id and self.active(pending.kill_job_id):
            self.actions.stop(pending.kill_job_id)
            return job  # created once the killed run has no active task (a later tick)
        try:
            self.actions.create(job.template, pending.job_id)
        except AlreadyExists:
            pass  # created before a crash or by the previous leader: the claim is done
        log.info("cron job %s: run started as job %s", job.name, pending.job_id)
        return self.store.update_cron_job(dataclasses.replace(job, pending=None,
                                                              last_run_job_id=pending.job_id))
