"""How an update rolls, end to end in the deterministic harness: watch time, strategies,
auto-pause, health checks and failures, and exactly which instances it touches.

Expected results are Aurora's (watch time: InstanceUpdater; strategies: Queue/Batch/
VariableBatchStrategy; auto-pause: JobUpdateControllerImpl.maybeAutoPause) and
Peloton's (failures against max instance attempts and max failure instances, rollback
on failure, Mesos killing a task whose health check fails, instance diffs against each
instance's own config).  The fake clock makes every wait exact.
"""

from __future__ import annotations

import dataclasses

from peloton.core.model.ids import RunId
from peloton.core.model.job import JobSpec
from peloton.core.model.task import HealthCheckSpec
from peloton.core.model.update import Strategy, UpdateInfo, UpdateSpec
from peloton.core.states import TaskState, WorkflowState, WorkflowType
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState
W = WorkflowState


def with_check(spec: JobSpec) -> JobSpec:
    check = HealthCheckSpec(command="true", initial_interval_secs=1, interval_secs=1)
    return dataclasses.replace(spec, default_task=dataclasses.replace(spec.default_task,
                                                                      health_check=check))


def running_job(h: Harness, instances: int, spec: JobSpec | None = None) -> str:
    jid = h.create(spec or job_spec(instances))
    h.settle(5.0)
    assert h.states(jid) == [S.RUNNING] * instances
    return jid


def update(h: Harness, jid: str, spec: UpdateSpec, count: int, command: str = "run --v2",
           new: JobSpec | None = None) -> UpdateInfo:
    return h.jm.workflows.create(jid, WorkflowType.UPDATE, spec,
                                 new_spec=new or job_spec(count, command=command))


def stored(h: Harness, info: UpdateInfo) -> UpdateInfo:
    return h.store.get_update(info.update_id)


def targeted(h: Harness, jid: str, info: UpdateInfo) -> list[int]:
    """Instances the update has touched (asked to run its config)."""
    return [i for i, rt in sorted(h.store.get_task_runtimes(jid).items())
            if rt.desired_config_version == info.config_version]


def run_of(h: Harness, jid: str, inst: int) -> str:
    return str(RunId(jid, inst, h.task(jid, inst).run_id))


def instance_events(h: Harness, info: UpdateInfo) -> dict[int, list[WorkflowState]]:
    """Instance events of the update (oldest first), for every instance of the job."""
    out: dict[int, list[WorkflowState]] = {}
    for inst in range(h.job(info.job_id).spec.instance_count + 4):
        events = h.store.get_workflow_events(info.update_id, inst)
        if events:
            out[inst] = [e.state for e in reversed(events)]
    return out


# -- watch time ------------------------------------------------------------------------------

def test_an_instance_counts_as_updated_only_after_the_watch_time(h: Harness) -> None:
    jid = running_job(h, 2)
    info = update(h, jid, UpdateSpec(batch_size=1, watch_secs=5.0), 2)
    h.settle(1.0)
    assert targeted(h, jid, info) == [0] and h.task(jid, 0).state is S.RUNNING
    started = h.task(jid, 0).start_time
    h.settle(3.0)  # 4 s running: still watched, instance 1 not started
    assert stored(h, info).instances_done == () and targeted(h, jid, info) == [0]
    h.settle(1.5)
    assert stored(h, info).instances_done == (0,) and targeted(h, jid, info) == [0, 1]
    done = [e.time for e in h.store.get_workflow_events(info.update_id, 0)
            if e.state is W.SUCCEEDED]
    assert done and done[0] >= started + 5.0
    h.settle(10.0)
    assert stored(h, info).state is W.SUCCEEDED


