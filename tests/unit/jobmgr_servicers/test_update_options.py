"""Our update options over real gRPC: set with the call that starts a workflow (request
metadata `pelotonpy-update-options-bin`), read back with WorkflowOptionsService; bad
options are INVALID_ARGUMENT naming the field and change nothing; calls without them are
Peloton's."""

from __future__ import annotations

import grpc
import pytest

from peloton.api.convert.update_options import METADATA_KEY
from peloton.api.convert.v0_job import job_config_to_v0
from peloton.api.gen.peloton.api.v0.update import update_pb2 as v0_update
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.pelotonpy.api.update import update_pb2 as pb
from peloton.api.gen.pelotonpy.api.update import update_pb2_grpc
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    create,
    get,
    job_id,
    service_spec,
    version,
    wait_running,
    wait_workflow,
)


def meta(**fields: object) -> tuple[tuple[str, bytes], ...]:
    return ((METADATA_KEY, pb.UpdateOptions(**fields).SerializeToString()),)  # type: ignore[arg-type]


def options(c: Cluster, jid: str) -> pb.GetWorkflowOptionsResponse:
    stub = update_pb2_grpc.WorkflowOptionsServiceStub(c.channel)
    resp: pb.GetWorkflowOptionsResponse = stub.GetWorkflowOptions(
        pb.GetWorkflowOptionsRequest(job_id=jid), timeout=10)
    return resp


def replace(c: Cluster, jid: str, metadata: tuple[tuple[str, bytes], ...] = ()) -> None:
    c.jobs.ReplaceJob(svc.ReplaceJobRequest(
        job_id=job_id(jid), version=version(get(c, jid).job_info.status.version.value),
        spec=service_spec(3, tag="v2"), update_spec=stateless_pb2.UpdateSpec(batch_size=1)),
        timeout=10, metadata=metadata)


def test_replace_job_carries_watch_time_and_strategy(cluster: Cluster) -> None:
    jid = create(cluster).job_id.value
    wait_running(cluster, jid, 3)
    replace(cluster, jid, meta(strategy=pb.STRATEGY_VAR_BATCH, group_sizes=[1, 2],
                               autopause_after_batch=True, watch_time_ms=30_000))
    got = options(cluster, jid)
    assert got.options.strategy == pb.STRATEGY_VAR_BATCH
    assert list(got.options.group_sizes) == [1, 2] and got.options.autopause_after_batch
    assert got.options.watch_time_ms == 30_000
    watched = cluster.until(lambda: list(options(cluster, jid).watching), "a watched instance")
    assert watched[0].instance_id == 0 and 0 < watched[0].remaining_ms <= 30_000
    # Peloton's own answer is unchanged: its UpdateSpec, as sent.
    assert get(cluster, jid).workflow_info.update_spec.batch_size == 1


def test_without_options_a_workflow_rolls_as_on_peloton(cluster: Cluster) -> None:
    jid = create(cluster).job_id.value
    wait_running(cluster, jid, 3)
    replace(cluster, jid)
    got = options(cluster, jid)
    assert got.options == pb.UpdateOptions() and not got.watching and not got.auto_paused


@pytest.mark.parametrize("fields, field", [
    ({"watch_time_ms": -1}, "watch_time_ms"),
    ({"strategy": pb.STRATEGY_VAR_BATCH}, "group_sizes"),
    ({"strategy": pb.STRATEGY_VAR_BATCH, "group_sizes": [2, 0]}, "group_sizes[1]"),
    ({"autopause_after_batch": True}, "autopause_after_batch"),
    ({"group_sizes": [1]}, "group_sizes"),
])
def test_bad_options_are_refused_naming_the_field_and_change_nothing(
        cluster: Cluster, fields: dict[str, object], field: str) -> None:
    jid = create(cluster).job_id.value
    wait_running(cluster, jid, 3)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    before = get(cluster, jid)
    with pytest.raises(grpc.RpcError) as err:
        replace(cluster, jid, meta(**fields))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (err.value.details() or "")
    after = get(cluster, jid)
    assert after.job_info.status.version == before.job_info.status.version
    assert after.workflow_info.status == before.workflow_info.status


def test_create_job_and_v0_create_update_carry_options(cluster: Cluster) -> None:
    resp = cluster.jobs.CreateJob(svc.CreateJobRequest(
        spec=service_spec(2), create_spec=stateless_pb2.CreateSpec(batch_size=1)),
        timeout=10, metadata=meta(watch_time_ms=1500))
    jid = resp.job_id.value
    assert options(cluster, jid).options.watch_time_ms == 1500
    wait_running(cluster, jid, 2)
    cluster.until(lambda: stateless_pb2.WorkflowState.Name(
        get(cluster, jid).workflow_info.status.state) == "WORKFLOW_STATE_SUCCEEDED",
        "the create workflow done after its watch time")
    config = job_config_to_v0(cluster.jm.cache.track(jid).spec)
    config.instanceCount = 3
    cluster.updates.CreateUpdate(update_svc_pb2.CreateUpdateRequest(
        jobId={"value": jid}, jobConfig=config, updateConfig=v0_update.UpdateConfig(batchSize=1)),
        timeout=10, metadata=meta(strategy=pb.STRATEGY_BATCH, watch_time_ms=2000))
    got = options(cluster, jid).options
    assert got.strategy == pb.STRATEGY_BATCH and got.watch_time_ms == 2000
