"""A job no UP host could ever hold is refused at create and on update, v0 and v1alpha,
unless it carries `peloton/queue-anyway=true` (see conftest.py: four 64-cpu hosts)."""

from __future__ import annotations

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import create, job_id, service_spec, version
from tests.unit.jobmgr_servicers.test_v0_methods import batch_config


def test_v1_create_names_the_resource_and_the_largest_host(cluster: Cluster) -> None:
    spec = service_spec(2)
    spec.default_spec.containers[0].resource.cpu_limit = 500
    with pytest.raises(grpc.RpcError) as err:
        create(cluster, spec)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    text = err.value.details()
    assert "500 cpu" in text and "largest UP host, host-3, has 64 cpu" in text
    assert "peloton/queue-anyway=true" in text
    stored = cluster.v0jobs.Query(job_pb2.QueryRequest(spec=job_pb2.QuerySpec()), timeout=10)
    assert not stored.results  # nothing stored


def test_v1_create_refuses_a_constraint_no_host_meets_in_words(cluster: Cluster) -> None:
    spec = service_spec(1)
    leaf = spec.default_spec.constraint.label_constraint
    spec.default_spec.constraint.type = pod_pb2.Constraint.CONSTRAINT_TYPE_LABEL
    leaf.kind = pod_pb2.LabelConstraint.LABEL_CONSTRAINT_KIND_HOST
    leaf.condition, leaf.requirement = pod_pb2.LabelConstraint.LABEL_CONSTRAINT_CONDITION_EQUAL, 1
    leaf.label.key, leaf.label.value = "zone", "mars"
    with pytest.raises(grpc.RpcError) as err:
        create(cluster, spec)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "no UP host has label zone=mars (4 hosts checked)" in err.value.details()


def test_queue_anyway_label_queues_it(cluster: Cluster) -> None:
    spec = service_spec(1, labels=(("peloton/queue-anyway", "true"),))
    spec.default_spec.containers[0].resource.cpu_limit = 500
    jid = create(cluster, spec).job_id.value
    assert jid
    pods = cluster.until(lambda: cluster.jobs.QueryPods(
        svc.QueryPodsRequest(job_id=job_id(jid)), timeout=10).pods, "the pod created")
    assert len(pods) == 1 and pods[0].status.state != pod_pb2.POD_STATE_RUNNING


def test_v1_replace_with_an_impossible_spec_is_refused_and_changes_nothing(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(2)).job_id.value
    before = cluster.jobs.GetJob(svc.GetJobRequest(job_id=job_id(jid)), timeout=10)
    spec = service_spec(2, tag="v2")
    spec.default_spec.containers[0].resource.mem_limit_mb = 10 * 1024 * 1024
    with pytest.raises(grpc.RpcError) as err:
        cluster.jobs.ReplaceJob(svc.ReplaceJobRequest(
            job_id=job_id(jid), spec=spec,
            version=version(before.job_info.status.version.value)), timeout=10)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "10 TiB memory" in err.value.details() and "64 GiB memory" in err.value.details()
    after = cluster.jobs.GetJob(svc.GetJobRequest(job_id=job_id(jid)), timeout=10)
    assert after.job_info.status.version.value == before.job_info.status.version.value


def test_v0_create_and_update_answer_invalid_config(cluster: Cluster) -> None:
    config = batch_config(1)
    config.defaultConfig.resource.gpuLimit = 2
    resp = cluster.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    assert resp.HasField("error") and "2 gpu" in resp.error.invalidConfig.message
    ok = cluster.v0jobs.Create(job_pb2.CreateRequest(config=batch_config(1)), timeout=10)
    assert not ok.HasField("error")
    bigger = batch_config(2)
    bigger.instanceConfig[1].resource.cpuLimit = 100
    bigger.instanceConfig[1].resource.memLimitMb = 32
    bigger.instanceConfig[1].command.value = "sleep 1"
    # v0 Update answers with a status, as Peloton's handler does (Create uses the body).
    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.Update(job_pb2.UpdateRequest(id=ok.jobId, config=bigger), timeout=10)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "instance 1 can never run" in err.value.details() and "100 cpu" in err.value.details()
