"""Allocation comes back when a run ends, is lost or was never launched (issue 23 item 11).

Four pause/resume rounds left a pool at 8 of 8 cpu allocated, no task on a host and
thousands queued: a launch lost in flight (the job manager paused after writing LAUNCHED,
or the host manager killed before the launch reached a host) was never looked at again,
and the resource manager cycled the run LAUNCHING -> (timeout) READY -> PLACED ->
LAUNCHING for ever, each placement skipped by the job manager.  Here the real resource
manager runs under the real (stepped) job manager with the fake host manager; the
placement engine is the tests' first-fit helper.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import pytest

from peloton.common.clock import FakeClock
from peloton.common.retry import NO_RETRY, Retrier
from peloton.core.feasibility import QUEUE_ANYWAY
from peloton.core.model.constraints import Label
from peloton.core.model.ids import RunId, TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchFailure, LaunchSpec
from peloton.core.states import JobState, JobType, TaskState
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.resmgr.app import ResourceManager
from peloton.storage import StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.jobmgr.harness import job_spec
from tests.unit.resmgr.helpers import make_pool, make_rm, place_all

S = TaskState


class Cluster:
    """A resource manager and a job manager over one fake host manager and one clock."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.hosts = FakeHostManager(clock=self.clock)
        for i in range(2):
            self.hosts.add_host(f"host-{i}", cpu=4)
        self.rm_store = open_store("sqlite://", StoreOptions(bootstrap=True))
        self.rm: ResourceManager = make_rm(self.rm_store, self.hosts, self.clock)  # type: ignore[arg-type]
        self.pool = make_pool(self.rm, "batch", cpu=(2, 2))
        self.jm_store = open_store("sqlite://", StoreOptions(
            bootstrap=True, retrier=Retrier(NO_RETRY), clock=self.clock.wall, sqlite_threads=0))
        self.config = JobManagerConfig()
        self.jm = JobManager(self.jm_store, self.rm, self.hosts, self.config, clock=self.clock)
        self.jm.recovery.recover()
        #: While False, a launch is lost in flight: no host gets it, nobody reports it.
        self.launches_arrive = True
        real_launch = self.hosts.launch

        def launch(hostname: str, tasks: Sequence[LaunchSpec]) -> list[LaunchFailure]:
            return real_launch(hostname, tasks) if self.launches_arrive else []

        self.hosts.launch = launch  # type: ignore[method-assign]

    def close(self) -> None:
        self.rm.stop()
        self.rm_store.close()
        self.jm_store.close()

    def step(self) -> None:
        """Everything due now, in both daemons and the placement engine, until quiet."""
        for _ in range(100):
            done = self.rm.loops.events_once(0) + self.rm.loops.admit_once()
            done += len(place_all(self.rm, self.hosts))
            done += self.jm.run_due()
            if not done:
                return
        raise AssertionError("the daemons never went quiet")

    def advance(self, seconds: float, every: float = 10.0) -> None:
        """Move time on in steps, running what comes due at each."""
        left = seconds
        while left > 0:
            self.clock.advance(min(every, left))
            left -= every
            self.step()

    def allocated_cpu(self) -> float:
        return self.rm.pools.get(self.pool).allocation.cpu


@pytest.fixture
def c() -> Iterator[Cluster]:
    cluster = Cluster()
    yield cluster
    cluster.close()


def create(c: Cluster, instances: int) -> str:
    """A batch job of 1-cpu tasks with maxFailures 0 in the 2-cpu pool."""
    base = job_spec(instances, JobType.BATCH, max_failures=0)
    task = dataclasses.replace(base.default_task, resources=Resources(cpu=1.0, mem_mb=32))
    return c.jm.jobs.create(dataclasses.replace(base, default_task=task, respool_id=c.pool))


def test_launches_lost_in_flight_give_their_allocation_back_and_run_again(c: Cluster) -> None:
    c.hosts.auto_run = False
    c.launches_arrive = False
    jid = create(c, 2)
    c.step()
    assert [rt.state for rt in c.jm_store.get_task_runtimes(jid).values()] == [S.LAUNCHED] * 2
    assert c.allocated_cpu() == 2
    # Past the resource manager's launching timeout (it places the runs again) and the job
    # manager's launch timeout (it gives up on them): the launches come through this time.
    c.launches_arrive = True
    c.hosts.auto_run = True
    c.advance(c.rm.config.launching_timeout + c.config.launch_timeout + 30)
    runtimes = c.jm_store.get_task_runtimes(jid)
    assert all(rt.state is S.RUNNING and rt.run_id == 2 for rt in runtimes.values())
    assert c.allocated_cpu() == 2  # the two new runs, not four
    for inst, rt in runtimes.items():
        c.hosts.finish(str(RunId(jid, inst, rt.run_id)), S.SUCCEEDED)
    c.advance(5, every=1)
    assert c.jm_store.get_job_runtime(jid).state is JobState.SUCCEEDED
    assert c.allocated_cpu() == 0 and c.rm.book.tracker.get(TaskId(jid, 0)) is None


def test_a_run_given_up_on_after_it_started_gives_its_allocation_back(c: Cluster) -> None:
    """STARTING, then silence (the host manager was killed): the launch timeout ends the run
    LOST, a failure, and with maxFailures 0 nothing replaces it; no host reports its end."""
    c.hosts.auto_run = False
    c.launches_arrive = False
    jid = create(c, 1)
    c.step()
    c.hosts.emit(str(RunId(jid, 0, 1)), S.STARTING, "host-0")
    c.step()
    assert c.allocated_cpu() == 1
    c.advance(c.config.launch_timeout + 30)
    rt = c.jm_store.get_task_runtime(jid, 0)
    assert rt.state is S.LOST and rt.failure_count == 1 and rt.run_id == 1
    assert c.allocated_cpu() == 0 and c.rm.book.tracker.get(TaskId(jid, 0)) is None


def test_a_queued_anyway_job_no_host_could_hold_holds_nothing_and_blocks_nothing(
        c: Cluster) -> None:
    """Tasks of 7.5 cpu in an 8-cpu pool on 4-cpu hosts: admitted, one held the pool while
    its placement failed, and a later 1-cpu job waited for ever."""
    big_pool = make_pool(c.rm, "big", cpu=(0, 8))
    big = dataclasses.replace(job_spec(20, JobType.BATCH, name="too-big"), respool_id=big_pool,
                              labels=(Label(QUEUE_ANYWAY, "true"),))
    big = dataclasses.replace(big, default_task=dataclasses.replace(
        big.default_task, resources=Resources(cpu=7.5, mem_mb=32)))
    big_id = c.jm.jobs.create(big)
    small = dataclasses.replace(job_spec(1, JobType.BATCH, name="later"), respool_id=big_pool)
    small = dataclasses.replace(small, default_task=dataclasses.replace(
        small.default_task, resources=Resources(cpu=1.0, mem_mb=32)))
    small_id = c.jm.jobs.create(small)
    c.advance(60)
    assert c.jm_store.get_task_runtime(small_id, 0).state is S.RUNNING
    assert c.rm.pools.get(big_pool).allocation.cpu == 1.0  # the later job's task only
    (reason,) = c.rm.pending_reasons([TaskId(big_id, 0)]).values()
    assert "no UP host could ever hold it" in reason
