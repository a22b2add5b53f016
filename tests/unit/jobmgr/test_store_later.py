"""A run's STARTING waits in the cache for the run's next write (core/lifecycle/store_later.py).

The job manager keeps a host's STARTING in its cache (its engines and reads see it), not
in the store; the run's next write stores it, with its pod event and its own timestamp,
or it is stored alone once it has waited `store_later_secs`.  Each write is one revision
of the stored runtime, so revisions count the writes.  A kept STARTING is never lost
while its job manager lives (a lost compare-and-set derives it again, a handover stores
it first), never applied to a run that has moved on, and a job manager that dies with one
kept leaves the run LAUNCHED for its successor to reconcile.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.lifecycle.run_end import LOST_BEFORE_START
from peloton.core.model.ids import RunId
from peloton.core.ports import HostManagerPort
from peloton.core.states import JobType, TaskState
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.ownership import Ownership
from peloton.storage import Store
from tests.harness.partition_ids import job_in
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState


def launched(h: Harness, job_id: str | None = None) -> tuple[str, str, int]:
    """A one-task batch job launched on a fake host that reports nothing by itself:
    (job id, run id, stored revision)."""
    h.hosts.auto_run = False
    jid = job_id or h.create(job_spec(1, JobType.BATCH, max_failures=0))
    h.settle(0.5)
    rt = h.task(jid)
    assert rt.state is S.LAUNCHED
    return jid, str(RunId(jid, 0, rt.run_id)), rt.revision


def host_of(h: Harness, run: str) -> str:
    """The fake host the run is on."""
    return h.hosts.runs()[run]


def cached(h: Harness, jid: str) -> S:
    """The state this job manager's cache holds for instance 0."""
    return h.job(jid).task(0).state


def keep_starting(h: Harness, jid: str, run: str) -> None:
    """The host reports the run STARTING: the job manager keeps it (cache, not store)."""
    h.hosts.emit(run, S.STARTING, host_of(h, run))
    h.run_due()
    assert cached(h, jid) is S.STARTING
    assert h.store.get_task_runtime(jid, 0).state is S.LAUNCHED and h.job(jid).kept() == [0]


def history(h: Harness, jid: str) -> list[tuple[S, float]]:
    """The run's pod events, oldest first: (state, time)."""
    return [(e.state, e.time) for e in reversed(h.store.get_pod_events(jid, 0))]


def test_starting_is_kept_then_stored_with_running_in_one_write(h: Harness) -> None:
    jid, run, rev = launched(h)
    h.hosts.emit(run, S.STARTING, host_of(h, run))
    started_at = h.clock.wall()
    h.run_due()
    assert cached(h, jid) is S.STARTING  # the cache sees it at once
    stored = h.store.get_task_runtime(jid, 0)
    assert stored.state is S.LAUNCHED and stored.revision == rev
    h.advance(0.5)
    h.hosts.emit(run, S.RUNNING, host_of(h, run))
    h.run_due()
    stored = h.store.get_task_runtime(jid, 0)
    assert stored.state is S.RUNNING and stored.revision == rev + 1  # one write for both
    assert h.task(jid) == stored
    assert history(h, jid)[-2:] == [(S.STARTING, started_at), (S.RUNNING, started_at + 0.5)]


def test_starting_is_stored_alone_after_the_bound(h: Harness) -> None:
    jid, run, rev = launched(h)
    h.hosts.emit(run, S.STARTING, host_of(h, run))
    started_at = h.clock.wall()
    h.run_due()
    h.settle(h.config.store_later_secs / 2)
    assert h.store.get_task_runtime(jid, 0).state is S.LAUNCHED
    h.settle(h.config.store_later_secs)
    stored = h.task(jid)
    assert stored.state is S.STARTING and stored.revision == rev + 1
    assert history(h, jid)[-1] == (S.STARTING, started_at)  # the host's time, not the write's
    assert not h.job(jid).kept()


def test_a_run_lost_while_its_starting_is_kept_counts_as_started(h: Harness) -> None:
    jid, run, _rev = launched(h)
    keep_starting(h, jid, run)
    h.hosts.finish(run, S.LOST)
    h.run_due()
    ended = h.store.get_pod_events(jid, 0, RunId.parse(run).run)[0]
    assert ended.state is S.LOST and ended.reason != LOST_BEFORE_START
    assert [s for s, _ in history(h, jid)][-2:] == [S.STARTING, S.LOST]
    h.settle(1.0)
    assert h.store.get_task_runtime(jid, 0).failure_count == 1  # maxFailures 0: not again


