"""A deterministic job manager for tests: fake clock, fake ports, in-memory SQLite, no threads.

Modelled on Nomad's scheduler tests: the job manager is built exactly as
`peloton up` builds it (peloton.jobmgr.app.JobManager) but never started, so
none of its greenlets run.  The test drives it:

* `run_due()` runs everything that is due now, round after round, until a round
  does nothing: the job manager's own `run_due()` (the three goal-state engines'
  due keys, then one pass of the placement processor and of the status events,
  nothing waits; the simulator steps it the same way), then one pass of each
  periodic loop (deadlines, evictor, daemon jobs);
* `advance(seconds)` moves the fake clock (both readings); `settle(seconds)` moves
  it deadline by deadline up to `seconds` later, running what comes due.

The fake resource manager places every queued task at once (round-robin over the
fake hosts) and the fake host manager reports every launched run RUNNING at once,
unless a test turns `auto_place` / `auto_run` off.  What the fakes saw (`rm.queued`,
`rm.killed`, `hosts.killed`, `hosts.events`) is what a test asserts on, with the
runtimes in the cache and in storage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import cast

from peloton.common.clock import FakeClock
from peloton.common.retry import NO_RETRY, Retrier
from peloton.core.model.ids import RunId
from peloton.core.model.job import JobRuntime, JobSpec, SlaSpec
from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import RestartPolicy, TaskRuntime, TaskSpec
from peloton.core.model.update import UpdateInfo
from peloton.core.states import JobType, TaskState
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.storage import Store, StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.fakes.resmgr import FakeResourceManager
from tests.unit.jobmgr.conflicts import ConflictingStore

POOL = "respool-default"
#: Rounds `run_due` allows before it decides the job manager is looping.
MAX_ROUNDS = 200
S = TaskState


def job_spec(instances: int = 2, kind: JobType = JobType.SERVICE, *, name: str = "test/job",
             max_failures: int = 0, sla: SlaSpec = SlaSpec(), command: str = "run") -> JobSpec:
    """A small job of `kind` in the fake resource manager's default pool."""
    task = TaskSpec(name="task", resources=Resources(cpu=0.1, mem_mb=32),
                    restart_policy=RestartPolicy(max_failures=max_failures),
                    labels=(), kill_grace_period_secs=1.0)
    task = dataclasses.replace(task, command=dataclasses.replace(task.command, value=command))
    return JobSpec(name=name, type=kind, instance_count=instances, default_task=task,
                   respool_id=POOL, owner="test", sla=sla)


