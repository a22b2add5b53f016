"""Job lifecycle calls that answer as Peloton's do: StartJob of a batch job, DeleteJob.

Peloton's answers: pkg/jobmgr/jobsvc/stateless/handler.go (StartJob sets the goal RUNNING
for any job; DeleteJob with `force` sets the goal DELETED), pkg/jobmgr/goalstate/job.go
and job_actions.go (JobStart: every task's goal RUNNING; a DELETED goal kills, then
deletes), pkg/jobmgr/jobsvc/handler.go (v0 Delete of a job that is not terminal).
"""

from __future__ import annotations

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.core.states import TaskState
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    create,
    current,
    get,
    job_id,
    service_spec,
    wait_running,
)
from tests.unit.jobmgr_servicers.test_v0_methods import create_batch, task_list, wait_states


def _job_state(c: Cluster, jid: str) -> str:
    resp = c.v0jobs.Get(job_pb2.GetRequest(id={"value": jid}), timeout=10)
    return str(job_pb2.JobState.Name(resp.jobInfo.runtime.state))


def test_start_job_of_a_batch_job_sets_its_goal_running_and_runs_its_tasks_again(
        cluster: Cluster) -> None:
    jid = create_batch(cluster, 2)
    wait_states(cluster, jid, {0: task_pb2.RUNNING, 1: task_pb2.RUNNING})
    for i in range(2):
        cluster.hosts.finish(f"{jid}-{i}-1")
    cluster.until(lambda: _job_state(cluster, jid) == "SUCCEEDED", "the job SUCCEEDED")

    before = current(cluster, jid)
    started = cluster.jobs.StartJob(svc.StartJobRequest(job_id=job_id(jid), version=before),
                                    timeout=10)
    config, desired, flow = before.value.split("-")
    assert started.version.value == f"{config}-{int(desired) + 1}-{flow}"
    assert get(cluster, jid).job_info.status.desired_state == stateless_pb2.JOB_STATE_RUNNING
    # JobStart: every task's goal becomes RUNNING, so both run again, on fresh runs ...
    tasks = wait_states(cluster, jid, {0: task_pb2.RUNNING, 1: task_pb2.RUNNING})
    assert {t.runtime.mesosTaskId.value for t in tasks.values()} == {f"{jid}-0-2", f"{jid}-1-2"}
    assert {t.runtime.goalState for t in tasks.values()} == {task_pb2.RUNNING}
    # ... and a run that ends is restarted, as a service's would be.
    cluster.hosts.finish(f"{jid}-0-2")
    cluster.until(lambda: task_list(cluster, jid)[0].runtime.mesosTaskId.value == f"{jid}-0-3"
                  and task_list(cluster, jid)[0].runtime.state == task_pb2.RUNNING, "run 3")


def test_force_delete_kills_a_running_job_then_deletes_it(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(2)).job_id.value
    running = wait_running(cluster, jid, 2)
    runs = [p.status.pod_id.value for p in running]
    before = current(cluster, jid)
    cluster.jobs.DeleteJob(svc.DeleteJobRequest(job_id=job_id(jid), version=before, force=True),
                           timeout=10)
    cluster.until(lambda: all(r in cluster.hosts.killed for r in runs), "its runs killed")

    def gone() -> bool:
        try:
            get(cluster, jid)
        except grpc.RpcError as exc:
            assert exc.code() is grpc.StatusCode.NOT_FOUND
            return True
        return False

    cluster.until(gone, "the job deleted")
    assert jid not in cluster.jm.cache.active_ids()


def test_force_delete_of_a_job_not_in_the_cache_still_kills_it(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(1)).job_id.value
    (pod,) = wait_running(cluster, jid, 1)
    version = current(cluster, jid)
    cluster.jm.cache.forget(jid)  # as after a restart, before anything loaded it again
    cluster.jobs.DeleteJob(svc.DeleteJobRequest(job_id=job_id(jid), version=version, force=True),
                           timeout=10)
    cluster.until(lambda: pod.status.pod_id.value in cluster.hosts.killed, "its run killed")


def test_v0_delete_of_a_running_job_changes_nothing(cluster: Cluster) -> None:
    jid = create_batch(cluster, 1)
    wait_states(cluster, jid, {0: task_pb2.RUNNING})
    cluster.until(lambda: _job_state(cluster, jid) == "RUNNING", "the job RUNNING")
    with pytest.raises(grpc.RpcError) as err:
        cluster.v0jobs.Delete(job_pb2.DeleteRequest(id={"value": jid}), timeout=10)
    assert (err.value.code(), err.value.details()) == (
        grpc.StatusCode.INTERNAL, "Job is not in a terminal state: RUNNING")
    assert task_list(cluster, jid)[0].runtime.state == task_pb2.RUNNING
    assert not cluster.hosts.killed
    assert TaskState.RUNNING  # the task ran on the fake hosts
