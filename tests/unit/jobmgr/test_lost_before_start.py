"""A run lost before it started is not a failure (issue 23 item 11).

A launch in flight when the host manager was killed, or one the job manager gave up on
after a pause, comes back LOST without the task ever running.  Jobs with `maxFailures: 0`
used to end FAILED that way; now such a run is replaced without counting (core
run_end.py), while a run lost after it started still counts.
"""

from __future__ import annotations

from peloton.core.lifecycle.run_end import LOST_BEFORE_START
from peloton.core.model.ids import RunId
from peloton.core.states import JobState, JobType, TaskState
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState


def test_a_launch_lost_through_a_host_manager_outage_runs_again_uncounted(h: Harness) -> None:
    h.hosts.auto_run = False  # the launch is in flight: no STARTING, no RUNNING
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=0))
    h.settle(1.0)
    first = h.task(jid)
    assert first.state is S.LAUNCHED
    # The host manager restarted and no host knows the run: it is reported LOST.
    h.hosts.emit(str(RunId(jid, 0, first.run_id)), S.LOST, message="unknown to every host")
    h.hosts.auto_run = True
    h.settle(1.0)
    rt = h.task(jid)
    assert rt.run_id == first.run_id + 1 and rt.state is S.RUNNING
    assert rt.failure_count == 0
    h.hosts.finish(str(RunId(jid, 0, rt.run_id)), S.SUCCEEDED)
    h.settle(2.0)
    assert h.store.get_job_runtime(jid).state is JobState.SUCCEEDED


def test_a_launch_the_job_manager_gave_up_on_runs_again_uncounted(h: Harness) -> None:
    h.hosts.auto_run = False
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=0))
    h.settle(1.0)
    first = h.task(jid)
    assert first.state is S.LAUNCHED
    h.settle(h.config.launch_timeout + 1.0)  # the launch timeout: LOST, and a new run
    rt = h.task(jid)
    assert rt.run_id > first.run_id and rt.failure_count == 0
    assert rt.state is S.LAUNCHED and h.store.get_job_runtime(jid).state is not JobState.FAILED


def test_a_run_lost_after_it_started_still_counts(h: Harness) -> None:
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=0))
    h.settle(1.0)
    (run,) = h.run_ids(jid)
    assert h.task(jid).state is S.RUNNING
    h.hosts.finish(run, S.LOST)
    h.settle(2.0)
    rt = h.task(jid)
    assert rt.state is S.LOST and rt.failure_count == 1 and rt.reason != LOST_BEFORE_START
    assert h.store.get_job_runtime(jid).state is JobState.FAILED
