"""v0 JobManager Update/Refresh/GetActiveJobs/Delete and TaskManager Start/Query/Refresh/
GetCache/DeletePodEvents, through the real servicers over gRPC with fake host and resource
managers (see conftest.py)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2, task_pb2_grpc
from peloton.core.states import TaskState
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import POOL

RUNNING = task_pb2.RUNNING


def batch_config(instances: int) -> job_pb2.JobConfig:
    """A small v0 batch job in the fake's one pool."""
    config = job_pb2.JobConfig(name="batch/v0", owner="alice", type=job_pb2.BATCH,
                               instanceCount=instances)
    config.respoolID.value = POOL
    res = config.defaultConfig.resource
    res.cpuLimit, res.memLimitMb, res.diskLimitMb = 0.5, 32, 10
    config.defaultConfig.command.value = "sleep 600"
    return config


def _id(jid: str) -> dict[str, str]:
    return {"value": jid}


def create_batch(c: Cluster, instances: int) -> str:
    resp = c.v0jobs.Create(job_pb2.CreateRequest(config=batch_config(instances)), timeout=10)
    assert not resp.HasField("error"), resp.error
    jid = str(resp.jobId.value)
    # Tasks are created by the job's goal-state engine after the reply, as in Peloton.
    c.until(lambda: not tasks_stub(c).List(task_pb2.ListRequest(jobId=_id(jid)),
                                           timeout=10).HasField("notFound"),
            f"tasks of {jid} created")
    return jid


def tasks_stub(c: Cluster) -> Any:
    return task_pb2_grpc.TaskManagerStub(c.channel)


def task_list(c: Cluster, jid: str) -> dict[int, Any]:
    """instance -> v0 TaskInfo of every task of the job."""
    resp = tasks_stub(c).List(task_pb2.ListRequest(jobId=_id(jid)), timeout=10)
    assert not resp.HasField("notFound"), resp.notFound
    return dict(resp.result.value)


def wait_states(c: Cluster, jid: str, want: dict[int, int]) -> dict[int, Any]:
    """Wait until each listed instance is in its v0 state; returns the task list."""
    def probe() -> dict[int, Any] | None:
        tasks = task_list(c, jid)
        ok = all(i in tasks and tasks[i].runtime.state == s for i, s in want.items())
        return tasks if ok else None

    return c.until(probe, f"tasks of {jid} in {want}")


def run_of(info: Any) -> str:
    """The run id (job-instance-run) of a TaskInfo's current run."""
    return str(info.runtime.mesosTaskId.value)


