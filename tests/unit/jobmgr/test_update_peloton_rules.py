"""Update rules that follow Peloton's job manager, end to end in the deterministic harness.

- a disabled health check counts as none (cached/workflow_strategy.go: an instance is
  updated once RUNNING with HealthState DISABLED or HEALTHY), so an update that disables
  the check completes;
- an instance an update removed and a rollback adds back goes on from its last run
  (goalstate/update_run.go updateWithRecentRunID): a new run, never the one that ended;
- asking a workflow that is already rolling back to roll back does nothing
  (cached/job.go RollbackWorkflow returns at once when the update is a rollback).
"""

from __future__ import annotations

import dataclasses

from peloton.core.model.ids import RunId
from peloton.core.model.job import JobSpec
from peloton.core.model.task import HealthCheckSpec
from peloton.core.model.update import UpdateSpec
from peloton.core.states import HealthState, TaskState, WorkflowState, WorkflowType
from tests.unit.jobmgr.harness import Harness, job_spec

S = TaskState
W = WorkflowState


def with_check(spec: JobSpec, *, enabled: bool) -> JobSpec:
    check = HealthCheckSpec(command="true", enabled=enabled)
    return dataclasses.replace(spec, default_task=dataclasses.replace(spec.default_task,
                                                                      health_check=check))


def test_an_update_that_disables_the_health_check_completes(h: Harness) -> None:
    jid = h.create(with_check(job_spec(2), enabled=True))
    h.settle(5.0)
    assert {h.task(jid, i).healthy for i in range(2)} == {HealthState.HEALTH_UNKNOWN}
    update = h.jm.workflows.create(
        jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
        new_spec=with_check(job_spec(2, command="run --v2"), enabled=False))
    h.settle(60.0)
    assert h.store.get_update(update.update_id).state is W.SUCCEEDED
    assert [h.task(jid, i).healthy for i in range(2)] == [HealthState.DISABLED] * 2
    assert h.states(jid) == [S.RUNNING, S.RUNNING]


def test_a_job_created_with_a_disabled_check_is_healthy_at_once(h: Harness) -> None:
    jid = h.create(with_check(job_spec(1), enabled=False))
    h.settle(5.0)
    assert h.task(jid, 0).healthy is HealthState.DISABLED


def test_a_rollback_that_adds_back_a_removed_instance_starts_a_new_run(h: Harness) -> None:
    jid = h.create(job_spec(3))
    h.settle(5.0)
    first_run = str(RunId(jid, 2, h.task(jid, 2).run_id))
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=0),
                                   new_spec=job_spec(2, command="run --v2"))
    h.hosts.auto_run = False  # the updated instances' new runs stay LAUNCHED
    h.settle(3.0)
    assert sorted(h.store.get_task_runtimes(jid)) == [0, 1]  # instance 2 is removed
    assert h.store.get_update(update.update_id).state is W.ROLLING_FORWARD
    h.hosts.auto_run = True
    h.jm.workflows.rollback(jid)
    h.settle(120.0)
    assert h.store.get_update(update.update_id).state is W.ROLLED_BACK
    assert h.states(jid) == [S.RUNNING] * 3
    back = h.task(jid, 2)
    assert (back.run_id, back.prev_run_id) == (2, 1)
    launched = [spec.run_id for _, spec in h.hosts.launches]
    assert launched.count(first_run) == 1  # the ended run is never launched again
    assert str(RunId(jid, 2, 2)) in h.hosts.runs()
    # The removed run's history stays, under its own run id.
    assert {e.run_id for e in h.store.get_pod_events(jid, 2)} >= {1, 2}


def test_rolling_back_a_rollback_does_nothing(h: Harness) -> None:
    jid = h.create(job_spec(2))
    h.settle(5.0)
    update = h.jm.workflows.create(jid, WorkflowType.UPDATE, UpdateSpec(batch_size=1),
                                   new_spec=job_spec(2, command="run --v2"))
    h.hosts.auto_run = False
    h.run_due()
    rolling = h.jm.workflows.rollback(jid)
    assert rolling.state is W.ROLLING_BACKWARD
    again = h.jm.workflows.rollback(jid)
    # Not turned around a second time: same target (the config the update came from),
    # no new config version, the job's entity version unchanged.
    assert again.config_version == rolling.config_version
    assert h.job(jid).spec.version == rolling.config_version
    assert h.store.get_update(update.update_id).prev_config_version == \
        rolling.prev_config_version
    h.hosts.auto_run = True
    h.settle(120.0)
    assert h.store.get_update(update.update_id).state is W.ROLLED_BACK
    assert h.task(jid, 0).config_version == rolling.config_version  # the one it touched