def test_a_run_failing_inside_the_watch_time_fails_the_instance_and_rolls_back(
        h: Harness) -> None:
    jid = running_job(h, 1)
    info = update(h, jid, UpdateSpec(batch_size=1, watch_secs=5.0, max_instance_attempts=1,
                                     max_failure_instances=1, rollback_on_failure=True), 1)
    h.settle(1.0)
    assert h.task(jid, 0).config_version == info.config_version
    h.advance(2.0)
    h.hosts.finish(run_of(h, jid, 0), S.FAILED)  # the new command exits after 2 s
    h.run_due()
    back = stored(h, info)
    assert back.state is W.ROLLING_BACKWARD and back.rollback
    h.settle(30.0)
    back = stored(h, info)
    assert back.state is W.ROLLED_BACK
    # Back on the original command (a new config version with the old spec).
    rt = h.task(jid, 0)
    assert rt.state is S.RUNNING and rt.config_version == back.config_version
    assert h.job(jid).task_spec(0).command.value == "run"


def test_without_watch_time_the_same_failure_comes_too_late(h: Harness) -> None:
    jid = running_job(h, 1)
    info = update(h, jid, UpdateSpec(batch_size=1, max_instance_attempts=1,
                                     max_failure_instances=1, rollback_on_failure=True), 1)
    h.settle(1.0)
    assert stored(h, info).state is W.SUCCEEDED


def test_the_watch_time_counts_from_healthy(h: Harness) -> None:
    jid = running_job(h, 1, with_check(job_spec(1)))
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="HEALTHY")
    h.run_due()
    info = update(h, jid, UpdateSpec(batch_size=1, watch_secs=5.0), 1,
                  new=with_check(job_spec(1, command="run --v2")))
    h.settle(10.0)  # RUNNING for 10 s, but never HEALTHY: not updated
    assert stored(h, info).state is W.ROLLING_FORWARD and stored(h, info).instances_done == ()
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="HEALTHY")
    h.settle(4.0)
    assert stored(h, info).state is W.ROLLING_FORWARD
    h.settle(2.0)
    assert stored(h, info).state is W.SUCCEEDED


# -- health checks decide updates (Peloton on Mesos) -------------------------------------------

def test_a_failing_health_check_kills_the_run_and_fails_the_update(h: Harness) -> None:
    jid = running_job(h, 2, with_check(job_spec(2)))
    for inst in (0, 1):
        h.hosts.emit(run_of(h, jid, inst), S.RUNNING, healthy="HEALTHY")
    h.run_due()
    info = update(h, jid, UpdateSpec(batch_size=1, max_instance_attempts=1,
                                     max_failure_instances=1), 2,
                  new=with_check(job_spec(2, command="run --v2")))
    h.settle(1.0)
    run = run_of(h, jid, 0)
    h.hosts.emit(run, S.RUNNING, healthy="UNHEALTHY", message="health check failed 3 times")
    h.run_due()
    assert run in h.hosts.killed  # killed like Mesos' executor kills it
    assert h.task(jid, 0).failure_count == 1
    h.settle(5.0)
    after = stored(h, info)
    assert after.state is W.FAILED and after.instances_failed == (0,)
    assert targeted(h, jid, info) == [0]  # instance 1 was never touched


def test_a_failing_health_check_rolls_back_when_asked(h: Harness) -> None:
    jid = running_job(h, 1, with_check(job_spec(1)))
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="HEALTHY")
    h.run_due()
    info = update(h, jid, UpdateSpec(batch_size=1, max_instance_attempts=1,
                                     max_failure_instances=1, rollback_on_failure=True), 1,
                  new=with_check(job_spec(1, command="run --v2")))
    h.settle(1.0)
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="UNHEALTHY")
    h.settle(5.0)
    assert stored(h, info).state is W.ROLLING_BACKWARD
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="HEALTHY")  # the old command is fine
    h.settle(5.0)
    assert stored(h, info).state is W.ROLLED_BACK


def test_unlimited_attempts_keep_retrying_an_unhealthy_instance(h: Harness) -> None:
    jid = running_job(h, 1, with_check(job_spec(1)))
    info = update(h, jid, UpdateSpec(batch_size=1), 1,
                  new=with_check(job_spec(1, command="run --v2")))
    h.settle(1.0)
    first = h.task(jid, 0).run_id
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="UNHEALTHY")
    h.settle(30.0)
    assert h.task(jid, 0).run_id > first and h.task(jid, 0).failure_count == 1
    assert stored(h, info).state is W.ROLLING_FORWARD


