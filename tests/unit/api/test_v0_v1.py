"""A job stored from one API and read through the other (Peloton's api converters)."""

from __future__ import annotations

import pytest

from peloton.api.convert import v0_job, v0_task, v0_v1, v1_job
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import Unimplemented
from tests.unit.api.helpers import JOB_ID, v0_config, v1_spec


@pytest.mark.parametrize("name", ["batch_job.yaml", "service_job.yaml"])
def test_v0_to_v1_and_back_loses_nothing_v1_can_carry(name: str) -> None:
    cfg = v0_config(name)
    back = v0_v1.job_spec_to_v0(v0_v1.job_config_to_v1(cfg))
    expected = job_pb2.JobConfig()
    expected.CopyFrom(cfg)
    # v1alpha has no job type, running-instance limits or max running time; its SLA decides
    # revocable; its preemption policy has no type; revision and pool are always written.
    expected.type = job_pb2.SERVICE
    for dropped in ("minimumRunningInstances", "maximumRunningInstances", "maxRunningTime"):
        expected.sla.ClearField(dropped)
    expected.changeLog.SetInParent()
    expected.respoolID.SetInParent()
    for task in (expected.defaultConfig, *expected.instanceConfig.values()):
        task.revocable = expected.sla.revocable
        if task.HasField("preemptionPolicy"):
            task.preemptionPolicy.ClearField("type")
    assert back == expected


def test_a_v0_job_reads_the_same_through_v1() -> None:
    v0_spec = v0_job.job_spec_from_v0(v0_config("service_job.yaml"))
    as_v1 = v1_job.job_spec_to_v1(v0_spec)
    reread = v1_job.job_spec_from_v1(as_v1)
    assert reread.default_task == v0_spec.default_task
    pod = v1_job.pod_spec_for_instance(v0_spec, JOB_ID, 1)
    assert pod.containers[0].image == "registry.invalid/frontend:1.4"
    assert pod.pod_name.value == f"{JOB_ID}-1"


def test_a_v1_job_reads_the_same_through_v0() -> None:
    spec = v1_job.job_spec_from_v1(v1_spec())
    config = v0_job.job_config_to_v0(spec)
    assert config.type == job_pb2.SERVICE and config.instanceCount == 3
    reread = v0_job.job_spec_from_v0(config)
    assert reread.default_task == spec.default_task
    assert reread.instance_tasks == spec.instance_tasks
    canary = v0_job.task_config_for_instance(spec, 2)
    assert canary.name == "api-canary" and canary.container.docker.image.endswith("2.1-rc1")
    assert list(canary.command.arguments)[-1] == "--canary" and canary.command.shell is False
    # The task config shown is the one that runs: the default's health check is inherited.
    assert canary.healthCheck.commandCheck.command.startswith("curl")
    assert v0_task.task_spec_from_v0(canary, sla_preemptible=True) == spec.task_spec(2)


def test_pod_spec_limits_are_unimplemented_in_v0_too() -> None:
    pod = pod_pb2.PodSpec()
    pod.init_containers.add(name="init")
    with pytest.raises(Unimplemented) as err:
        v0_v1.pod_spec_to_v0(pod)
    assert err.value.field == "init_containers"
