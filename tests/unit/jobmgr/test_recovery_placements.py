"""Placements of a job whose recovery is under way (recovery.py, JobCache.placement_is_void).

A placement taken before the job's recovery had the resource manager forget its queued runs
is void (the recovery queues them again); one of a run queued afresh is launched, even while
the job's load still runs.
"""

from __future__ import annotations

from typing import Any

import gevent
import pytest

from peloton.core.model.ids import RunId, TaskId
from peloton.core.states import TaskState
from tests.unit.jobmgr.harness import Harness, job_spec
from tests.unit.jobmgr.test_recovery_background import recover_the_rest, restart

S = TaskState


def test_a_placement_taken_before_its_job_recovered_is_void(h: Harness) -> None:
    h.rm.auto_place = False
    job_id = h.jm.jobs.create(job_spec(1))
    h.settle(5)
    assert h.states(job_id) == [S.PENDING] and TaskId(job_id, 0) in h.rm.queued
    h.rm.place()  # placed before the crash; the new job manager takes it first
    jm, _ = restart(h)
    launches = list(h.hosts.launches)
    jm.placement.launch_once(0.0)
    # Not launched, nor killed in the resource manager: the job's recovery gives its
    # queued run back (kill, queue again), which a kill from here would take away.
    assert h.hosts.launches == launches and h.rm.killed == []
    assert jm.cache.is_deferred(job_id)
    assert recover_the_rest(jm)
    assert h.rm.killed == [TaskId(job_id, 0)] and TaskId(job_id, 0) in h.rm.queued
    h.rm.auto_place = True
    h.settle(5)
    assert h.states(job_id) == [S.RUNNING]
    assert [spec.run_id for _, spec in h.hosts.launches] == [str(RunId(job_id, 0, 1))]


def test_a_placement_of_a_run_its_recovery_queued_again_is_launched_while_it_loads(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's fresh placement can come back before its job's load ends (the placement
    engine is quick); voiding it too left the run PENDING until the resource manager's
    launch timeout (a bench after a member's kill -9 found one such job)."""
    h.rm.auto_place = False
    job_id = h.jm.jobs.create(job_spec(1))
    h.settle(5)
    assert h.states(job_id) == [S.PENDING]
    jm, _ = restart(h)
    real_enqueue = jm.recovery.control.enqueue
    launching: list[gevent.Greenlet] = []

    def enqueue(job: Any, instances: Any) -> None:
        real_enqueue(job, instances)
        assert jm.cache.is_deferred(job_id)  # the load has not ended
        h.rm.place()
        # The placement processor takes the fresh placement now (it waits for the load to
        # end before it writes LAUNCHED, as any lookup of a deferred job does).
        launching.append(gevent.spawn(jm.placement.launch_once, 0.0))
        gevent.sleep(0)

    monkeypatch.setattr(jm.recovery.control, "enqueue", enqueue)
    assert recover_the_rest(jm)
    assert launching and launching[0].get(timeout=5) == 1
    assert [spec.run_id for _, spec in h.hosts.launches] == [str(RunId(job_id, 0, 1))]
    h.settle(5)
    assert h.states(job_id) == [S.RUNNING]
