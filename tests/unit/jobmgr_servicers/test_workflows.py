"""ReplaceJob rolling in batches, pause/resume/abort, stale versions, restart, patch, diff, history."""

from __future__ import annotations

from functools import partial
from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    RUNNING,
    Releaser,
    create,
    get,
    in_flight,
    job_id,
    pods,
    service_spec,
    version,
    wait_running,
    wait_workflow,
)


def _replace(c: Cluster, jid: str, spec: stateless_pb2.JobSpec, ver: str,
             **update: Any) -> str:
    resp = c.jobs.ReplaceJob(svc.ReplaceJobRequest(
        job_id=job_id(jid), version=version(ver), spec=spec,
        update_spec=stateless_pb2.UpdateSpec(**update)), timeout=10)
    return str(resp.version.value)


def _moved(c: Cluster, jid: str, batch: set[int]) -> bool:
    return not batch & set(in_flight(c, jid, 2))


def _ready(c: Cluster, n: int = 6) -> tuple[str, str]:
    resp = create(c, service_spec(n))
    wait_running(c, resp.job_id.value, n)
    wait_workflow(c, resp.job_id.value, "WORKFLOW_STATE_SUCCEEDED")
    return resp.job_id.value, str(get(c, resp.job_id.value).job_info.status.version.value)


def test_replace_rolls_in_batches_never_more_than_batch_size_in_flight(cluster: Cluster) -> None:
    jid, ver = _ready(cluster)
    held = Releaser(cluster)
    new_version = _replace(cluster, jid, service_spec(6, tag="v2"), ver, batch_size=2)
    assert new_version == "2-1-2"
    done: set[int] = set()
    while len(done) < 6:
        flight = cluster.until(lambda: in_flight(cluster, jid, 2), "a batch in flight")
        assert len(flight) <= 2, flight
        held.release(count=len(flight))
        assert len(in_flight(cluster, jid, 2)) <= 2
        cluster.until(partial(_moved, cluster, jid, set(flight)), "the batch running")
        done.update(flight)
    resp = wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    status = resp.workflow_info.status
    assert status.num_instances_completed == 6 and status.num_instances_remaining == 0
    assert status.version.value.startswith("2-")
    assert [(getattr(r, "from"), r.to) for r in resp.workflow_info.instances_updated] == [(0, 5)]
    assert all(p.status.version.value == "2-0-0" for p in pods(cluster, jid))


def test_stale_entity_version_is_aborted(cluster: Cluster) -> None:
    jid, ver = _ready(cluster, 2)
    _replace(cluster, jid, service_spec(2, tag="v2"), ver)
    with pytest.raises(grpc.RpcError) as err:
        _replace(cluster, jid, service_spec(2, tag="v3"), ver)
    assert err.value.code() is grpc.StatusCode.ABORTED
    assert "unexpected entity version" in err.value.details()


def test_pause_resume_abort_replace_opaque_data(cluster: Cluster) -> None:
    jid, ver = _ready(cluster, 4)
    held = Releaser(cluster)
    ver = _replace(cluster, jid, service_spec(4, tag="v2"), ver, batch_size=1)
    first = cluster.until(lambda: in_flight(cluster, jid, 2), "the first instance in flight")
    paused = cluster.jobs.PauseJobWorkflow(svc.PauseJobWorkflowRequest(
        job_id=job_id(jid), version=version(ver), opaque_data={"data": "paused"}), timeout=10)
    ver = paused.version.value
    held.release(count=1)
    cluster.until(lambda: not in_flight(cluster, jid, 2), "the first instance updated")
    info = get(cluster, jid).workflow_info
    assert info.status.state == stateless_pb2.WORKFLOW_STATE_PAUSED
    assert info.opaque_data.data == "paused"
    assert [i for i, p in enumerate(pods(cluster, jid)) if p.status.version.value == "2-0-0"] == first
    resumed = cluster.jobs.ResumeJobWorkflow(svc.ResumeJobWorkflowRequest(
        job_id=job_id(jid), version=version(ver)), timeout=10)
    assert get(cluster, jid).workflow_info.opaque_data.data == "paused"  # kept when not given
    cluster.until(lambda: in_flight(cluster, jid, 2), "the next instance in flight")
    aborted = cluster.jobs.AbortJobWorkflow(svc.AbortJobWorkflowRequest(
        job_id=job_id(jid), version=resumed.version, opaque_data={"data": "stop"}), timeout=10)
    assert aborted.version.value != resumed.version.value
    info = get(cluster, jid).workflow_info
    assert info.status.state == stateless_pb2.WORKFLOW_STATE_ABORTED
    assert info.opaque_data.data == "stop"
    held.stop()

    def stable() -> list[str] | None:
        running = [p.status.version.value for p in pods(cluster, jid) if p.status.state == RUNNING]
        return running if len(running) == 4 and not in_flight(cluster, jid, 2) else None

    versions = cluster.until(stable, "a stable mixed job")
    assert set(versions) == {"1-0-0", "2-0-0"}  # abort leaves the job mixed but stable
    # A workflow that ended takes no more changes; Peloton answers OK (cached/update.go
    # writeProgress ignores it) and so do we, leaving it ABORTED.
    again = cluster.jobs.PauseJobWorkflow(svc.PauseJobWorkflowRequest(
        job_id=job_id(jid), version=aborted.version), timeout=10)
    assert again.version.value == aborted.version.value
    assert get(cluster, jid).workflow_info.status.state == stateless_pb2.WORKFLOW_STATE_ABORTED


