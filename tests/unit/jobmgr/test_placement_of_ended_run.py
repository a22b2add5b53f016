"""A placement for a run that has already ended gives the run's allocation back.

The resource manager drops a LOST for a run it has queued again (it thinks no host has
it); the job manager records the LOST.  When the placement of that run then comes, the
job manager used to skip it, and the resource manager placed it, timed it out and placed
it again for ever, holding its allocation (issue 23 item 11).
"""

from __future__ import annotations

from peloton.core.model.ids import TaskId
from peloton.core.model.sched import PlacedTask, Placement
from peloton.core.states import JobType, TaskState
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState


def test_the_placement_of_an_ended_run_is_given_back(h: Harness) -> None:
    jid = h.create(job_spec(2, JobType.BATCH, max_failures=0))
    h.settle(1.0)
    rt = h.force_task(jid, 0, state=S.LOST, failure_count=1, completion_time=h.clock.wall())
    h.rm.killed.clear()
    h.rm.ready.append(Placement("host-1", h.hosts.hosts["host-1"].agent_id,
                                (PlacedTask(TaskId(jid, 0), rt.run_id),)))
    h.run_due()
    assert h.rm.killed == [TaskId(jid, 0)]
    assert h.task(jid).state is S.LOST and h.task(jid).run_id == rt.run_id  # not launched


def test_the_placement_of_a_run_replaced_by_a_newer_one_is_left_alone(h: Harness) -> None:
    jid = h.create(job_spec(2, JobType.BATCH, max_failures=0))
    h.settle(1.0)
    rt = h.task(jid)
    h.rm.killed.clear()
    h.rm.ready.append(Placement("host-1", h.hosts.hosts["host-1"].agent_id,
                                (PlacedTask(TaskId(jid, 0), rt.run_id - 1),)))
    h.run_due()
    assert not h.rm.killed  # a kill by task id would take the newer run's place with it
