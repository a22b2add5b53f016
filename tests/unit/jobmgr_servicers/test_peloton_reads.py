"""Pod specs read back as Peloton returns them: `command` and `entrypoint` both filled.

Peloton stored a v1alpha job as the v0 JobConfig ConvertJobSpecToJobConfig made of it and
answered GetJob, GetPod and QueryPods with ConvertJobConfigToJobSpec /
ConvertTaskConfigToPodSpec (pkg/jobmgr/util/handler/api_converter.go), which copy the
CommandInfo into `containers[].command` and spell it out again in `entrypoint`,
`environment` and `mesos_spec`; v0 reads return the stored TaskConfig's `command`.
"""

from __future__ import annotations

from typing import Any

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2 as pod_svc
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import create, get, job_id, service_spec, wait_running
from tests.unit.jobmgr_servicers.test_v0_methods import create_batch, tasks_stub


def _both(box: Any, value: str) -> None:
    assert box.command.value == value, box
    assert box.entrypoint.value == value, box


def test_a_v1alpha_pod_reads_back_with_command_and_entrypoint(cluster: Cluster) -> None:
    spec = service_spec(2)
    spec.default_spec.containers[0].environment.add(name="MODE", value="prod")
    jid = create(cluster, spec).job_id.value
    wait_running(cluster, jid, 2)
    value = "serve --tag v1"
    job = get(cluster, jid).job_info.spec
    _both(job.default_spec.containers[0], value)
    assert [(v.name, v.value) for v in job.default_spec.containers[0].command.environment.variables
            ] == [("MODE", "prod")]
    pod = cluster.pods.GetPod(pod_svc.GetPodRequest(pod_name={"value": f"{jid}-1"}), timeout=10)
    _both(pod.current.spec.containers[0], value)
    assert [(e.name, e.value) for e in pod.current.spec.containers[0].environment] == [
        ("MODE", "prod")]
    queried = cluster.jobs.QueryPods(svc.QueryPodsRequest(job_id=job_id(jid)), timeout=10)
    for info in queried.pods:
        _both(info.spec.containers[0], value)
    # The same job through v0: the stored TaskConfig's command.
    task = tasks_stub(cluster).Get(task_pb2.GetRequest(jobId={"value": jid}, instanceId=0),
                                   timeout=10)
    assert task.result.config.command.value == value
    v0 = cluster.v0jobs.Get(job_pb2.GetRequest(id={"value": jid}), timeout=10)
    assert v0.jobInfo.config.defaultConfig.command.value == value


def test_a_v0_job_reads_through_v1alpha_with_both(cluster: Cluster) -> None:
    jid = create_batch(cluster, 1)
    pod = cluster.pods.GetPod(pod_svc.GetPodRequest(pod_name={"value": f"{jid}-0"}), timeout=10)
    box = pod.current.spec.containers[0]
    assert box.command.value and box.entrypoint.value == box.command.value
    job = get(cluster, jid).job_info.spec
    assert job.default_spec.containers[0].entrypoint.value == box.command.value
