"""Recovery: loading the active jobs on start and handing their runs to the other daemons.

Recovery reads the active-job set, loads each job (config versions, runtime,
tasks, workflow: `JobCache.load`), and rebuilds the rest of the cluster's view
from it: runs already placed or running are handed to the resource manager
with their allocation (`recover_task`), queued runs are queued again, and the
host manager adopts the runs on hosts and is asked to re-report every run we
believe is alive in another state than the one it last heard (or that it does not
know), so a launch lost in the crash comes back LOST and is retried, and a report a
previous owner took but never applied comes again; a run both sides hold in the same
state is not re-reported (a million of them after a restart would flood every
consumer of the status stream).  A job whose stored data is
corrupt is skipped with an error naming it; it never stops the daemon.
`hand_back` does the same for a resource or host manager that started over.

Recovery does not block serving (issue 24, item 4).  As a component, `start()` only reads
the active-job ids and *defers* them in the cache (cache.py), then returns: the job
manager serves, creates jobs and runs its loops at once, while a greenlet loads the
deferred jobs one by one, `SLICE_JOBS` at a time, yielding between jobs; a job's runs go
back to the resource manager, then to the host manager (adopted, many hosts a call, and
reconciled), while the next job loads (`HandBack`, pipelined), so the three daemons'
work overlaps.  A lookup of a job not loaded
yet (a call, a status event, an eviction) loads it first, in the caller, through the same
steps, and exactly once: whoever gets there first loads it and hands its runs back, the
others wait (`JobCache.ensure`).  A placement taken for such a job is void (placement_processor.py):
its recovery kills the run in the resource manager and queues it again.  A job is
enqueued for the goal-state engines when it is loaded, so they act on loaded jobs only.
`done` (and the log line "recovery done") says every deferred job is loaded and handed
back.  A load that fails (storage unavailable) or a
hand-back that fails (a peer down) is retried every `RETRY_SECONDS` until it succeeds.

One ordering of the blocking recovery is weaker now: a new job's runs (or a job loaded
early on demand) may be queued in a resource manager that started over at the same time
before the held runs of jobs not yet recovered are back in it, so during recovery its
admission can count their room as free (a job manager restarting alone, the usual case,
finds the resource manager still holding them).

`recover()` does it all in the caller (the deterministic harness, the simulator).  With
all-active job managers only the jobs this one owns are loaded (`owns`, ownership.py),
and a partition taken over later is recovered on its own (`recover(only=...)`) the same
way: its jobs are deferred first, so a call about one while the partition recovers
loads it rather than missing it.  A member's takeover uses `recover_behind`, the same in
a greenlet of its own, so the membership greenlet that called it goes back to ZooKeeper.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import gevent
import gevent.event

from peloton.core.errors import DataCorruption, NotFound
from peloton.core.model.ids import TaskId
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import TaskState
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.hand_back import HELD, QUEUED, HandBack
from peloton.jobmgr.runcontrol import RunControl

log = logging.getLogger(__name__)
S = TaskState
#: Jobs the background recovery takes in one step (a failure part-way is retried per
#: slice; `step` in the deterministic harness takes one).
SLICE_JOBS = 20
#: The longest the background recovery waits at one step for callers' loads to end.
GIVE_WAY_MAX_SECONDS = 2.0
#: Pause before a failed load or hand-back is tried again (a peer or the store is down).
RETRY_SECONDS = 1.0


class Recovery:
    """Rebuilds the cache from storage and the other daemons' view from the cache; a
    lifecycle component that does it in the background (module docstring)."""

    name = "recovery"

    def __init__(self, cache: JobCache, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 control: RunControl, queue: GoalStateQueue,
                 owns: Callable[[str], bool] = lambda _job_id: True) -> None:
        self.cache = cache
        self.owns = owns
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.control = control
        self.queue = queue
        self._greenlet: gevent.Greenlet | None = None
        #: Recoveries of partitions taken over (`recover_behind`) still running.
        self._takeovers: set[gevent.Greenlet] = set()
        #: Loaded jobs whose runs are not handed back yet (a peer failed): tried again.
        self._unhanded: set[str] = set()
        #: Jobs loaded (by recovery or on demand) since the start, for logs and tests.
        self.loaded = 0
        #: Loads a caller waits for (a call about a job not loaded yet) under way: the
        #: background recovery steps aside until none is (`give_way`).
        self._callers = 0
        self._no_callers = gevent.event.Event()
        self._no_callers.set()

    # -- the component ----------------------------------------------------------------------
    def start(self) -> None:
        """Defer every active job this job manager owns and recover them in the background;
        returns once their ids are read (the job manager can serve from then on)."""
        deferred = self.defer()
        log.info("recovering %d active jobs in the background", len(deferred))
        self._greenlet = gevent.spawn(self._background, time.monotonic())

    def stop(self) -> None:
        """Stop a background recovery still running (the term is over), and the
        recoveries of partitions taken over."""
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None
        for greenlet in list(self._takeovers):
            greenlet.kill()

    @property
    def done(self) -> bool:
        """Every deferred job is loaded and its runs handed back."""
        return not self.cache.next_deferred(1) and not self._unhanded

    # -- recovering ---------------------------------------------------------------------------
    def defer(self, only: Callable[[str], bool] | None = None,
              listed: list[str] | None = None) -> list[str]:
        """Note the active jobs this job manager owns (and `only` accepts) as still to load;
        returns their ids (not those cached or deferred already).  `listed`: the stored
        active-job ids, read by the caller beforehand (else read here)."""
        active = self.cache.active_ids() if listed is None else listed
        ids = [job_id for job_id in active
               if self.owns(job_id) and (only is None or only(job_id))]
        return self.cache.defer(ids, self._load_for_caller)

    def recover(self, only: Callable[[str], bool] | None = None,
                listed: list[str] | None = None) -> int:
        """Load every active job this job manager owns (and `only` accepts: one partition
        taken over) and hand its runs back to the other daemons, in the caller (calls
        meanwhile load a job they need first); returns jobs loaded.  A failure is raised.
        `listed`: as `defer`'s."""
        deferred = self.defer(only, listed)
        for start in range(0, len(deferred), SLICE_JOBS):
            self._slice(deferred[start:start + SLICE_JOBS])
        for job_id in sorted(self._unhanded):
            self._retry_hand_back(job_id, raise_errors=True)
        loaded = sum(1 for job_id in deferred if job_id in self.cache)
        log.info("recovered %d active jobs", loaded)
        return loaded

    def recover_behind(self, only: Callable[[str], bool],
                       listed: list[str] | None = None) -> int:
        """`recover(only)` in a greenlet of its own: a member's membership greenlet, which
        takes partitions over, goes back to ZooKeeper at once.  The jobs are deferred
        before this returns, so a call about one loads it first meanwhile; a failed load
        or hand-back is retried, as in the background recovery.  Returns the jobs
        deferred.  `listed`: as `defer`'s."""
        deferred = self.defer(only, listed)
        if deferred:
            greenlet = gevent.spawn(self._recover_listed, deferred, time.monotonic())
            self._takeovers.add(greenlet)
            greenlet.link(self._takeovers.discard)
        return len(deferred)

    def _recover_listed(self, job_ids: list[str], started: float) -> None:
        for start in range(0, len(job_ids), SLICE_JOBS):
            chunk = job_ids[start:start + SLICE_JOBS]
            while chunk:
                try:
                    self._slice(chunk)
                    break
                except Exception:
                    log.warning("recovery: a slice of a takeover's jobs failed; retrying in "
                                "%.0fs", RETRY_SECONDS, exc_info=True)
                    gevent.sleep(RETRY_SECONDS)
                    # Only those still deferred: the others loaded, or their partition left.
                    chunk = [j for j in chunk if self.cache.is_deferred(j)]
        while self._unhanded:
            for job_id in sorted(self._unhanded):
                self._retry_hand_back(job_id, raise_errors=False)
            if self._unhanded:
                gevent.sleep(RETRY_SECONDS)
        loaded = sum(1 for job_id in job_ids if job_id in self.cache)
        log.info("recovered %d of %d jobs taken over in %.1f s", loaded, len(job_ids),
                 time.monotonic() - started)

    def step(self, jobs: int = SLICE_JOBS) -> int:
        """Recover the next `jobs` deferred jobs in the caller, as the background greenlet
        does (the deterministic harness steps it); returns how many it took (0: none was
        left).  A failure is raised, the jobs it did not load still deferred."""
        chunk = self.cache.next_deferred(jobs)
        if chunk:
            self._slice(chunk)
        return len(chunk)

    def _background(self, started: float) -> None:
        while True:
            try:
                if not self.step():
                    break
            except Exception:
                log.warning("recovery: a slice of jobs failed; retrying in %.0fs",
                            RETRY_SECONDS, exc_info=True)
                gevent.sleep(RETRY_SECONDS)
        while self._unhanded:
            for job_id in sorted(self._unhanded):
                self._retry_hand_back(job_id, raise_errors=False)
            if self._unhanded:
                gevent.sleep(RETRY_SECONDS)
        log.info("recovery done: %d active jobs loaded in %.1f s", self.loaded,
                 time.monotonic() - started)

    def _slice(self, job_ids: list[str]) -> None:
        """Load the deferred jobs of `job_ids` (those no lookup loaded meanwhile), yielding
        between jobs, then tell the host manager about their runs at once.  A job's runs go
        to the resource manager while the next job loads (`HandBack`, pipelined)."""
        handed = HandBack(self, to_resmgr=True, pipelined=True)
        failed: Exception | None = None
        for job_id in job_ids:
            try:
                self.cache.ensure(job_id, lambda j, add: self._load(j, add, handed))
            except Exception as exc:  # still deferred; the others of the slice go on
                log.warning("recovery: cannot load job %s yet: %s", job_id, exc)
                failed = failed or exc
            self.give_way()  # between jobs, everything else of the hub runs
        try:
            handed.to_hosts()
        except Exception:
            self._unhanded.update(handed.jobs)
            raise
        finally:
            for job_id, error in handed.unsent.items():
                # Loaded and answering from the cache; its runs go back on the next try.
                log.warning("job %s: handing its runs back failed (%s); retrying", job_id,
                            error)
                self._unhanded.add(job_id)
        if failed is not None:
            raise failed

    def _load(self, job_id: str, add: Callable[[CachedJob], bool],
              handed: HandBack | None = None) -> None:
        """Recover one deferred job (JobCache's loader): load it, cache it with `add`, hand
        its runs back (the host manager told now unless `handed` collects for a slice)."""
        if not self.owns(job_id):
            return  # its partition moved away since it was deferred
        try:
            job = self.cache.load(job_id)
        except NotFound:
            log.warning("active job %s has no runtime; dropping it from the active set",
                        job_id)
            self.cache.drop_active(job_id)
            return
        except DataCorruption as exc:
            log.error("cannot recover job %s: %s", job_id, exc)
            return
        if not add(job):
            return
        self.loaded += 1
        try:
            if handed is not None:
                self._hand_back_job(job, handed)
            else:
                alone = HandBack(self, to_resmgr=True)
                self._hand_back_job(job, alone)
                alone.to_hosts()
        except Exception:
            # Loaded and answering from the cache; its runs go back on the next try.
            log.warning("job %s: handing its runs back failed; retrying", job_id, exc_info=True)
            self._unhanded.add(job_id)

    def _load_for_caller(self, job_id: str, add: Callable[[CachedJob], bool]) -> None:
        """`_load` for a lookup (JobCache's deferring loader): the background recovery gives
        way meanwhile, so a call about a job not loaded yet has the process to itself
        rather than half of it (a 100,000-task job's load and hand-back took ~4 times as
        long beside a busy background recovery)."""
        self._callers += 1
        self._no_callers.clear()
        try:
            self._load(job_id, add)
        finally:
            self._callers -= 1
            if not self._callers:
                self._no_callers.set()

    def give_way(self) -> None:
        """The background recovery's yield: let the hub run, and wait while a caller's load
        is under way."""
        gevent.sleep(0)
        # Bounded: should a caller's load ever wait on a job this recovery holds, both
        # still go on.
        self._no_callers.wait(GIVE_WAY_MAX_SECONDS)

    def _retry_hand_back(self, job_id: str, *, raise_errors: bool) -> None:
        job = self.cache.get(job_id)
        if job is None:  # untracked or forgotten meanwhile: nothing to hand back
            self._unhanded.discard(job_id)
            return
        try:
            handed = HandBack(self, to_resmgr=True)
            self._hand_back_job(job, handed)
            handed.to_hosts()
        except Exception:
            if raise_errors:
                raise
            log.warning("job %s: handing its runs back failed again", job_id, exc_info=True)
            return
        self._unhanded.discard(job_id)

    def _hand_back_job(self, job: CachedJob, handed: HandBack) -> None:
        """Hand one loaded job's runs back and have the engines look at it.  Idempotent on
        the other side, so a retry after a failure part-way is safe."""
        job_id = job.job_id
        queued = handed.job(job)
        for inst, rt in job.tasks():
            if rt.state in HELD:
                if rt.state is not S.RUNNING or rt.run_id != rt.desired_run_id:
                    self.queue.enqueue_task(job_id, inst)
            elif rt.state not in QUEUED and rt.goal_state is not rt.state:
                self.queue.enqueue_task(job_id, inst)
        if queued:
            handed.settle()  # its held runs are in the resource manager first
            failure = handed.unsent.pop(job_id, None)
            if failure is not None:
                raise failure
            startable = _startable(job, queued)
            # A previous leader may have taken placements of these runs and stopped
            # before launching them; the resource manager would hold them until its
            # launch timeout.  Forgetting them there first queues them afresh (a no-op
            # for a fresh one).
            self.resmgr.kill_tasks([TaskId(job_id, i) for i in startable])
            self.cache.requeued(job_id)  # its placements from now on are of fresh runs
            self.control.enqueue(job, startable)
        self.queue.enqueue_job(job_id)

    def hand_back(self, *, to_resmgr: bool, to_hostmgr: bool) -> int:
        """Hand the cached jobs' runs to a resource or host manager that started over (a new
        leader term has empty state); returns the runs on hosts.  Idempotent on the other
        side.  Jobs still deferred are handed to the new term when they load."""
        handed = HandBack(self, to_resmgr=to_resmgr)
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