def test_restart_job_half_open_ranges(cluster: Cluster) -> None:
    jid, ver = _ready(cluster, 4)
    resp = cluster.jobs.RestartJob(svc.RestartJobRequest(
        job_id=job_id(jid), version=version(ver),
        restart_spec={"batch_size": 1, "ranges": [{"from": 1, "to": 3}]}), timeout=10)
    assert resp.version.value == "2-1-2"
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    running = wait_running(cluster, jid, 4)
    assert [p.status.pod_id.value.rsplit("-", 1)[1] for p in running] == ["1", "2", "2", "1"]
    assert [p.status.version.value for p in running] == ["1-0-0", "2-0-0", "2-0-0", "1-0-0"]
    info = get(cluster, jid).workflow_info
    assert info.status.type == stateless_pb2.WORKFLOW_TYPE_RESTART
    assert [(getattr(r, "from"), r.to) for r in info.restart_spec.ranges] == [(1, 2)]


def test_patch_job_replaces_set_fields_and_rolls(cluster: Cluster) -> None:
    jid, ver = _ready(cluster, 2)
    patch = stateless_pb2.JobSpec(instance_count=4, description="patched")
    cluster.jobs.PatchJob(svc.PatchJobRequest(job_id=job_id(jid), version=version(ver),
                                              spec=patch), timeout=10)
    wait_running(cluster, jid, 4)
    spec = get(cluster, jid).job_info.spec
    assert spec.instance_count == 4 and spec.description == "patched"
    assert spec.name == "www/prod/web" and spec.default_spec.containers[0].name == "app"
    assert [(getattr(r, "from"), r.to) for r in get(cluster, jid).workflow_info.instances_added] \
        == [(2, 3)]


def test_replace_diff_and_workflow_history(cluster: Cluster) -> None:
    jid, ver = _ready(cluster, 3)
    spec = service_spec(4)
    spec.instance_spec[1].containers.add(name="app").entrypoint.value = "serve --tag special"
    diff = cluster.jobs.GetReplaceJobDiff(svc.GetReplaceJobDiffRequest(
        job_id=job_id(jid), version=version(ver), spec=spec), timeout=10)

    def ranges(rs: object) -> list[tuple[int, int]]:
        return [(getattr(r, "from"), r.to) for r in rs]  # type: ignore[attr-defined]

    assert ranges(diff.instances_added) == [(3, 3)] and ranges(diff.instances_updated) == [(1, 1)]
    assert ranges(diff.instances_unchanged) == [(0, 0), (2, 2)] and not diff.instances_removed
    with pytest.raises(grpc.RpcError) as err:
        cluster.jobs.GetReplaceJobDiff(svc.GetReplaceJobDiffRequest(
            job_id=job_id(jid), version=version("7-7-7"), spec=spec), timeout=10)
    assert err.value.code() is grpc.StatusCode.ABORTED
    _replace(cluster, jid, spec, ver)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    flows = cluster.jobs.ListJobWorkflows(svc.ListJobWorkflowsRequest(
        job_id=job_id(jid), instance_events=True), timeout=10).workflow_infos
    assert [f.status.version.value.split("-")[0] for f in flows] == ["2", "1"]  # newest first
    assert {e.instance_id for e in flows[0].instance_events} == {1, 3}
    limited = cluster.jobs.ListJobWorkflows(svc.ListJobWorkflowsRequest(
        job_id=job_id(jid), updates_limit=1), timeout=10).workflow_infos
    assert len(limited) == 1 and not limited[0].instance_events
    events = cluster.jobs.GetWorkflowEvents(svc.GetWorkflowEventsRequest(
        job_id=job_id(jid), instance_id=3), timeout=10).events
    assert [stateless_pb2.WorkflowState.Name(e.state) for e in events][:1] == \
        ["WORKFLOW_STATE_SUCCEEDED"]


def test_failing_update_rolls_back_when_asked(cluster: Cluster) -> None:
    from peloton.core.states import TaskState

    jid, ver = _ready(cluster, 3)
    held = Releaser(cluster)
    _replace(cluster, jid, service_spec(3, tag="broken"), ver, batch_size=1,
             max_instance_retries=1, max_tolerable_instance_failures=1, rollback_on_failure=True)
    held.release(TaskState.FAILED, count=1)  # the first new run exits 1
    wait_workflow(cluster, jid, "WORKFLOW_STATE_ROLLING_BACKWARD")
    held.stop()
    resp = wait_workflow(cluster, jid, "WORKFLOW_STATE_ROLLED_BACK")
    assert resp.workflow_info.status.num_instances_failed == 0  # counts restart for the rollback
    wait_running(cluster, jid, 3)
    assert {p.spec.containers[0].entrypoint.value for p in pods(cluster, jid)} == {"serve --tag v1"}


def test_create_and_replace_may_start_paused(cluster: Cluster) -> None:
    resp = create(cluster, service_spec(2), create_spec={"start_paused": True, "batch_size": 1})
    jid = resp.job_id.value
    assert get(cluster, jid).workflow_info.status.state == stateless_pb2.WORKFLOW_STATE_PAUSED
    assert pods(cluster, jid) == []  # nothing is created before the workflow is resumed
    cluster.jobs.ResumeJobWorkflow(svc.ResumeJobWorkflowRequest(
        job_id=job_id(jid), version=resp.version), timeout=10)
    wait_running(cluster, jid, 2)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    ver = get(cluster, jid).job_info.status.version.value
    _replace(cluster, jid, service_spec(2, tag="v2"), ver, start_paused=True)
    info = get(cluster, jid).workflow_info
    assert info.status.state == stateless_pb2.WORKFLOW_STATE_PAUSED
    assert info.update_spec.start_paused and not in_flight(cluster, jid, 2)