def test_a_kill_while_starting_is_kept_stores_both_in_order(h: Harness) -> None:
    jid, run, _rev = launched(h)
    keep_starting(h, jid, run)
    h.jm.jobs.stop(jid)
    h.settle(0.5)
    states = [s for s, _ in history(h, jid)]
    assert states[states.index(S.LAUNCHED):][:3] == [S.LAUNCHED, S.STARTING, S.KILLING]
    assert h.hosts.killed and run in h.hosts.killed[-1]


def test_a_lost_compare_and_set_derives_the_kept_starting_again(h: Harness) -> None:
    jid, run, _rev = launched(h)
    keep_starting(h, jid, run)
    h.conflicts.fail(jid, 0, 1)
    h.hosts.emit(run, S.RUNNING, host_of(h, run))
    h.run_due()
    assert h.conflicts.rejected
    assert h.task(jid).state is S.RUNNING
    assert [s for s, _ in history(h, jid)][-2:] == [S.STARTING, S.RUNNING]


def test_a_kept_starting_never_comes_back_to_a_run_that_moved_on(h: Harness) -> None:
    jid, run, _rev = launched(h)
    keep_starting(h, jid, run)
    # Another writer (a deposed job manager, a tool) started the next run meanwhile.
    moved = h.store.get_task_runtime(jid, 0)
    h.store.update_task_runtime(jid, 0, dataclasses.replace(
        moved, state=S.INITIALIZED, run_id=moved.run_id + 1, prev_run_id=moved.run_id,
        desired_run_id=moved.run_id + 1))
    h.hosts.emit(run, S.RUNNING, host_of(h, run))
    h.settle(h.config.store_later_secs + 1.0)
    rt = h.task(jid)
    assert rt.run_id > RunId.parse(run).run
    assert all(e.state is not S.STARTING and e.state is not S.RUNNING
               for e in h.store.get_pod_events(jid, 0, rt.run_id))
    assert not h.job(jid).kept()


def test_a_partition_handed_over_stores_what_it_kept_first(h: Harness) -> None:
    count = 4
    jm = JobManager(cast(Store, h.conflicts), h.rm, cast(HostManagerPort, h.hosts), h.config,
                    clock=h.clock, ownership=Ownership(count, {0, 1}))
    h.jm = jm
    jm.recovery.recover()
    mine = job_in(0, count)
    jm.jobs.create(job_spec(1, JobType.BATCH), job_id=mine)
    jid, run, rev = launched(h, mine)
    keep_starting(h, jid, run)
    assert h.store.get_task_runtime(jid, 0).state is S.LAUNCHED
    jm.release_partitions([0])
    stored = h.store.get_task_runtime(jid, 0)
    assert stored.state is S.STARTING and stored.revision == rev + 1
    assert [s for s, _ in history(h, jid)][-1] is S.STARTING


def test_a_successor_reconciles_a_run_whose_starting_died_with_its_job_manager(
        h: Harness) -> None:
    jid, run, _rev = launched(h)
    keep_starting(h, jid, run)
    # The job manager dies (kill -9) with STARTING kept; its successor recovers LAUNCHED
    # and has the host manager report the run again.
    h.jm = JobManager(cast(Store, h.conflicts), h.rm, cast(HostManagerPort, h.hosts), h.config,
                      clock=h.clock)
    h.jm.recovery.recover()
    h.settle(0.5)
    rt = h.task(jid)
    assert rt.run_id == RunId.parse(run).run and rt.state is S.RUNNING  # the host's word


def test_a_run_lost_before_the_successor_hears_its_host_is_not_counted(h: Harness) -> None:
    # The case store_later.py accepts: the run had started, but the store says LAUNCHED and
    # the host is gone before it reported the run again, so the loss is not counted.
    jid, run, _rev = launched(h)
    keep_starting(h, jid, run)
    h.hosts.finish(run, S.LOST)  # after the job manager died: the successor applies it
    h.jm = JobManager(cast(Store, h.conflicts), h.rm, cast(HostManagerPort, h.hosts), h.config,
                      clock=h.clock)
    h.jm.recovery.recover()
    h.settle(0.5)
    ended = h.store.get_pod_events(jid, 0, RunId.parse(run).run)[0]
    assert ended.state is S.LOST and ended.reason == LOST_BEFORE_START
    assert h.store.get_task_runtime(jid, 0).run_id > RunId.parse(run).run  # ran again


def test_store_later_secs_zero_stores_every_starting_at_once() -> None:
    h = Harness(config=JobManagerConfig(store_later_secs=0))
    try:
        jid, run, rev = launched(h)
        h.hosts.emit(run, S.STARTING, host_of(h, run))
        h.run_due()
        assert h.task(jid).state is S.STARTING and h.task(jid).revision == rev + 1
    finally:
        h.close()


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        JobManagerConfig(store_later_secs=-1.0)
