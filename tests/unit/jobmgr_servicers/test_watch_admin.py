"""WatchService streams (filters, cancel, overflow) and AdminService lockdown."""

from __future__ import annotations

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2 as admin
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2 as pod_svc
from peloton.api.gen.peloton.api.v1alpha.watch import watch_pb2
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as watch
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    RUNNING,
    create,
    current,
    get,
    job_id,
    pods,
    service_spec,
    wait_running,
)

KILLING, KILLED = pod_pb2.POD_STATE_KILLING, pod_pb2.POD_STATE_KILLED


def test_pod_watch_streams_changes_of_the_filtered_job_until_cancelled(cluster: Cluster) -> None:
    other = create(cluster, service_spec(1)).job_id.value
    jid = create(cluster, service_spec(2)).job_id.value
    wait_running(cluster, jid, 2)
    wait_running(cluster, other, 1)
    stream = cluster.watch.Watch(watch.WatchRequest(pod_filter=watch_pb2.PodFilter(
        job_id={"value": jid}, pod_names=[{"value": f"{jid}-1"}])), timeout=20)
    first = next(stream)
    assert first.watch_id.startswith("task_") and not first.pods
    for target in (jid, other):
        cluster.jobs.RestartJob(svc.RestartJobRequest(job_id=job_id(target),
                                                      version=current(cluster, target)),
                                timeout=10)
    seen = []
    for resp in stream:
        assert resp.watch_id == first.watch_id
        seen.extend(resp.pods)
        if any(p.status.state == RUNNING and p.status.pod_id.value.endswith("-1-2") for p in seen):
            break
    assert {p.pod_name.value for p in seen} == {f"{jid}-1"}
    cluster.watch.Cancel(watch.CancelRequest(watch_id=first.watch_id), timeout=10)
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.CANCELLED
    assert err.value.details() == f"watch cancelled: {first.watch_id}"
    with pytest.raises(grpc.RpcError) as err:
        cluster.watch.Cancel(watch.CancelRequest(watch_id=first.watch_id), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


def test_job_watch_filters_by_label(cluster: Cluster) -> None:
    stream = cluster.watch.Watch(watch.WatchRequest(stateless_job_filter=watch_pb2.StatelessJobFilter(
        labels=[{"key": "team", "value": "db"}])), timeout=20)
    watch_id = next(stream).watch_id
    assert watch_id.startswith("job_")
    create(cluster, service_spec(1))  # team=web: not watched
    db = create(cluster, service_spec(1, name="db", labels=(("team", "db"),))).job_id.value
    for resp in stream:
        assert {j.job_id.value for j in resp.stateless_jobs} == {db}
        if any(j.status.state == 3 for j in resp.stateless_jobs):  # JOB_STATE_RUNNING
            break
    stream.cancel()


def test_a_watcher_that_falls_behind_is_ended_with_aborted(cluster: Cluster) -> None:
    cluster.jm.watch.buffer_size = 3
    stream = cluster.watch.Watch(watch.WatchRequest(pod_filter=watch_pb2.PodFilter()), timeout=20)
    next(stream)
    create(cluster, service_spec(6))  # one write of six runtimes: more than the buffer at once
    with pytest.raises(grpc.RpcError) as err:
        list(stream)
    assert err.value.code() is grpc.StatusCode.ABORTED
    assert err.value.details().startswith("event overflow: task_")
    assert not cluster.jm.watch.watchers
    assert not cluster.jm.cache.listeners.task  # unsubscribed


def test_watch_needs_a_filter(cluster: Cluster) -> None:
    with pytest.raises(grpc.RpcError) as err:
        list(cluster.watch.Watch(watch.WatchRequest(), timeout=10))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_lockdown_freezes_write_or_read_apis_until_removed(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(1)).job_id.value
    resp = cluster.admin.Lockdown(admin.LockdownRequest(components=[admin.Write]), timeout=10)
    assert list(resp.successes) == [admin.Write]
    with pytest.raises(grpc.RpcError) as err:
        create(cluster)
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "All write APIs are locked down" in err.value.details()
    assert "JobService/CreateJob" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:  # every job manager service, v0 included
        cluster.v0jobs.Stop(job_pb2.StopRequest(id={"value": jid}), timeout=10)
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    get(cluster, jid)  # reads still work
    cluster.admin.RemoveLockdown(admin.RemoveLockdownRequest(components=[admin.Write]), timeout=10)
    create(cluster)
    cluster.admin.Lockdown(admin.LockdownRequest(components=[admin.Read]), timeout=10)
    for call in (lambda: get(cluster, jid),
                 lambda: next(cluster.watch.Watch(watch.WatchRequest(
                     pod_filter=watch_pb2.PodFilter()), timeout=10)),
                 lambda: cluster.v0jobs.Get(job_pb2.GetRequest(id={"value": jid}), timeout=10)):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "All read APIs are locked down" in err.value.details()
    cluster.admin.RemoveLockdown(admin.RemoveLockdownRequest(components=[admin.Read]), timeout=10)
    get(cluster, jid)


def test_goal_state_engine_lockdown(cluster: Cluster) -> None:
    locked = cluster.admin.Lockdown(admin.LockdownRequest(components=[admin.GoalStateEngine]),
                                    timeout=30)
    assert list(locked.successes) == [admin.GoalStateEngine]
    jid = create(cluster, service_spec(2)).job_id.value
    cluster.admin.RemoveLockdown(admin.RemoveLockdownRequest(
        components=[admin.GoalStateEngine]), timeout=30)
    wait_running(cluster, jid, 2)


def test_kill_lockdown_holds_every_kill_until_removed(cluster: Cluster) -> None:
    """Peloton's Kill lock (pkg/jobmgr/adminsvc, task/lifecyclemgr): kills fail with
    "kill op is locked" while it is on; the API call still records the stop."""
    jid = create(cluster, service_spec(2)).job_id.value
    running = wait_running(cluster, jid, 2)
    locked = cluster.admin.Lockdown(admin.LockdownRequest(components=[admin.Kill]), timeout=10)
    assert list(locked.successes) == [admin.Kill]
    cluster.jobs.StopJob(svc.StopJobRequest(job_id=job_id(jid), version=current(cluster, jid)),
                         timeout=10)
    pod = running[0].spec.pod_name.value
    cluster.pods.StopPod(pod_svc.StopPodRequest(pod_name={"value": pod}), timeout=10)
    assert get(cluster, jid).job_info.status.desired_state == stateless_pb2.JOB_STATE_KILLED
    cluster.until(lambda: any(p.status.state == KILLING for p in pods(cluster, jid)),
                  "a pod KILLING")
    # The job's kill action was refused (it backs off and tries again) ...
    cluster.until(lambda: cluster.jm.queue.jobs.failures(jid) > 0, "the job's kill refused")
    assert not cluster.hosts.killed  # ... and nothing reached a host
    removed = cluster.admin.RemoveLockdown(admin.RemoveLockdownRequest(components=[admin.Kill]),
                                           timeout=10)
    assert list(removed.successes) == [admin.Kill]
    # The kills refused meanwhile are sent now.
    assert {p.status.pod_id.value for p in running} <= set(cluster.hosts.killed)
    cluster.until(lambda: all(p.status.state == KILLED for p in pods(cluster, jid)),
                  "every pod killed once the lock is gone")


def test_launch_lockdown_is_accepted_and_removed(cluster: Cluster) -> None:
    # What it does is tested deterministically in tests/unit/jobmgr/test_lifecycle_lock.py.
    both = [admin.Kill, admin.Launch]
    locked = cluster.admin.Lockdown(admin.LockdownRequest(components=both), timeout=10)
    assert list(locked.successes) == both and not locked.failures
    assert cluster.jm.lifecycle.launch_locked and cluster.jm.lifecycle.kill_locked
    removed = cluster.admin.RemoveLockdown(admin.RemoveLockdownRequest(components=both),
                                           timeout=10)
    assert list(removed.successes) == both
    lifecycle = cluster.jm.lifecycle  # a new name: mypy keeps the narrowing to True of the above
    assert not lifecycle.launch_locked and not lifecycle.kill_locked


def test_api_kinds_follow_peloton_api_lock_lists() -> None:
    from peloton.jobmgr.servicers.admin import ApiLock

    kind = ApiLock.kind
    assert kind("peloton.api.v1alpha.job.stateless.svc.JobService/GetJobIDFromJobName") == "read"
    assert kind("peloton.api.v0.task.TaskManager/BrowseSandbox") == "read"
    assert kind("peloton.api.v1alpha.watch.svc.WatchService/Cancel") == "read"
    assert kind("peloton.api.v1alpha.pod.svc.PodService/DeletePodEvents") == "write"
    assert kind("peloton.api.v1alpha.job.stateless.svc.JobService/PatchJob") == "write"
    assert kind("peloton.api.v1alpha.admin.svc.AdminService/RemoveLockdown") == ""