def test_update_grows_a_batch_job_and_refuses_to_shrink_it(cluster: Cluster) -> None:
    jid = create_batch(cluster, 2)
    wait_states(cluster, jid, {0: RUNNING, 1: RUNNING})
    assert len(cluster.hosts.runs()) == 2

    resp = cluster.v0jobs.Update(job_pb2.UpdateRequest(id=_id(jid), config=batch_config(4)),
                                 timeout=10)
    assert not resp.HasField("error"), resp.error
    assert resp.id.value == jid and resp.message == "added 2 instances"  # Peloton's text
    tasks = wait_states(cluster, jid, {i: RUNNING for i in range(4)})
    assert sorted(tasks) == [0, 1, 2, 3]
    # The new instances were placed and launched on hosts; the old ones were left alone.
    runs = cluster.hosts.runs()
    assert {run_of(tasks[i]) for i in range(4)} == set(runs)
    assert [run_of(tasks[i]) for i in range(4)] == [f"{jid}-{i}-1" for i in range(4)]
    assert all(tasks[i].runtime.host == runs[run_of(tasks[i])] for i in range(4))
    assert [tasks[i].runtime.configVersion for i in (0, 1)] == [1, 1]
    assert [tasks[i].runtime.configVersion for i in (2, 3)] == [2, 2]
    info = cluster.v0jobs.Get(job_pb2.GetRequest(id=_id(jid)), timeout=10).jobInfo
    assert info.config.instanceCount == 4

    # Peloton answers a bad update with an INVALID_ARGUMENT status, not in the body.
    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.Update(job_pb2.UpdateRequest(id=_id(jid), config=batch_config(3)),
                              timeout=10)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "may only grow" in err.value.details() and "3" in err.value.details()
    after = cluster.v0jobs.Get(job_pb2.GetRequest(id=_id(jid)), timeout=10).jobInfo
    assert after.config.instanceCount == 4 and len(task_list(cluster, jid)) == 4

    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.Update(job_pb2.UpdateRequest(
            id=_id("6c5b6d6e-1f0a-4c47-9a43-2b0f3c9f0a11"), config=batch_config(5)), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


def test_active_jobs_refresh_and_delete(cluster: Cluster) -> None:
    jid = create_batch(cluster, 2)
    other = create_batch(cluster, 1)
    tasks = wait_states(cluster, jid, {0: RUNNING, 1: RUNNING})
    wait_states(cluster, other, {0: RUNNING})

    active = cluster.v0jobs.GetActiveJobs(job_pb2.GetActiveJobsRequest(), timeout=10)
    assert {i.value for i in active.ids} == {jid, other}

    # Refresh loads a job that is not cached back from storage.
    cluster.jm.cache.forget(jid)
    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.GetCache(job_pb2.GetCacheRequest(id=_id(jid)), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    cluster.v0jobs.Refresh(job_pb2.RefreshRequest(id=_id(jid)), timeout=10)
    cached = cluster.v0jobs.GetCache(job_pb2.GetCacheRequest(id=_id(jid)), timeout=10)
    assert cached.config.instanceCount == 2 and cached.config.name == "batch/v0"

    # A running job cannot be deleted; once it succeeded it leaves the active list and can.
    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.Delete(job_pb2.DeleteRequest(id=_id(jid)), timeout=10)
    assert err.value.code() is grpc.StatusCode.INTERNAL    # as Peloton answers it
    assert err.value.details() == "Job is not in a terminal state: RUNNING"
    for i in (0, 1):
        cluster.hosts.finish(run_of(tasks[i]))

    def inactive() -> bool:
        ids = cluster.v0jobs.GetActiveJobs(job_pb2.GetActiveJobsRequest(), timeout=10).ids
        return {i.value for i in ids} == {other}

    cluster.until(inactive, f"{jid} to leave the active jobs")
    state = cluster.v0jobs.Get(job_pb2.GetRequest(id=_id(jid)), timeout=10).jobInfo.runtime.state
    assert job_pb2.JobState.Name(state) == "SUCCEEDED"
    deleted = cluster.v0jobs.Delete(job_pb2.DeleteRequest(id=_id(jid)), timeout=10)
    assert not deleted.HasField("error")
    gone = cluster.v0jobs.Get(job_pb2.GetRequest(id=_id(jid)), timeout=10)
    assert gone.error.HasField("getRuntimeFail") and gone.error.getRuntimeFail.id.value == jid
    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.Delete(job_pb2.DeleteRequest(id=_id(jid)), timeout=10)
    assert (err.value.code(), err.value.details()) == (grpc.StatusCode.NOT_FOUND, "job not found")


def test_task_start_query_refresh_cache_and_pod_events(cluster: Cluster) -> None:
    stub = tasks_stub(cluster)
    jid = create_batch(cluster, 3)
    wait_states(cluster, jid, {i: RUNNING for i in range(3)})

    stopped = stub.Stop(task_pb2.StopRequest(jobId=_id(jid), ranges=[{"from": 0, "to": 1}]),
                        timeout=10)
    assert list(stopped.stoppedInstanceIds) == [0]
    wait_states(cluster, jid, {0: task_pb2.KILLED, 1: RUNNING, 2: RUNNING})

    # Query filters by state (and pages); the killed one is not RUNNING.
    query = stub.Query(task_pb2.QueryRequest(jobId=_id(jid), spec={"taskStates": [RUNNING]}),
                       timeout=10)
    assert sorted(r.instanceId for r in query.records) == [1, 2]
    assert query.pagination.total == 2
    killed = stub.Query(task_pb2.QueryRequest(jobId=_id(jid),
                                              spec={"taskStates": [task_pb2.KILLED]}), timeout=10)
    assert [r.instanceId for r in killed.records] == [0]

    # Start gives the stopped task a new run, which runs again; a running one is not started.
    started = stub.Start(task_pb2.StartRequest(jobId=_id(jid), ranges=[{"from": 0, "to": 2}]),
                         timeout=10)
    assert not started.HasField("error") and list(started.startedInstanceIds) == [0]
    tasks = wait_states(cluster, jid, {0: RUNNING})
    assert run_of(tasks[0]) == f"{jid}-0-2"
    assert f"{jid}-0-1" in cluster.hosts.killed
    assert f"{jid}-0-2" in cluster.hosts.runs()

    # GetCache shows the cached runtime; Refresh reloads a dropped job into the cache.
    cache = stub.GetCache(task_pb2.GetCacheRequest(jobId=_id(jid), instanceId=0), timeout=10)
    assert cache.runtime.state == RUNNING and cache.runtime.mesosTaskId.value == f"{jid}-0-2"
    assert cache.runtime.host == tasks[0].runtime.host
    cluster.jm.cache.forget(jid)
    with pytest.raises(grpc.RpcError) as err:
        stub.GetCache(task_pb2.GetCacheRequest(jobId=_id(jid), instanceId=1), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    stub.Refresh(task_pb2.RefreshRequest(jobId=_id(jid)), timeout=10)
    cache = stub.GetCache(task_pb2.GetCacheRequest(jobId=_id(jid), instanceId=1), timeout=10)
    assert cache.runtime.state == RUNNING and cache.runtime.mesosTaskId.value == f"{jid}-1-1"

    # Pod events cover both runs of instance 0; deleting up to run 1 leaves only run 2's.
    def events() -> list[Any]:
        resp = stub.GetPodEvents(task_pb2.GetPodEventsRequest(jobId=_id(jid), instanceId=0),
                                 timeout=10)
        return list(resp.result)

    before = {e.taskId.value for e in events()}
    assert before == {f"{jid}-0-1", f"{jid}-0-2"}
    stub.DeletePodEvents(task_pb2.DeletePodEventsRequest(jobId=_id(jid), instanceId=0, runId=1),
                         timeout=10)
    after = events()
    assert after and {e.taskId.value for e in after} == {f"{jid}-0-2"}
    assert TaskState.RUNNING.value in {e.actualState for e in after}