def test_an_update_that_adds_a_health_check_waits_for_healthy(h: Harness) -> None:
    jid = running_job(h, 1)
    info = update(h, jid, UpdateSpec(batch_size=1), 1, new=with_check(job_spec(1)))
    h.settle(5.0)
    assert stored(h, info).state is W.ROLLING_FORWARD  # RUNNING, health unknown
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="HEALTHY")
    h.settle(1.0)
    assert stored(h, info).state is W.SUCCEEDED


def test_an_update_that_removes_a_health_check_is_done_once_running(h: Harness) -> None:
    jid = running_job(h, 1, with_check(job_spec(1)))
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, healthy="HEALTHY")
    h.run_due()
    info = update(h, jid, UpdateSpec(batch_size=1), 1)
    h.settle(1.0)
    assert stored(h, info).state is W.SUCCEEDED
    assert h.task(jid, 0).healthy.value == "DISABLED"


# -- strategies and auto-pause ------------------------------------------------------------------

def picks_in_order(h: Harness, jid: str, info: UpdateInfo, rounds: int = 20) -> list[list[int]]:
    """The groups the update touched, step by step: runs report RUNNING only when the test
    says so, so each group's instances come up together after the group was picked."""
    h.hosts.auto_run = False
    seen: list[int] = []
    groups: list[list[int]] = []
    for _ in range(rounds):
        if not stored(h, info).state.active:
            break
        h.settle(1.0)
        new = [i for i in targeted(h, jid, info) if i not in seen]
        if new:
            groups.append(new)
            seen.extend(new)
        for inst in new:
            rt = h.task(jid, inst)
            h.hosts.emit(run_of(h, jid, inst), S.RUNNING, rt.host)
    return groups


def test_queue_keeps_the_group_size_in_flight(h: Harness) -> None:
    jid = running_job(h, 4)
    h.hosts.auto_run = False
    info = update(h, jid, UpdateSpec(batch_size=2, strategy=Strategy.QUEUE), 4)
    h.settle(1.0)
    assert targeted(h, jid, info) == [0, 1]
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, h.task(jid, 0).host)
    h.settle(1.0)
    assert targeted(h, jid, info) == [0, 1, 2]  # one done: the next one starts at once


def test_batch_waits_for_the_whole_group(h: Harness) -> None:
    jid = running_job(h, 4)
    h.hosts.auto_run = False
    info = update(h, jid, UpdateSpec(batch_size=2, strategy=Strategy.BATCH), 4)
    h.settle(1.0)
    assert targeted(h, jid, info) == [0, 1]
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, h.task(jid, 0).host)
    h.settle(1.0)
    assert targeted(h, jid, info) == [0, 1]  # instance 1 still in flight: wait
    h.hosts.emit(run_of(h, jid, 1), S.RUNNING, h.task(jid, 1).host)
    h.settle(1.0)
    assert targeted(h, jid, info) == [0, 1, 2, 3]


def test_var_batch_takes_each_group_size_in_turn_the_last_repeating(h: Harness) -> None:
    jid = running_job(h, 6)
    info = update(h, jid, UpdateSpec(strategy=Strategy.VAR_BATCH, group_sizes=(1, 3, 1)), 6)
    assert picks_in_order(h, jid, info) == [[0], [1, 2, 3], [4], [5]]
    assert stored(h, info).state is W.SUCCEEDED


def test_autopause_after_each_batch_but_not_after_the_last(h: Harness) -> None:
    jid = running_job(h, 5)
    info = update(h, jid, UpdateSpec(strategy=Strategy.VAR_BATCH, group_sizes=(1, 2),
                                     autopause=True), 5)
    h.settle(5.0)
    paused = stored(h, info)
    assert paused.state is W.PAUSED and paused.instances_done == (0,)
    assert targeted(h, jid, info) == [0] and paused.autopaused_at == 1
    h.jm.workflows.resume(jid)
    # The next batch starts before resume answers (a client looking right after sees it).
    assert targeted(h, jid, info) == [0, 1, 2]
    assert {1, 2} <= set(instance_events(h, info))
    h.settle(5.0)
    assert stored(h, info).state is W.PAUSED and targeted(h, jid, info) == [0, 1, 2]
    h.jm.workflows.resume(jid)
    h.settle(5.0)
    assert stored(h, info).state is W.SUCCEEDED  # no pause after the last batch
    assert targeted(h, jid, info) == [0, 1, 2, 3, 4]


