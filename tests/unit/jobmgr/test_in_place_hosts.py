"""Desired hosts of in-place updates follow Peloton's rules, in the deterministic harness
(issue 22 item 5 d; Peloton's goalstate/update_run.go getDesiredHostField, job_kill.go and
podsvc StopPod, task/event/update.go):

- an in-place update sends a run back to the host it runs on; a task whose run has ended
  (a killed job) has no host any more: the kill released it, so the update does not
  claim it back;
- stopping a job or a pod clears the desired host an in-place update gave it;
- an update that is not in place clears it;
- so an instance started again does not take the host it once had ahead of the
  instances already waiting for that room.
"""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.model.ids import TaskId
from peloton.core.model.job import JobSpec, PlacementStrategy
from peloton.core.model.resources import Resources
from peloton.core.model.task import TaskRuntime
from peloton.core.model.update import UpdateSpec
from peloton.core.states import JobState, TaskState, WorkflowType
from peloton.jobmgr import runs
from tests.unit.jobmgr.harness import Harness, job_spec
from tests.unit.jobmgr_servicers.placing import CorePlacement

S = TaskState

#: (in place, pinned, desired host already, run ended) -> the desired host an update gives,
#: for a run last on "h1" with an earlier claim on "h0" when `desired host already`.
UPDATE_HOST: dict[tuple[bool, bool, bool, bool], str] = {
    (in_place, pinned, claimed, ended): (
        ("h0" if claimed else "") if pinned else
        "" if not in_place else
        "h0" if claimed else
        "" if ended else "h1")
    for in_place in (False, True) for pinned in (False, True)
    for claimed in (False, True) for ended in (False, True)}


@pytest.mark.parametrize(("case", "expected"), sorted(UPDATE_HOST.items()))
def test_the_desired_host_rules_over_every_case(case: tuple[bool, bool, bool, bool],
                                                expected: str) -> None:
    in_place_, pinned, claimed, ended = case
    rt = TaskRuntime(state=S.KILLED if ended else S.RUNNING, host="h1",
                     desired_host="h0" if claimed else "")
    assert runs.desired_host_for_update(rt, in_place=in_place_, pinned=pinned) == expected
    assert runs.stopped_desired_host(rt, pinned=pinned) == ("h0" if claimed and pinned else "")


def in_place(h: Harness, jid: str, command: str, *, start: bool = False) -> None:
    h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=0, in_place=True,
                                                               start_tasks=start),
                          new_spec=job_spec(1, command=command))


def queued_host(h: Harness, jid: str) -> str:
    """The desired host of the instance's run queued at the resource manager."""
    task = h.rm.queued.get(TaskId(jid, 0))
    assert task is not None, "the instance has no run queued"
    return task.request.desired_host


def test_an_in_place_update_sends_a_running_instance_back_to_its_host(h: Harness) -> None:
    jid = h.create(job_spec(1))
    h.settle(5.0)
    host = h.task(jid).host
    h.rm.auto_place = False
    in_place(h, jid, "run --v2")
    h.settle(5.0)
    assert h.task(jid).desired_host == host
    assert queued_host(h, jid) == host


def test_an_in_place_update_of_a_killed_job_claims_no_host(h: Harness) -> None:
    jid = h.create(job_spec(1))
    h.settle(5.0)
    assert h.task(jid).host
    h.jm.jobs.stop(jid)
    h.settle(5.0)
    assert h.task(jid).state is S.KILLED
    h.rm.auto_place = False
    in_place(h, jid, "run --v2", start=True)
    h.settle(5.0)
    assert h.task(jid).goal_state is S.RUNNING
    assert h.task(jid).desired_host == ""
    assert queued_host(h, jid) == ""


@pytest.mark.parametrize("stop", ["job", "pod"])
def test_stopping_clears_the_host_an_in_place_update_gave(h: Harness, stop: str) -> None:
    jid = h.create(job_spec(1))
    h.settle(5.0)
    host = h.task(jid).host
    h.rm.auto_place = False  # the in-place run waits for its host
    in_place(h, jid, "run --v2")
    h.settle(5.0)
    assert h.task(jid).desired_host == host
    if stop == "job":
        h.jm.jobs.stop(jid)
    else:
        h.jm.tasks.stop_one(jid, 0)
    h.settle(5.0)
    assert (h.task(jid).state, h.task(jid).desired_host) == (S.KILLED, "")
    # Started again, it queues like any other run.
    if stop == "job":
        h.jm.jobs.change_goal(jid, JobState.RUNNING)
    else:
        h.jm.tasks.start(jid, [(0, 1)])
    h.settle(5.0)
    assert queued_host(h, jid) == ""


def test_an_update_not_in_place_clears_the_desired_host(h: Harness) -> None:
    jid = h.create(job_spec(1))
    h.settle(5.0)
    h.rm.auto_place = False
    in_place(h, jid, "run --v2")
    h.settle(5.0)
    assert h.task(jid).desired_host
    h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=0),
                          new_spec=job_spec(1, command="run --v3"))
    h.settle(5.0)
    assert h.task(jid).desired_host == ""
    assert queued_host(h, jid) == ""


def packed(spec: JobSpec, cpu: float) -> JobSpec:
    task = dataclasses.replace(spec.default_task, resources=Resources(cpu=cpu, mem_mb=32))
    return dataclasses.replace(spec, default_task=task, placement_strategy=PlacementStrategy.PACK_HOST)


def test_a_restarted_instance_leaves_the_freed_host_to_an_instance_waiting_for_it() -> None:
    """Host `big` (4 cpu) runs job A; `small` has 1 cpu free.  A is killed, which frees `big`
    for job W, waiting for 4 cpu (it is between placement attempts when A comes back).  A,
    started again by an in-place update, packs onto `small`: had it kept a claim on `big`
    it would take it, and W would find no room."""
    h = Harness(hosts=0)
    try:
        h.hosts.add_host("big", cpu=4, mem=65536)
        placer = CorePlacement(h)  # type: ignore[arg-type]
        a = h.create(packed(job_spec(1, name="test/a"), cpu=1.0))
        h.settle(1.0)
        assert h.task(a).host == "big"
        h.hosts.add_host("small", cpu=1, mem=65536)
        h.rm.auto_place = False
        waiting = h.create(packed(job_spec(1, name="test/w"), cpu=4.0))
        h.settle(1.0)
        assert placer.place([TaskId(waiting, 0)]) == 0  # no host has 4 cpu free
        h.jm.jobs.stop(a)
        h.settle(1.0)
        assert h.task(a).state is S.KILLED
        h.jm.workflows.create(a, WorkflowType.UPDATE,
                              UpdateSpec(batch_size=0, in_place=True, start_tasks=True),
                              new_spec=packed(job_spec(1, name="test/a", command="run --v2"), cpu=1.0))
        h.settle(1.0)
        assert placer.place([TaskId(a, 0)]) == 1  # A's turn comes first: W waits out its back-off
        h.settle(1.0)
        assert placer.place([TaskId(waiting, 0)]) == 1
        h.settle(1.0)
        assert (h.task(a).host, h.task(waiting).host) == ("small", "big")
        assert h.task(waiting).state is S.RUNNING
    finally:
        h.close()
