"""A run left KILLING by a job manager that stopped is killed by its successor.

The job manager stores KILLING, then asks the host manager to kill the run (runcontrol.py);
a job manager that dies between the two leaves a run that keeps running with nobody
waiting for its end but the kill timeout (and a run behind its desired config never even
had that: its stale-run action was a stop, which does nothing to a run already KILLING).
The successor's hand-back kills such runs again with what is left of their grace, and a
rolling update or restart waiting on them goes on.
"""

from __future__ import annotations

import pytest

from peloton.core.model.evolve import evolve
from peloton.core.model.ids import RunId
from peloton.core.model.task import TerminationReason
from peloton.core.states import TaskState
from tests.unit.jobmgr.harness import Harness, job_spec
from tests.unit.jobmgr.test_recovery_background import recover_the_rest, restart

S = TaskState
#: The task's kill grace period, seconds.
GRACE = 10.0


def left_killing(h: Harness, killing_for: float, **fields: object) -> tuple[str, str]:
    """A one-task service whose run the dead owner marked KILLING `killing_for` seconds ago
    and never killed; returns (job id, run id)."""
    spec = job_spec(1)
    spec = evolve(spec, default_task=evolve(spec.default_task, kill_grace_period_secs=GRACE))
    job_id = h.jm.jobs.create(spec)
    h.settle(5)
    assert h.states(job_id) == [S.RUNNING]
    rt = h.force_task(job_id, 0, state=S.KILLING, update_time=h.clock.wall() - killing_for,
                      termination=TerminationReason.KILLED_FOR_UPDATE, **fields)
    return job_id, str(RunId(job_id, 0, rt.run_id))


@pytest.mark.parametrize("killing_for, grace_left", [(3.0, 7.0), (30.0, 0.0)])
def test_a_run_left_killing_is_killed_again_with_what_is_left_of_its_grace(
        h: Harness, killing_for: float, grace_left: float) -> None:
    job_id, run = left_killing(h, killing_for)
    jm, _ = restart(h)
    assert recover_the_rest(jm)
    assert h.hosts.killed == [run]
    assert h.hosts.kill_graces[run] == grace_left
    h.settle(1)
    after = h.task(job_id)  # the run ended; a service's next run starts
    assert after.run_id == 2 and after.state is S.RUNNING


def test_a_run_behind_its_desired_run_and_left_killing_is_replaced(h: Harness) -> None:
    job_id, run = left_killing(h, 1.0, desired_run_id=2)
    jm, _ = restart(h)
    assert recover_the_rest(jm)
    assert h.hosts.killed == [run]
    h.settle(1)
    after = h.task(job_id)
    assert after.run_id == 2 and after.state is S.RUNNING


def test_runs_not_killing_are_not_killed_by_a_takeover(h: Harness) -> None:
    job_id = h.jm.jobs.create(job_spec(3))
    h.settle(5)
    jm, _ = restart(h)
    assert recover_the_rest(jm)
    assert h.hosts.killed == []
    assert h.states(job_id) == [S.RUNNING] * 3


@pytest.mark.parametrize("how", ["stop", "update"])
def test_a_kill_lost_on_the_way_is_sent_again_after_the_kill_timeout(
        h: Harness, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Stored KILLING, the kill never reached the host (the call was lost; nothing errs):
    the task engine looks again after the kill timeout and kills once more.  A write to
    KILLING schedules nothing by itself, so without the stop's own look the run stayed
    KILLING until the next takeover."""
    job_id = h.jm.jobs.create(job_spec(1))
    h.settle(5)
    (run,) = h.run_ids(job_id)
    real_kill = h.hosts.kill
    lost: list[str] = []
    monkeypatch.setattr(h.hosts, "kill", lambda runs, grace=5.0: lost.extend(runs))
    if how == "stop":
        h.jm.tasks.stop(job_id, [(0, 1)])
    else:  # a restart of the instance: its run is stopped, the next one starts after
        h.jm.tasks.restart(job_id, [(0, 1)])
    h.run_due()
    assert h.task(job_id).state is S.KILLING and lost == [run]
    monkeypatch.setattr(h.hosts, "kill", real_kill)
    h.settle(h.config.kill_timeout - 1)
    assert h.task(job_id).state is S.KILLING and h.hosts.killed == []
    h.settle(2)
    assert h.hosts.killed == [run]
    after = h.task(job_id)
    if how == "stop":
        assert after.state is S.KILLED
    else:
        assert after.run_id == 2 and after.state is S.RUNNING
