"""v0 UpdateService and the v0 JobManager Restart/Start/Stop workflows with instance ranges."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2 as upd
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    RUNNING,
    Releaser,
    create,
    get,
    in_flight,
    pods,
    service_spec,
    wait_running,
    wait_workflow,
)


def _v0_config(c: Cluster, jid: str, tag: str) -> job_pb2.JobConfig:
    """The job's v0 config with a new command (as `peloton update create` builds it)."""
    config: job_pb2.JobConfig = c.v0jobs.Get(job_pb2.GetRequest(id={"value": jid}),
                                             timeout=10).jobInfo.config
    config.defaultConfig.command.value = f"serve --tag {tag}"
    return config


def _create_update(c: Cluster, jid: str, tag: str, version: int, **cfg: Any) -> str:
    config = _v0_config(c, jid, tag)
    config.changeLog.version = version
    resp = c.updates.CreateUpdate(upd.CreateUpdateRequest(
        jobId={"value": jid}, jobConfig=config, updateConfig=update_pb2.UpdateConfig(**cfg)),
        timeout=10)
    return str(resp.updateID.value)


def _state(c: Cluster, update_id: str) -> str:
    resp = c.updates.GetUpdate(upd.GetUpdateRequest(updateId={"value": update_id}), timeout=10)
    return update_pb2.State.Name(resp.updateInfo.status.state)


def test_create_get_list_and_stale_version(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(3)).job_id.value
    wait_running(cluster, jid, 3)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    with pytest.raises(grpc.RpcError) as err:
        _create_update(cluster, jid, "v2", version=7)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "invalid job configuration version" in err.value.details()
    update_id = _create_update(cluster, jid, "v2", version=1, batchSize=2)
    cluster.until(lambda: _state(cluster, update_id) == "SUCCEEDED", "the update done")
    info = cluster.updates.GetUpdate(upd.GetUpdateRequest(updateId={"value": update_id}),
                                     timeout=10).updateInfo
    assert (info.jobId.value, info.configVersion, info.prevConfigVersion) == (jid, 2, 1)
    assert info.config.batchSize == 2 and info.status.numTasksDone == 3
    status = cluster.updates.GetUpdate(upd.GetUpdateRequest(updateId={"value": update_id},
                                                            statusOnly=True), timeout=10)
    assert not status.updateInfo.HasField("config") and status.updateInfo.status.numTasksDone == 3
    listed = cluster.updates.ListUpdates(upd.ListUpdatesRequest(jobID={"value": jid}), timeout=10)
    assert [u.updateId.value for u in listed.updateInfo][:1] == [update_id]
    assert len(listed.updateInfo) == 2
    one = cluster.updates.ListUpdates(upd.ListUpdatesRequest(jobID={"value": jid}, limit=1),
                                      timeout=10)
    assert len(one.updateInfo) == 1
    assert all(p.status.version.value == "2-0-0" for p in wait_running(cluster, jid, 3, 2))


