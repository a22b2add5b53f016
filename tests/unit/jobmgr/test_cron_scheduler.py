"""The cron scheduler over a real SQLite store, with fake job actions and a hand-moved clock.

No greenlet runs: tests call `tick()` as the loop would.  Two schedulers on one store stand
for two job managers during a leader change.
"""

from __future__ import annotations

import calendar
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.core.cron.model import CollisionPolicy, CronJob, PendingRun, run_job_id
from peloton.core.errors import AlreadyExists, NotFound
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.task import TaskSpec
from peloton.core.states import JobState, JobType
from peloton.jobmgr.cron import CronScheduler
from peloton.storage import Store, StoreOptions, open_store

T0 = calendar.timegm((2030, 1, 1, 12, 0, 0)) * 1000
MINUTE = 60_000
TEMPLATE = JobSpec(name="nightly", type=JobType.BATCH, instance_count=2, default_task=TaskSpec(name="t"))


class Clock:
    def __init__(self) -> None:
        self.ms = T0 + 10_000

    def __call__(self) -> int:
        return self.ms


class Jobs:
    """CronJobActions in memory: jobs created, stopped, and their states (tests set them)."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.stopped: list[str] = []
        self.states: dict[str, JobState] = {}

    def create(self, spec: JobSpec, job_id: str) -> object:
        if job_id in self.states:
            raise AlreadyExists(f"job {job_id} already exists")
        assert spec.type is JobType.BATCH
        self.created.append(job_id)
        self.states[job_id] = JobState.RUNNING
        return job_id

    def stop(self, job_id: str) -> None:
        self.stopped.append(job_id)

    def runtime(self, job_id: str) -> JobRuntime:
        if job_id not in self.states:
            raise NotFound(job_id)
        return JobRuntime(state=self.states[job_id])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'cron.db'}", StoreOptions(bootstrap=True))
    yield s
    s.close()


def schedule(store: Store, policy: CollisionPolicy = CollisionPolicy.KILL_EXISTING,
             text: str = "* * * * *") -> CronJob:
    return store.create_cron_job(CronJob("nightly", text, policy, TEMPLATE, created_ms=T0, last_due_ms=T0))


def scheduler(store: Store, jobs: Jobs, clock: Clock, grace_ms: int = 60_000) -> CronScheduler:
    s = CronScheduler(store, jobs, clock, grace_ms=grace_ms)
    s.watching_since_ms = clock()
    return s


def test_a_due_time_starts_one_run_with_a_deterministic_id(store: Store) -> None:
    jobs, clock = Jobs(), Clock()
    schedule(store)
    cron = scheduler(store, jobs, clock)
    cron.tick()
    assert jobs.created == []  # 12:00 was the scheduling time itself: nothing due yet
    clock.ms = T0 + MINUTE + 500
    cron.tick()
    cron.tick()
    assert jobs.created == [run_job_id("nightly", str(T0 + MINUTE))]
    stored = store.get_cron_job("nightly")
    assert stored.last_run_job_id == jobs.created[0] and stored.pending is None
    assert stored.last_due_ms == T0 + MINUTE


def test_two_leaders_never_start_a_due_time_twice(store: Store) -> None:
    jobs, clock = Jobs(), Clock()
    schedule(store, CollisionPolicy.RUN_OVERLAP)
    old, new = scheduler(store, jobs, clock), scheduler(store, jobs, clock)
    clock.ms = T0 + MINUTE + 1
    seen = store.get_cron_job("nightly")
    old.advance(seen)
    with pytest.raises(Exception, match="revision"):  # the stale view loses the compare-and-set
        new.advance(seen)
    new.tick()
    assert jobs.created == [run_job_id("nightly", str(T0 + MINUTE))]


def test_a_late_tick_runs_the_latest_due_time_once(store: Store) -> None:
    jobs, clock = Jobs(), Clock()
    schedule(store, CollisionPolicy.RUN_OVERLAP)
    cron = scheduler(store, jobs, clock)
    clock.ms = T0 + 5 * MINUTE + 1
    cron.tick()
    assert jobs.created == [run_job_id("nightly", str(T0 + 5 * MINUTE))]


def test_after_downtime_missed_runs_are_not_caught_up_but_the_grace_one_is(store: Store) -> None:
    jobs, clock = Jobs(), Clock()
    schedule(store, CollisionPolicy.RUN_OVERLAP)
    clock.ms = T0 + 30 * MINUTE + 20_000  # a leader starts 20 s after the 12:30 due time
    scheduler(store, jobs, clock).tick()
    assert jobs.created == [run_job_id("nightly", str(T0 + 30 * MINUTE))]
    clock.ms = T0 + 40 * MINUTE + 20_000  # down again; back 20 s after 12:40, no grace
    scheduler(store, jobs, clock, grace_ms=0).tick()
    assert len(jobs.created) == 1
    clock.ms = T0 + 41 * MINUTE
    scheduler(store, jobs, clock, grace_ms=0).tick()
    assert jobs.created[-1] == run_job_id("nightly", str(T0 + 41 * MINUTE))


def test_a_claim_left_by_a_dead_leader_is_finished_once(store: Store) -> None:
    jobs, clock = Jobs(), Clock()
    job = schedule(store)
    pending = PendingRun(run_job_id("nightly", "x"), T0 + MINUTE)
    store.update_cron_job(dataclasses.replace(job, pending=pending, last_due_ms=T0 + MINUTE))
    clock.ms = T0 + MINUTE + 5_000
    jobs.states[pending.job_id] = JobState.RUNNING  # it had even created the job before dying
    scheduler(store, jobs, clock).tick()
    assert jobs.created == []  # AlreadyExists: nothing new
    assert store.get_cron_job("nightly").last_run_job_id == pending.job_id


def test_kill_existing_stops_the_active_run_and_starts_when_it_is_gone(store: Store) -> None:
    jobs, clock = Jobs(), Clock()
    schedule(store)
    cron = scheduler(store, jobs, clock)
    first = cron.start_now("nightly")
    assert jobs.created == [first]
    clock.ms = T0 + MINUTE + 1
    cron.tick()
    assert jobs.stopped == [first] and jobs.created == [first]  # waits for the kill
    cron.tick()
    assert jobs.created == [first]
    jobs.states[first] = JobState.KILLED
    cron.tick()
    assert jobs.created == [first, run_job_id("nightly", str(T0 + MINUTE))]


def test_cancel_new_skips_while_a_run_is_active(store: Store) -> None:
    jobs, clock = Jobs(), Clock()
    schedule(store, CollisionPolicy.CANCEL_NEW)
    cron = scheduler(store, jobs, clock)
    first = cron.start_now("nightly")
    assert cron.start_now("nightly") == ""
    clock.ms = T0 + MINUTE + 1
    cron.tick()
    assert jobs.created == [first] and not jobs.stopped
    assert store.get_cron_job("nightly").last_due_ms == T0 + MINUTE  # skipped, not retried
    jobs.states[first] = JobState.SUCCEEDED
    assert cron.start_now("nightly") not in ("", first)


def test_start_now_of_an_unknown_cron_job_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        scheduler(store, Jobs(), Clock()).start_now("nope")
