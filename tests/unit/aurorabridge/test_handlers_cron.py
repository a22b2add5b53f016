"""Cron methods over the FakePeloton: schedule, list, start, replace, deschedule, Aurora's refusals."""

from __future__ import annotations

from typing import Any

import pytest

from aurorabridge import validation
from aurorabridge.thrift_api import api
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.conftest import Call, messages

OK, INVALID = api.ResponseCode.OK, api.ResponseCode.INVALID_REQUEST


def cron_config(schedule: str = "*/15 * * * *", policy: int | None = None, service: bool = False) -> Any:
    config = b.job_configuration(b.task_config(is_service=service), instances=2)
    config.cronSchedule = schedule
    config.cronCollisionPolicy = policy
    return config


def test_schedule_list_start_replace_deschedule(call: Call, fake: FakePeloton) -> None:
    assert call("scheduleCronJob", description=cron_config()).responseCode == OK
    jobs = call("getJobs", ownerRole="www").result.getJobsResult.configs
    assert [(j.key.name, j.cronSchedule, j.cronCollisionPolicy, j.instanceCount) for j in jobs] == [
        ("hello", "*/15 * * * *", api.CronCollisionPolicy.KILL_EXISTING, 2)]
    summary = call("getJobSummary", role="www").result.jobSummaryResult.summaries
    assert summary[0].nextCronRunMs > 0 and summary[0].job.cronSchedule == "*/15 * * * *"
    roles = call("getRoleSummary").result.roleSummaryResult.summaries
    assert [(r.role, r.jobCount, r.cronJobCount) for r in roles] == [("www", 1, 1)]
    assert call("startCronJob", job=jobs[0].key).responseCode == OK
    run = fake.job_by_name("www/devel/hello")
    assert run.spec.instance_count == 2
    replaced = call("replaceCronTemplate",
                    config=cron_config("0 4 * * *", api.CronCollisionPolicy.CANCEL_NEW))
    assert replaced.responseCode == OK
    assert fake.cron["www/devel/hello"].schedule == "0 4 * * *"
    assert call("descheduleCronJob", job=jobs[0].key).responseCode == OK
    again = call("descheduleCronJob", job=jobs[0].key)
    assert again.responseCode == OK and "not scheduled with cron" in messages(again)
    assert "Failed to start cron job" in messages(call("startCronJob", job=jobs[0].key))


@pytest.mark.parametrize(("config", "field"), [
    (cron_config("61 * * * *"), "cron schedule"),
    (cron_config("* * * *"), "cron schedule"),
    (cron_config("0 0 1 * MON"), "cron schedule"),
    (cron_config(service=True), "service task"),
    (cron_config(policy=api.CronCollisionPolicy.RUN_OVERLAP), "RUN_OVERLAP"),
    (cron_config(""), "no cron schedule"),
])
def test_bad_cron_jobs_are_refused_and_nothing_is_scheduled(call: Call, fake: FakePeloton, config: Any,
                                                            field: str) -> None:
    resp = call("scheduleCronJob", description=config)
    assert resp.responseCode == INVALID and field in messages(resp), messages(resp)
    assert not fake.cron and not fake.calls_of("schedule_cron_job")


def test_replace_needs_a_cron_job_and_cron_keys_refuse_other_writes(call: Call, fake: FakePeloton) -> None:
    resp = call("replaceCronTemplate", config=cron_config())
    assert resp.responseCode == INVALID and "No cron job found" in messages(resp)
    assert call("scheduleCronJob", description=cron_config()).responseCode == OK
    created = call("createJob", description=b.job_configuration(b.task_config(), 1))
    assert created.responseCode == INVALID and "already exists" in messages(created)
    update = call("startJobUpdate", request=b.update_request(), message="")
    assert update.responseCode == INVALID and messages(update) == validation.NO_CRON
    with_cron = call("createJob", description=cron_config())
    assert with_cron.responseCode == INVALID and messages(with_cron).endswith(validation.NO_CRON)
    call("startCronJob", job=api.JobKey(role="www", environment="devel", name="hello"))
    key = api.InstanceKey(jobKey=api.JobKey(role="www", environment="devel", name="hello"), instanceId=0)
    added = call("addInstances", key=key, count=1)
    assert added.responseCode == INVALID and "may not be added to cron jobs" in messages(added)


def test_a_key_with_live_tasks_cannot_become_a_cron_job(call: Call) -> None:
    assert call("createJob", description=b.job_configuration(b.task_config(), 1)).responseCode == OK
    resp = call("scheduleCronJob", description=cron_config())
    assert resp.responseCode == INVALID and "already exists" in messages(resp)