def test_pause_resume_rollback_abort_by_update_id(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(3)).job_id.value
    wait_running(cluster, jid, 3)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    held = Releaser(cluster)
    update_id = _create_update(cluster, jid, "v2", version=1, batchSize=1)
    uid = {"value": update_id}
    cluster.until(lambda: in_flight(cluster, jid, 2), "the first instance in flight")
    cluster.updates.PauseUpdate(upd.PauseUpdateRequest(updateId=uid,
                                                       opaque_data={"data": "hold"}), timeout=10)
    assert _state(cluster, update_id) == "PAUSED"
    cache = cluster.updates.GetUpdateCache(upd.GetUpdateCacheRequest(updateId=uid), timeout=10)
    assert cache.state == update_pb2.PAUSED and list(cache.instancesTotal) == [0, 1, 2]
    cluster.updates.ResumeUpdate(upd.ResumeUpdateRequest(updateId=uid), timeout=10)
    assert _state(cluster, update_id) == "ROLLING_FORWARD"
    cluster.updates.RollbackUpdate(upd.RollbackUpdateRequest(updateId=uid), timeout=10)
    assert _state(cluster, update_id) == "ROLLING_BACKWARD"
    held.stop()
    cluster.until(lambda: _state(cluster, update_id) == "ROLLED_BACK", "the rollback done")
    running = wait_running(cluster, jid, 3)
    spec_of = {p.status.version.value for p in running}
    assert "2-0-0" not in spec_of  # every instance back on the old spec (a new version of it)
    commands = {p.spec.containers[0].entrypoint.value for p in pods(cluster, jid)}
    assert commands == {"serve --tag v1"}
    # The job's workflow ended: Peloton's AbortUpdate answers OK and changes nothing.
    cluster.updates.AbortUpdate(upd.AbortUpdateRequest(updateId=uid), timeout=10)
    assert _state(cluster, update_id) == "ROLLED_BACK"
    with pytest.raises(grpc.RpcError) as err:  # ours beyond Peloton: only the active update
        cluster.updates.RollbackUpdate(upd.RollbackUpdateRequest(updateId=uid), timeout=10)
    assert err.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "is not the active workflow" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        cluster.updates.GetUpdate(upd.GetUpdateRequest(), timeout=10)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_pause_acts_on_the_job_s_current_workflow_whichever_update_is_named(
        cluster: Cluster) -> None:
    """Peloton's PauseUpdate / ResumeUpdate / AbortUpdate (pkg/jobmgr/updatesvc/handler.go)
    find the named update's job and act on the job's current workflow."""
    jid = create(cluster, service_spec(3)).job_id.value
    wait_running(cluster, jid, 3)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    held = Releaser(cluster)
    first = _create_update(cluster, jid, "v2", version=1, batchSize=1)
    cluster.until(lambda: in_flight(cluster, jid, 2), "the first update under way")
    second = _create_update(cluster, jid, "v3", version=2, batchSize=1)  # supersedes the first
    cluster.until(lambda: _state(cluster, second) == "ROLLING_FORWARD", "the second one rolling")
    cluster.updates.PauseUpdate(upd.PauseUpdateRequest(updateId={"value": first}), timeout=10)
    assert _state(cluster, second) == "PAUSED"
    cluster.updates.ResumeUpdate(upd.ResumeUpdateRequest(updateId={"value": first}), timeout=10)
    assert _state(cluster, second) == "ROLLING_FORWARD"
    cluster.updates.AbortUpdate(upd.AbortUpdateRequest(updateId={"value": first}), timeout=10)
    assert _state(cluster, second) == "ABORTED"
    held.stop()


def test_v0_restart_start_stop_with_ranges_return_update_and_resource_version(
        cluster: Cluster) -> None:
    jid = create(cluster, service_spec(4)).job_id.value
    wait_running(cluster, jid, 4)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    ident = {"value": jid}
    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.Restart(job_pb2.RestartRequest(id=ident, resourceVersion=5), timeout=10)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "invalid job configuration version" in err.value.details()
    restarted = cluster.v0jobs.Restart(job_pb2.RestartRequest(
        id=ident, resourceVersion=1, ranges=[{"from": 0, "to": 2}], restartConfig={"batchSize": 1}),
        timeout=10)
    assert restarted.resourceVersion == 2 and restarted.updateID.value
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    runs = [p.status.pod_id.value.rsplit("-", 1)[1] for p in wait_running(cluster, jid, 4)]
    assert runs == ["2", "2", "1", "1"]
    stopped = cluster.v0jobs.Stop(job_pb2.StopRequest(id=ident, resourceVersion=2,
                                                      ranges=[{"from": 3, "to": 99}]), timeout=10)
    assert stopped.resourceVersion == 3
    cluster.until(lambda: [p.status.state for p in pods(cluster, jid, summary_only=True)] ==
                  [RUNNING] * 3 + [pod_pb2.POD_STATE_KILLED], "instance 3 stopped")
    started = cluster.v0jobs.Start(job_pb2.StartRequest(id=ident, resourceVersion=3), timeout=10)
    assert started.resourceVersion == 4
    wait_running(cluster, jid, 4)
    assert get(cluster, jid).workflow_info.status.type == 3  # START (unnamed in v1alpha)