class Harness:
    """A job manager that runs only when the test says so; see the module docstring."""

    def __init__(self, *, hosts: int = 4, config: JobManagerConfig | None = None) -> None:
        self.clock = FakeClock()
        self.store = open_store("sqlite://", StoreOptions(
            bootstrap=True, retrier=Retrier(NO_RETRY), clock=self.clock.wall, sqlite_threads=0))
        self.hosts = FakeHostManager(clock=self.clock)
        for i in range(hosts):
            self.hosts.add_host(f"host-{i}", cpu=64, mem=65536)
        self.rm = FakeResourceManager(self.hosts)
        self.config = config or JobManagerConfig()
        #: What the job manager stores through: `conflicts.fail(job, instance, times)` makes
        #: chosen task compare-and-sets lose (conflicts.py); `store` stays the plain one.
        self.conflicts = ConflictingStore(self.store)
        self.jm = JobManager(cast(Store, self.conflicts), self.rm, self.hosts, self.config,
                             clock=self.clock)
        self.jm.recovery.recover()

    def close(self) -> None:
        """Release the store."""
        self.store.close()

    # -- driving -------------------------------------------------------------------------
    def step(self) -> int:
        """One round of everything due now; returns how much work it found."""
        jm = self.jm
        done = jm.run_due()
        done += jm.deadlines.check_once()
        done += jm.evictor.evict_once()
        done += sum(jm.daemons.reconcile_once())
        return done

    def run_due(self) -> int:
        """Rounds of `step` until one finds nothing to do; returns the work done."""
        total = 0
        for _ in range(MAX_ROUNDS):
            done = self.step()
            if not done:
                return total
            total += done
        raise AssertionError(f"the job manager still had work after {MAX_ROUNDS} rounds")

    def advance(self, seconds: float) -> None:
        """Move the fake clock forward."""
        self.clock.advance(seconds)

    def next_deadline(self) -> float | None:
        """Seconds until the next goal-state deadline (None: nothing scheduled)."""
        due = self.jm.next_due()
        return None if due is None else due - self.clock.monotonic()

    def settle(self, seconds: float = 1.0) -> None:
        """Run what is due, then move to each next deadline within `seconds` and run again."""
        end = self.clock.monotonic() + seconds
        self.run_due()
        while (wait := self.next_deadline()) is not None and \
                self.clock.monotonic() + max(0.0, wait) <= end:
            self.advance(max(0.0, wait))
            self.run_due()
        self.advance(max(0.0, end - self.clock.monotonic()))
        self.run_due()

    # -- setting the scene -------------------------------------------------------------
    def create(self, spec: JobSpec | None = None) -> str:
        """Create a job through the API operations (it is evaluated on the next run)."""
        return self.jm.jobs.create(spec or job_spec())

    def job(self, job_id: str) -> CachedJob:
        """The cached job (fails if it is not cached)."""
        job = self.jm.cache.get(job_id)
        assert job is not None, f"job {job_id} is not cached"
        return job

    def force_task(self, job_id: str, instance: int, **fields: object) -> TaskRuntime:
        """Put a task in a given state behind the job manager's back (storage, then the
        cache re-reads it), as a test's starting point.  A run on a host is booked there."""
        stored = self.store.get_task_runtime(job_id, instance)
        rt = self.store.update_task_runtime(job_id, instance,
                                            dataclasses.replace(stored, **fields))  # type: ignore[arg-type]
        self.job(job_id).reload_tasks([instance])
        run_id = str(RunId(job_id, instance, rt.run_id))
        if rt.state in (S.LAUNCHED, S.STARTING, S.RUNNING, S.KILLING, S.PREEMPTING) and rt.host:
            job = self.job(job_id)
            self.hosts.adopt(rt.host, [LaunchSpec(run_id=run_id, spec=job.task_spec(instance),
                                                  ports=())])
        return rt

    def force_job(self, job_id: str, **fields: object) -> JobRuntime:
        """Put the job runtime in a given state behind the job manager's back."""
        stored = self.store.get_job_runtime(job_id)
        rt = self.store.update_job_runtime(job_id, dataclasses.replace(stored, **fields))  # type: ignore[arg-type]
        self.job(job_id).reload_runtime()
        return rt

    def force_workflow(self, job_id: str, **fields: object) -> UpdateInfo:
        """Put the job's workflow in a given state behind the job manager's back (the job is
        re-read from storage)."""
        update = self.job(job_id).update
        assert update is not None
        stored = self.store.update_update(dataclasses.replace(update, **fields))  # type: ignore[arg-type]
        self.reload(job_id)
        return stored

    def reload(self, job_id: str) -> CachedJob:
        """Drop the job from the cache and read it again from storage."""
        self.jm.cache.forget(job_id)
        return self.jm.cache.track(job_id)

    # -- reading -------------------------------------------------------------------------
    def task(self, job_id: str, instance: int = 0) -> TaskRuntime:
        """A task runtime as stored (and checked equal to the cached one)."""
        stored = self.store.get_task_runtime(job_id, instance)
        cached = self.jm.cache.get(job_id)
        if cached is not None and cached.get_task(instance) is not None:
            assert cached.task(instance) == stored, "cache and storage disagree"
        return stored

    def states(self, job_id: str) -> list[TaskState]:
        """Every stored task state of a job, in instance order."""
        return [rt.state for _, rt in sorted(self.store.get_task_runtimes(job_id).items())]

    def run_ids(self, job_id: str) -> Sequence[str]:
        """Run ids of the job launched on the fake hosts."""
        return sorted(r for r in self.hosts.runs() if r.startswith(job_id))
