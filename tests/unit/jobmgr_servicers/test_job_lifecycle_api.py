"""Killed and stopped service jobs through v1alpha and v0, with Peloton's answers (issue 12
item 2).

Peloton (pkg/jobmgr/jobsvc/stateless/handler.go, cached/job.go): ReplaceJob and PatchJob
accept a new name and run the update (validateJobConfigUpdate checks only type and pool);
RestartJob of a KILLED job sets its goal RUNNING and runs every pod again; StartJob sets
the goal RUNNING with the desired state version one up; ReplaceJob with start_pods while
the job is being killed is ABORTED; every write answers the job's new entity version
`<config>-<desired state>-<workflow>`.  v0: Stop, Start and Restart are workflows;
Start and Restart run the pods a Stop stopped (Peloton's start and restart strategies
set every pod's goal RUNNING); an update of a killed job succeeds and leaves it killed.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from peloton.api.convert.v0_job import job_config_to_v0
from peloton.api.gen.peloton.api.v0 import peloton_pb2 as v0_peloton
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.update import update_pb2 as v0_update
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import (
    RUNNING,
    create,
    get,
    job_id,
    pods,
    service_spec,
    version,
    wait_running,
    wait_workflow,
)

KILLED = stateless_pb2.JOB_STATE_KILLED


def current(c: Cluster, jid: str) -> str:
    return str(get(c, jid).job_info.status.version.value)


def stopped(c: Cluster, count: int = 2) -> str:
    jid = create(c, service_spec(count)).job_id.value
    wait_running(c, jid, count)
    wait_workflow(c, jid, "WORKFLOW_STATE_SUCCEEDED")
    c.jobs.StopJob(svc.StopJobRequest(job_id=job_id(jid), version=version(current(c, jid))),
                   timeout=10)
    c.until(lambda: get(c, jid).job_info.status.state == KILLED, "the job KILLED")
    return jid


def test_replace_with_a_new_name_is_accepted_and_runs(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(2)).job_id.value
    wait_running(cluster, jid, 2)
    before = current(cluster, jid)
    resp = cluster.jobs.ReplaceJob(svc.ReplaceJobRequest(
        job_id=job_id(jid), version=version(before), spec=service_spec(2, tag="v2",
                                                                       name="www/prod/renamed"),
        update_spec=stateless_pb2.UpdateSpec(batch_size=1)), timeout=10)
    config, desired, workflow = (int(x) for x in before.split("-"))
    assert resp.version.value == f"{config + 1}-{desired}-{workflow + 1}"  # Peloton's versions
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    assert get(cluster, jid).job_info.spec.name == "www/prod/renamed"
    patched = stateless_pb2.JobSpec(name="www/prod/patched")
    cluster.jobs.PatchJob(svc.PatchJobRequest(job_id=job_id(jid), version=version(current(
        cluster, jid)), spec=patched), timeout=10)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    assert get(cluster, jid).job_info.spec.name == "www/prod/patched"


def test_restart_job_of_a_killed_job_runs_every_pod(cluster: Cluster) -> None:
    jid = stopped(cluster)
    before = current(cluster, jid)
    resp = cluster.jobs.RestartJob(svc.RestartJobRequest(
        job_id=job_id(jid), version=version(before),
        restart_spec=stateless_pb2.RestartSpec(batch_size=1)), timeout=10)
    config, desired, workflow = (int(x) for x in before.split("-"))
    assert resp.version.value == f"{config + 1}-{desired}-{workflow + 1}"
    wait_running(cluster, jid, 2)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    assert get(cluster, jid).job_info.status.desired_state == stateless_pb2.JOB_STATE_RUNNING


def test_start_job_of_a_killed_job_starts_every_pod(cluster: Cluster) -> None:
    jid = stopped(cluster, 3)
    before = current(cluster, jid)
    resp = cluster.jobs.StartJob(svc.StartJobRequest(job_id=job_id(jid),
                                                     version=version(before)), timeout=10)
    config, desired, workflow = (int(x) for x in before.split("-"))
    assert resp.version.value == f"{config}-{desired + 1}-{workflow}"
    wait_running(cluster, jid, 3)


def test_update_of_a_stopped_job_succeeds_and_keeps_it_stopped(cluster: Cluster) -> None:
    jid = stopped(cluster)
    cluster.jobs.ReplaceJob(svc.ReplaceJobRequest(
        job_id=job_id(jid), version=version(current(cluster, jid)), spec=service_spec(2, tag="v2"),
        update_spec=stateless_pb2.UpdateSpec(batch_size=1)), timeout=10)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    info = get(cluster, jid).job_info
    assert info.status.state == KILLED and info.status.desired_state == KILLED
    assert not [p for p in pods(cluster, jid) if p.status.state == RUNNING]
    # ... and one that starts pods brings it back on its config.
    cluster.jobs.ReplaceJob(svc.ReplaceJobRequest(
        job_id=job_id(jid), version=version(current(cluster, jid)), spec=service_spec(2, tag="v3"),
        update_spec=stateless_pb2.UpdateSpec(batch_size=1, start_pods=True)), timeout=10)
    wait_running(cluster, jid, 2)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    assert get(cluster, jid).job_info.status.desired_state == stateless_pb2.JOB_STATE_RUNNING


def test_start_pods_while_the_job_is_being_killed_is_aborted(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(2)).job_id.value
    wait_running(cluster, jid, 2)
    cluster.jm.events.stop()  # the hosts' KILLED events are not read: its pods stay KILLING
    cluster.jobs.StopJob(svc.StopJobRequest(job_id=job_id(jid),
                                            version=version(current(cluster, jid))), timeout=10)
    cluster.until(lambda: len(cluster.hosts.killed) == 2, "the kill asked of the hosts")
    with pytest.raises(grpc.RpcError) as err:
        cluster.jobs.ReplaceJob(svc.ReplaceJobRequest(
            job_id=job_id(jid), version=version(current(cluster, jid)),
            spec=service_spec(2, tag="v2"),
            update_spec=stateless_pb2.UpdateSpec(start_pods=True)), timeout=10)
    assert err.value.code() == grpc.StatusCode.ABORTED
    assert "job is being terminated, cannot update with start_pods set now" in (
        err.value.details() or "")


# -- v0: JobManager.Stop / Start / Restart (workflows) and UpdateService on a stopped job ----

def _v0_version(c: Cluster, jid: str) -> int:
    return int(c.v0jobs.Get(job_pb2.GetRequest(id=_v0(jid)), timeout=10).jobInfo.config
               .changeLog.version)


def _v0(jid: str) -> Any:
    return v0_peloton.JobID(value=jid)


def _v0_workflow(c: Cluster, jid: str) -> str:
    return stateless_pb2.WorkflowState.Name(get(c, jid).workflow_info.status.state)


def test_v0_stop_then_start_and_restart_of_a_stopped_job(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(2)).job_id.value
    wait_running(cluster, jid, 2)
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")
    cluster.v0jobs.Stop(job_pb2.StopRequest(id=_v0(jid), resourceVersion=_v0_version(cluster, jid)),
                        timeout=10)
    cluster.until(lambda: _v0_workflow(cluster, jid) == "WORKFLOW_STATE_SUCCEEDED" and
                  not [p for p in pods(cluster, jid) if p.status.state == RUNNING],
                  "the v0 stop done")
    cluster.v0jobs.Start(job_pb2.StartRequest(id=_v0(jid), resourceVersion=_v0_version(cluster, jid)),
                         timeout=10)
    wait_running(cluster, jid, 2)
    cluster.v0jobs.Stop(job_pb2.StopRequest(id=_v0(jid), resourceVersion=_v0_version(cluster, jid)),
                        timeout=10)
    cluster.until(lambda: _v0_workflow(cluster, jid) == "WORKFLOW_STATE_SUCCEEDED" and
                  not [p for p in pods(cluster, jid) if p.status.state == RUNNING],
                  "the second v0 stop done")
    cluster.v0jobs.Restart(job_pb2.RestartRequest(id=_v0(jid),
                                                  resourceVersion=_v0_version(cluster, jid)),
                           timeout=10)
    wait_running(cluster, jid, 2)  # Peloton's restart strategy sets every pod's goal RUNNING
    wait_workflow(cluster, jid, "WORKFLOW_STATE_SUCCEEDED")


def test_v0_update_of_a_killed_job_succeeds(cluster: Cluster) -> None:
    jid = stopped(cluster)
    config = job_config_to_v0(cluster.jm.cache.track(jid).spec)
    config.defaultConfig.command.value = "serve --tag v9"
    resp = cluster.updates.CreateUpdate(update_svc_pb2.CreateUpdateRequest(
        jobId=_v0(jid), jobConfig=config, updateConfig=v0_update.UpdateConfig(batchSize=1)),
        timeout=10)
    state = cluster.until(lambda: (u := cluster.updates.GetUpdate(update_svc_pb2.GetUpdateRequest(
        updateId=resp.updateID), timeout=10).updateInfo.status.state) == v0_update.SUCCEEDED and u,
        "the v0 update of the killed job SUCCEEDED")
    assert state == v0_update.SUCCEEDED
    assert get(cluster, jid).job_info.status.state == KILLED
