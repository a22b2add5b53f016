"""CronService over gRPC: schedule (bad input refused, nothing stored), start runs, list, deschedule."""

from __future__ import annotations

import grpc
import pytest

from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.pelotonpy.api.cron import cron_pb2 as pb
from peloton.api.gen.pelotonpy.api.cron import cron_pb2_grpc
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import get, job_id, service_spec, wait_running


def cron_job(schedule: str = "0 4 * * *",
             policy: pb.CollisionPolicy = pb.COLLISION_POLICY_KILL_EXISTING) -> pb.CronJob:
    job = pb.CronJob(name="www/prod/nightly", schedule=schedule, collision_policy=policy)
    job.stateless_spec.CopyFrom(service_spec(2, name="www/prod/nightly"))
    return job


def stub(cluster: Cluster) -> cron_pb2_grpc.CronServiceStub:
    return cron_pb2_grpc.CronServiceStub(cluster.channel)


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda j: setattr(j, "schedule", "61 * * * *"), "schedule"),
    (lambda j: setattr(j, "schedule", "* * * *"), "schedule"),
    (lambda j: j.ClearField("stateless_spec"), "template"),
    (lambda j: setattr(j, "name", ""), "name"),
])
def test_bad_cron_jobs_are_refused_naming_the_field_and_nothing_is_stored(
        cluster: Cluster, mutate: object, field: str) -> None:
    job = cron_job()
    mutate(job)  # type: ignore[operator]
    with pytest.raises(grpc.RpcError) as raised:
        stub(cluster).ScheduleCronJob(pb.ScheduleCronJobRequest(job=job), timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (raised.value.details() or ""), raised.value.details()
    assert not stub(cluster).ListCronJobs(pb.ListCronJobsRequest(), timeout=10).jobs


def test_schedule_start_list_replace_deschedule(cluster: Cluster) -> None:
    cron = stub(cluster)
    resp = cron.ScheduleCronJob(pb.ScheduleCronJobRequest(job=cron_job("0 4 * * MON-FRI")), timeout=10)
    assert resp.created and resp.job.schedule == "0 4 * * MON-FRI" and resp.job.next_run_ms > 0
    with pytest.raises(grpc.RpcError) as exists:
        cron.ScheduleCronJob(pb.ScheduleCronJobRequest(job=cron_job(),
                                                       mode=pb.SCHEDULE_MODE_CREATE_ONLY), timeout=10)
    assert exists.value.code() == grpc.StatusCode.ALREADY_EXISTS
    run = cron.StartCronJob(pb.StartCronJobRequest(name="www/prod/nightly"), timeout=10).run_job_id
    assert run
    wait_running(cluster, run, 2)
    info = get(cluster, run)
    assert info.job_info.spec.name == "www/prod/nightly"
    ids = cluster.jobs.GetJobIDFromJobName(svc.GetJobIDFromJobNameRequest(job_name="www/prod/nightly"),
                                           timeout=10).job_id
    assert [i.value for i in ids][:1] == [run]
    listed = cron.ListCronJobs(pb.ListCronJobsRequest(name_prefix="www/"), timeout=10).jobs
    assert [(j.name, j.last_run_job_id) for j in listed] == [("www/prod/nightly", run)]
    replaced = cron.ScheduleCronJob(pb.ScheduleCronJobRequest(
        job=cron_job("*/10 * * * *", pb.COLLISION_POLICY_CANCEL_NEW), mode=pb.SCHEDULE_MODE_REPLACE_ONLY),
        timeout=10)
    assert not replaced.created and replaced.job.collision_policy == pb.COLLISION_POLICY_CANCEL_NEW
    assert cron.StartCronJob(pb.StartCronJobRequest(name="www/prod/nightly"), timeout=10).run_job_id == ""
    deschedule = pb.DescheduleCronJobRequest(name="www/prod/nightly")
    assert cron.DescheduleCronJob(deschedule, timeout=10).existed
    assert not cron.DescheduleCronJob(deschedule, timeout=10).existed
    with pytest.raises(grpc.RpcError) as gone:
        cron.StartCronJob(pb.StartCronJobRequest(name="www/prod/nightly"), timeout=10)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as missing:
        cron.ScheduleCronJob(pb.ScheduleCronJobRequest(job=cron_job(), mode=pb.SCHEDULE_MODE_REPLACE_ONLY),
                             timeout=10)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert job_id(run)
