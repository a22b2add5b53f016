"""StartJob / StopJob / DeleteJob and the PodService."""

from __future__ import annotations

from functools import partial

import grpc
import pytest

from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2 as pod_svc
from peloton.core.model.ids import TaskId
from tests.fakes.resmgr import WAITING
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    RUNNING,
    create,
    current,
    get,
    job_id,
    pods,
    service_spec,
    version,
    wait_running,
)

KILLED = pod_pb2.POD_STATE_KILLED


def _name(jid: str, inst: int) -> dict[str, str]:
    return {"value": f"{jid}-{inst}"}


def _states(c: Cluster, jid: str) -> list[int]:
    return [p.status.state for p in pods(c, jid, summary_only=True)]


def _job_state(c: Cluster, jid: str, state: int) -> svc.GetJobResponse:
    return c.until(lambda: (lambda r: r if r.job_info.status.state == state else None)(
        get(c, jid)), f"job {jid} in {stateless_pb2.JobState.Name(state)}")


def test_stop_then_start_job_with_entity_versions(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(2)).job_id.value
    wait_running(cluster, jid, 2)
    ver = get(cluster, jid).job_info.status.version.value
    with pytest.raises(grpc.RpcError) as err:
        cluster.jobs.StopJob(svc.StopJobRequest(job_id=job_id(jid), version=version("1-9-9")),
                             timeout=10)
    assert err.value.code() is grpc.StatusCode.ABORTED
    assert "unexpected entity version" in err.value.details()
    stopped = cluster.jobs.StopJob(svc.StopJobRequest(job_id=job_id(jid), version=version(ver)),
                                   timeout=10)
    config, desired, flow = ver.split("-")
    assert stopped.version.value == f"{config}-{int(desired) + 1}-{flow}"
    resp = _job_state(cluster, jid, stateless_pb2.JOB_STATE_KILLED)
    assert resp.job_info.status.desired_state == stateless_pb2.JOB_STATE_KILLED
    assert _states(cluster, jid) == [KILLED, KILLED]
    started = cluster.jobs.StartJob(svc.StartJobRequest(job_id=job_id(jid),
                                                        version=stopped.version), timeout=10)
    assert started.version.value == f"{config}-{int(desired) + 2}-{flow}"
    running = wait_running(cluster, jid, 2)
    assert all(p.status.pod_id.value.endswith("-2") for p in running)  # fresh runs


def test_delete_job_needs_a_stopped_job_or_force(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(1)).job_id.value
    wait_running(cluster, jid, 1)
    with pytest.raises(grpc.RpcError) as err:
        cluster.jobs.DeleteJob(svc.DeleteJobRequest(job_id=job_id(jid),
                                                    version=current(cluster, jid)), timeout=10)
    assert err.value.code() is grpc.StatusCode.ABORTED
    assert err.value.details().startswith("job is not stopped")
    cluster.jobs.StopJob(svc.StopJobRequest(job_id=job_id(jid), version=current(cluster, jid)),
                         timeout=10)
    _job_state(cluster, jid, stateless_pb2.JOB_STATE_KILLED)
    cluster.jobs.DeleteJob(svc.DeleteJobRequest(job_id=job_id(jid),
                                                version=current(cluster, jid)), timeout=10)
    with pytest.raises(grpc.RpcError) as err:
        get(cluster, jid)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


def test_stop_start_restart_pod(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(3)).job_id.value
    wait_running(cluster, jid, 3)
    cluster.pods.StopPod(pod_svc.StopPodRequest(pod_name=_name(jid, 1)), timeout=10)
    cluster.until(lambda: _states(cluster, jid) == [RUNNING, KILLED, RUNNING], "pod 1 killed")
    assert get(cluster, jid).job_info.status.desired_state == stateless_pb2.JOB_STATE_RUNNING
    cluster.pods.StartPod(pod_svc.StartPodRequest(pod_name=_name(jid, 1)), timeout=10)
    wait_running(cluster, jid, 3)
    cluster.pods.RestartPod(pod_svc.RestartPodRequest(pod_name=_name(jid, 0)), timeout=10)
    cluster.until(lambda: pods(cluster, jid)[0].status.pod_id.value == f"{jid}-0-2"
                  and _states(cluster, jid)[0] == RUNNING, "pod 0 on its second run")
    with pytest.raises(grpc.RpcError) as err:
        cluster.pods.StopPod(pod_svc.StopPodRequest(pod_name={"value": "nope-1"}), timeout=10)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "invalid pelotonTaskID nope-1"  # Peloton's text


