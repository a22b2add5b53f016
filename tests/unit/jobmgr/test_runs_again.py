"""A batch job does not end while one of its tasks is about to run again (issue 23 item 7).

The job's state is derived from its tasks; a task whose run ended LOST or FAILED but
whose restart policy lets it run again is not done.  Counted as done, it ended the job
FAILED in the moment between the run's end and the task engine starting the next run,
and a FAILED job is untracked: the task never ran again (2 of 32 jobs in the agent kill
-9 case of tests/integration/test_outage.py).  And a launch that never reached its host
(an agent killed -9, not timed out yet) is lost before it started: not a failure.
"""

from __future__ import annotations

from peloton.core.lifecycle.retry import MIN_SYSTEM_FAILURE_RETRIES
from peloton.core.lifecycle.run_end import LOST_BEFORE_START
from peloton.core.model.ids import RunId
from peloton.core.states import JobState, JobType, TaskState
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState


def test_a_job_whose_only_task_is_lost_and_runs_again_ends_succeeded(h: Harness) -> None:
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=2))
    h.settle(1.0)
    (run,) = h.run_ids(jid)
    assert h.task(jid).state is S.RUNNING
    h.hosts.finish(run, S.LOST)
    h.jm.events.process_once(0.0)  # the run's end is stored: LOST, one failure of the two allowed
    assert h.task(jid).state is S.LOST and h.task(jid).failure_count == 1
    # The job's evaluation comes due in the same moment as the task's (the job engine
    # runs first): it sees the task LOST before the task engine has started its next run.
    h.jm.queue.enqueue_job(jid)
    h.jm.engines.job.run_due()
    assert h.job(jid).runtime.state is not JobState.FAILED
    h.settle(1.0)
    rt = h.task(jid)
    assert rt.run_id == 2 and rt.state is S.RUNNING
    h.hosts.finish(str(RunId(jid, 0, rt.run_id)), S.SUCCEEDED)
    h.settle(2.0)
    assert h.store.get_job_runtime(jid).state is JobState.SUCCEEDED


def test_a_task_lost_with_no_tries_left_ends_its_job_failed(h: Harness) -> None:
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=2))
    h.settle(1.0)
    for attempt in (1, 2):
        (run,) = h.run_ids(jid)
        h.hosts.finish(run, S.LOST)
        h.jm.events.process_once(0.0)
        h.jm.queue.enqueue_job(jid)
        h.jm.engines.job.run_due()
        expected = JobState.FAILED if attempt == 2 else JobState.PENDING  # to run again
        assert h.job(jid).runtime.state is expected
        h.settle(1.0)
    assert h.task(jid).run_id == 2 and h.task(jid).failure_count == 2
    assert h.store.get_job_runtime(jid).state is JobState.FAILED


def test_launches_that_cannot_reach_their_host_do_not_spend_the_tasks_tries(
        h: Harness) -> None:
    # Every agent was killed -9: the host manager still offers their hosts until their
    # heartbeats time out, and each launch there fails unreached.
    h.hosts.unreachable = set(h.hosts.hosts)
    jid = h.create(job_spec(1, JobType.BATCH, max_failures=1))
    h.step()  # created, queued, placed, launched: unreached
    first = h.task(jid)
    assert first.state is S.LOST and first.reason == LOST_BEFORE_START
    assert first.failure_count == 0 and "cannot reach host" in first.message
    for _ in range(2 * MIN_SYSTEM_FAILURE_RETRIES):  # more than a system failure's tries
        h.step()
    rt = h.task(jid)
    assert rt.run_id > 2 * MIN_SYSTEM_FAILURE_RETRIES and rt.failure_count == 0
    assert h.job(jid).runtime.state is JobState.PENDING
    assert len(h.rm.killed) == len(h.hosts.launches)  # each allocation given back
    h.hosts.unreachable.clear()  # the agents are back (or timed out and no longer offered)
    h.settle(1.0)
    rt = h.task(jid)
    assert rt.state is S.RUNNING and rt.failure_count == 0
    h.hosts.finish(str(RunId(jid, 0, rt.run_id)), S.SUCCEEDED)
    h.settle(2.0)
    assert h.store.get_job_runtime(jid).state is JobState.SUCCEEDED