def test_autopause_never_pauses_a_rollback_or_a_queue(h: Harness) -> None:
    jid = running_job(h, 3)
    info = update(h, jid, UpdateSpec(batch_size=1, strategy=Strategy.QUEUE, autopause=True), 3)
    h.settle(10.0)
    assert stored(h, info).state is W.SUCCEEDED


def test_a_paused_batch_update_rolls_back_without_pausing(h: Harness) -> None:
    jid = running_job(h, 4)
    info = update(h, jid, UpdateSpec(batch_size=1, strategy=Strategy.BATCH, autopause=True), 4)
    h.settle(5.0)
    assert stored(h, info).state is W.PAUSED
    h.jm.workflows.resume(jid)
    h.settle(5.0)
    assert stored(h, info).state is W.PAUSED and targeted(h, jid, info) == [0, 1]
    h.jm.workflows.rollback(jid)
    h.settle(20.0)
    back = stored(h, info)
    assert back.state is W.ROLLED_BACK
    assert {rt.config_version for rt in h.store.get_task_runtimes(jid).values()} >= {
        back.config_version}


# -- exactly the instances whose config changes ------------------------------------------------

def test_an_identical_update_touches_no_instance(h: Harness) -> None:
    jid = running_job(h, 3)
    runs = h.run_ids(jid)
    info = update(h, jid, UpdateSpec(batch_size=1), 3, command="run")
    assert info.instances_total == 0 and info.instances_updated == ()
    h.settle(5.0)
    assert stored(h, info).state is W.SUCCEEDED
    assert instance_events(h, info) == {} and h.run_ids(jid) == runs


def test_an_update_after_an_abort_touches_only_instances_not_yet_on_its_config(
        h: Harness) -> None:
    jid = running_job(h, 3)
    first = update(h, jid, UpdateSpec(batch_size=1), 3)
    h.hosts.auto_run = False
    h.settle(1.0)
    h.hosts.emit(run_of(h, jid, 0), S.RUNNING, h.task(jid, 0).host)
    h.settle(1.0)
    assert stored(h, first).instances_done == (0,) and targeted(h, jid, first) == [0, 1]
    h.jm.workflows.abort(jid)  # instance 1's new run is starting on the aborted config
    h.hosts.auto_run = True
    again = update(h, jid, UpdateSpec(batch_size=1), 3)  # the same spec as the aborted one
    # Compared with the config each instance runs: only instance 2 still has the old one.
    assert again.instances_updated == (2,)
    h.hosts.emit(run_of(h, jid, 1), S.RUNNING, h.task(jid, 1).host)
    h.settle(10.0)
    assert stored(h, again).state is W.SUCCEEDED
    assert set(instance_events(h, again)) == {2}
    assert h.states(jid) == [S.RUNNING] * 3


def test_only_changed_instances_of_a_per_instance_spec_are_touched(h: Harness) -> None:
    jid = running_job(h, 3)
    base = job_spec(3)
    pinned = dataclasses.replace(
        job_spec(3, command="run --v2"),
        instance_tasks={2: base.default_task, 1: base.default_task})  # only instance 0 changes
    info = update(h, jid, UpdateSpec(batch_size=1), 3, new=pinned)
    assert info.instances_updated == (0,)
    h.settle(5.0)
    assert stored(h, info).state is W.SUCCEEDED and set(instance_events(h, info)) == {0}
    h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                          new_spec=job_spec(3))  # back to the original spec everywhere
    back = h.jm.workflows.current(jid)
    assert back is not None and back.instances_updated == (0,)
