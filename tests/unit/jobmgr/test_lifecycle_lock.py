"""AdminService's Kill and Launch locks, driven deterministically (peloton/jobmgr/lifecycle_lock.py).

Peloton's Kill lock (pkg/jobmgr/task/lifecyclemgr: Kill and ShutdownExecutor answer
"kill op is locked") makes every goal-state kill fail and back off until it is removed;
its Launch lock was accepted without effect, ours stops launches.
"""

from __future__ import annotations

from peloton.core.states import JobState, TaskState
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState


def test_kill_lock_refuses_kills_until_removed_then_the_runs_are_killed(h: Harness) -> None:
    jid = h.create(job_spec(2))
    h.settle(1.0)
    runs = set(h.run_ids(jid))
    h.jm.lifecycle.lock_kill()
    h.jm.jobs.stop(jid)  # goal KILLED: the job engine kills every run
    h.run_due()
    assert h.jm.queue.jobs.failures(jid) >= 1  # the kill was refused, and backs off
    assert runs <= set(h.hosts.runs()) and not h.hosts.killed
    h.settle(h.config.kill_timeout + 20.0)  # retries (and the KILLING timeout) refused too
    assert runs <= set(h.hosts.runs()) and not h.hosts.killed
    h.jm.lifecycle.unlock_kill()  # the refused kills are sent now
    assert runs.isdisjoint(h.hosts.runs()) and runs <= set(h.hosts.killed)
    h.run_due()
    assert h.states(jid) == [S.KILLED, S.KILLED]
    h.settle(5.0)
    assert h.store.get_job_runtime(jid).state is JobState.KILLED


def test_api_stops_while_kills_are_locked_record_the_goal_and_kill_later(h: Harness) -> None:
    jid = h.create(job_spec(2))
    h.settle(1.0)
    (first, second) = h.run_ids(jid)
    h.jm.lifecycle.lock_kill()
    stopped, invalid = h.jm.tasks.stop(jid, [(0, 1)])  # no error for the caller
    assert (stopped, invalid) == ([0], [])
    assert h.task(jid, 0).goal_state is S.KILLED and h.task(jid, 0).state is S.KILLING
    assert first in h.hosts.runs()
    h.jm.lifecycle.unlock_kill()
    assert first in h.hosts.killed and second in h.hosts.runs()
    h.run_due()
    assert h.task(jid, 0).state is S.KILLED


def test_launch_lock_launches_nothing_until_removed(h: Harness) -> None:
    h.jm.lifecycle.launch_locked = True
    jid = h.create(job_spec(2))
    h.settle(30.0)
    assert not h.hosts.runs()  # nothing taken from the resource manager, nothing launched
    assert {t.job_id for t in h.rm.queued} == {jid}
    h.jm.lifecycle.launch_locked = False
    h.settle(1.0)
    assert h.states(jid) == [S.RUNNING, S.RUNNING]