def _on_run(c: Cluster, pod_id: str) -> bool:
    status = pods(c, pod_id.rsplit("-", 2)[0])[0].status
    return bool(status.pod_id.value == pod_id and status.state == RUNNING)


def test_get_pod_with_previous_runs_and_events(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(1)).job_id.value
    wait_running(cluster, jid, 1)
    for run in (2, 3):
        cluster.pods.RestartPod(pod_svc.RestartPodRequest(pod_name=_name(jid, 0)), timeout=10)
        cluster.until(partial(_on_run, cluster, f"{jid}-0-{run}"), f"run {run} running")
    full = cluster.pods.GetPod(pod_svc.GetPodRequest(pod_name=_name(jid, 0)), timeout=10)
    assert full.current.status.pod_id.value == f"{jid}-0-3"
    assert full.current.spec.containers[0].name == "app"
    assert [p.status.pod_id.value for p in full.previous] == [f"{jid}-0-2", f"{jid}-0-1"]
    assert full.previous[0].status.state == KILLED and full.previous[0].spec.pod_name.value
    assert full.previous[0].status.prev_pod_id.value == f"{jid}-0-1"
    two = cluster.pods.GetPod(pod_svc.GetPodRequest(pod_name=_name(jid, 0), limit=2,
                                                    status_only=True), timeout=10)
    assert len(two.previous) == 1 and not two.current.HasField("spec")
    one = cluster.pods.GetPod(pod_svc.GetPodRequest(pod_name=_name(jid, 0), limit=1), timeout=10)
    assert not one.previous
    latest = cluster.pods.GetPodEvents(pod_svc.GetPodEventsRequest(pod_name=_name(jid, 0)),
                                       timeout=10).events
    assert latest and {e.pod_id.value for e in latest} == {f"{jid}-0-3"}
    assert latest[0].actual_state == "POD_STATE_RUNNING"
    first = cluster.pods.GetPodEvents(pod_svc.GetPodEventsRequest(
        pod_name=_name(jid, 0), pod_id={"value": f"{jid}-0-1"}), timeout=10).events
    assert {e.pod_id.value for e in first} == {f"{jid}-0-1"}
    cluster.pods.DeletePodEvents(pod_svc.DeletePodEventsRequest(
        pod_name=_name(jid, 0), pod_id={"value": f"{jid}-0-1"}), timeout=10)
    assert not cluster.pods.GetPodEvents(pod_svc.GetPodEventsRequest(
        pod_name=_name(jid, 0), pod_id={"value": f"{jid}-0-1"}), timeout=10).events


def test_pod_cache_refresh_and_pending_reason(cluster: Cluster) -> None:
    cluster.rm.auto_place = False
    jid = create(cluster, service_spec(2)).job_id.value
    task = TaskId(jid, 1)
    cluster.until(lambda: task in cluster.rm.queued, "pod 1 queued")
    cluster.rm.reasons[task] = "0 of 4 hosts fit: cpu"
    pending = pods(cluster, jid, spec=pod_pb2.QuerySpec(pod_states=[pod_pb2.POD_STATE_PENDING]))
    reasons = {p.spec.pod_name.value: (p.status.reason, p.status.message) for p in pending}
    assert reasons[f"{jid}-1"] == ("0 of 4 hosts fit: cpu", "0 of 4 hosts fit: cpu")
    assert reasons[f"{jid}-0"][0] == WAITING
    cache = cluster.pods.GetPodCache(pod_svc.GetPodCacheRequest(pod_name=_name(jid, 1)), timeout=10)
    assert cache.status.state == pod_pb2.POD_STATE_PENDING
    assert [(lb.key, lb.value) for lb in cache.labels] == [("tier", "web")]
    cluster.pods.RefreshPod(pod_svc.RefreshPodRequest(pod_name=_name(jid, 1)), timeout=10)
    with pytest.raises(grpc.RpcError) as err:
        cluster.pods.BrowsePodSandbox(pod_svc.BrowsePodSandboxRequest(pod_name=_name(jid, 1)),
                                      timeout=10)
    assert (err.value.code(), err.value.details()) == (grpc.StatusCode.ABORTED,
                                                       "pod has not been run")  # as Peloton
    cluster.rm.auto_place = True
    wait_running(cluster, jid, 2)
    cache_job = cluster.jobs.GetJobCache(svc.GetJobCacheRequest(job_id=job_id(jid)), timeout=10)
    assert cache_job.spec.instance_count == 2 and cache_job.status.version.value
