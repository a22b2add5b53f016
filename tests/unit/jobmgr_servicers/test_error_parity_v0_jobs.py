"""v0 JobManager: every error case Peloton's handler distinguishes, with its answer.

Peloton's answers are read from uber/peloton pkg/jobmgr/jobsvc/handler.go
(and the storage texts it passes on, pkg/storage/objects); where the reply
body carries a YARPC error, the text is Go's `err.Error()` of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.states import TaskState
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import create, service_spec, wait_running
from tests.unit.jobmgr_servicers.parity import Case, Ids, check
from tests.unit.jobmgr_servicers.test_v0_methods import (
    batch_config,
    create_batch,
    tasks_stub,
    wait_states,
)

S = grpc.StatusCode
UNKNOWN = "6a3f2f0e-0c8e-4a57-9d1f-0123456789ab"
NOT_A_UUID = "not-a-uuid"


def _config(**edit: Any) -> job_pb2.JobConfig:
    config = batch_config(1)
    for key, value in edit.items():
        if key == "respool":
            if value is None:
                config.ClearField("respoolID")
            else:
                config.respoolID.value = value
        else:
            setattr(config, key, value)
    return config


def _jid(value: str) -> dict[str, str]:
    return {"value": value}


def _range(frm: int, to: int) -> task_pb2.InstanceRange:
    r = task_pb2.InstanceRange(to=to)
    setattr(r, "from", frm)
    return r


CASES = [
    # -- Create: everything is in the reply body ------------------------------------------
    Case("create with an id that is not a UUID",
         lambda c, ids: c.v0jobs.Create(job_pb2.CreateRequest(
             id=_jid(NOT_A_UUID), config=_config()), timeout=10),
         body="error.invalidJobId", message="JobID must be valid UUID"),
    Case("create without a pool",
         lambda c, ids: c.v0jobs.Create(job_pb2.CreateRequest(config=_config(respool=None)),
                                        timeout=10),
         body="error.invalidConfig", message="resource pool ID is null"),
    Case("create in the root pool",
         lambda c, ids: c.v0jobs.Create(job_pb2.CreateRequest(config=_config(respool="root")),
                                        timeout=10),
         body="error.invalidConfig", message="cannot submit jobs to the `root` resource pool"),
    Case("create in an unknown pool",
         lambda c, ids: c.v0jobs.Create(job_pb2.CreateRequest(config=_config(respool="nope")),
                                        timeout=10),
         body="error.invalidConfig", message="resource pool not found"),
    Case("create in a pool that has children",
         lambda c, ids: c.v0jobs.Create(job_pb2.CreateRequest(
             config=_config(respool="respool-parent")), timeout=10),
         body="error.invalidConfig", message="cannot submit jobs to a non leaf resource pool"),
    Case("create with an invalid config",
         lambda c, ids: c.v0jobs.Create(job_pb2.CreateRequest(config=_config(instanceCount=0)),
                                        timeout=10),
         body="error.invalidConfig", message="instanceCount", prefix=True),
    Case("create with an id that exists",
         lambda c, ids: c.v0jobs.Create(job_pb2.CreateRequest(id=_jid(ids["batch"]),
                                                              config=_config()), timeout=10),
         body="error.alreadyExists", message=lambda ids: f"job {ids['batch']} already exists"),
    # -- Get -------------------------------------------------------------------------------
    Case("get an unknown job",
         lambda c, ids: c.v0jobs.Get(job_pb2.GetRequest(id=_jid(UNKNOWN)), timeout=10),
         body="error.getRuntimeFail",
         message=f"code:not-found message:Job runtime not found {UNKNOWN}"),
    # -- Query ------------------------------------------------------------------------------
    Case("query with a creation time range whose min is after its max",
         lambda c, ids: c.v0jobs.Query(job_pb2.QueryRequest(spec={"creationTimeRange": {
             "min": {"seconds": 2000}, "max": {"seconds": 1000}}}), timeout=10),
         body="error.err", message="Incorrect timerange"),
    Case("query with a completion time range missing its max",
         lambda c, ids: c.v0jobs.Query(job_pb2.QueryRequest(spec={"completionTimeRange": {
             "min": {"seconds": 1000}}}), timeout=10),
         body="error.err", message="timestamp: nil Timestamp"),
    Case("query with a creation time range missing its min",
         lambda c, ids: c.v0jobs.Query(job_pb2.QueryRequest(spec={"creationTimeRange": {
             "max": {"seconds": 1000}}}), timeout=10),
         body="error.err", message="timestamp: nil Timestamp"),
    # Peloton's Lucene index refused a sort field it did not have; its text was the
    # index's own, ours names the fields (the place, error.err, is Peloton's).
    Case("query sorted by a field jobs cannot be sorted by",
         lambda c, ids: c.v0jobs.Query(job_pb2.QueryRequest(spec={"pagination": {
             "orderBy": [{"property": {"value": "labels"}}]}}), timeout=10),
         body="error.err", message="cannot sort jobs by 'labels'", prefix=True),
    # -- Delete: statuses --------------------------------------------------------------------
    Case("delete an unknown job",
         lambda c, ids: c.v0jobs.Delete(job_pb2.DeleteRequest(id=_jid(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message="job not found"),
    Case("delete a running job",
         lambda c, ids: c.v0jobs.Delete(job_pb2.DeleteRequest(id=_jid(ids["batch"])), timeout=10),
         code=S.INTERNAL, message="Job is not in a terminal state: RUNNING"),
    # -- Update: statuses --------------------------------------------------------------------
    Case("update an unknown job",
         lambda c, ids: c.v0jobs.Update(job_pb2.UpdateRequest(id=_jid(UNKNOWN),
                                                              config=batch_config(3)), timeout=10),
         code=S.NOT_FOUND, message=f"Job runtime not found {UNKNOWN}"),
    Case("update a terminal job",
         lambda c, ids: c.v0jobs.Update(job_pb2.UpdateRequest(id=_jid(ids["killed"]),
                                                              config=batch_config(3)), timeout=10),
         code=S.INVALID_ARGUMENT, message="Job is in a terminal state:KILLED"),
    Case("update a service job",
         lambda c, ids: c.v0jobs.Update(job_pb2.UpdateRequest(id=_jid(ids["service"]),
                                                              config=batch_config(3)), timeout=10),
         code=S.INVALID_ARGUMENT, message="job update is only supported for batch jobs"),
    Case("update with fewer instances",
         lambda c, ids: c.v0jobs.Update(job_pb2.UpdateRequest(id=_jid(ids["batch"]),
                                                              config=batch_config(1)), timeout=10),
         code=S.INVALID_ARGUMENT, message="instanceCount", prefix=True),
    Case("update with the same instance count is a no-op",
         lambda c, ids: c.v0jobs.Update(job_pb2.UpdateRequest(id=_jid(ids["batch"]),
                                                              config=batch_config(2)), timeout=10)),
    # -- Refresh / GetCache -------------------------------------------------------------------
    Case("refresh an unknown job",
         lambda c, ids: c.v0jobs.Refresh(job_pb2.RefreshRequest(id=_jid(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message="job not found"),
    Case("get the cache of an unknown job",
         lambda c, ids: c.v0jobs.GetCache(job_pb2.GetCacheRequest(id=_jid(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message="Job not found in cache"),
    # -- Restart / Start / Stop (createNonUpdateWorkflow) --------------------------------------
    Case("restart an unknown job",
         lambda c, ids: c.v0jobs.Restart(job_pb2.RestartRequest(id=_jid(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message=f"Job runtime not found {UNKNOWN}"),
    Case("restart a batch job",
         lambda c, ids: c.v0jobs.Restart(job_pb2.RestartRequest(id=_jid(ids["batch"]),
                                                                resourceVersion=1), timeout=10),
         code=S.INVALID_ARGUMENT, message="RESTART supported only for service jobs"),
    Case("start a batch job",
         lambda c, ids: c.v0jobs.Start(job_pb2.StartRequest(id=_jid(ids["batch"]),
                                                            resourceVersion=1), timeout=10),
         code=S.INVALID_ARGUMENT, message="START supported only for service jobs"),
    Case("stop a batch job",
         lambda c, ids: c.v0jobs.Stop(job_pb2.StopRequest(id=_jid(ids["batch"])), timeout=10),
         code=S.INVALID_ARGUMENT, message="STOP supported only for service jobs"),
    Case("restart with a stale configuration version",
         lambda c, ids: c.v0jobs.Restart(job_pb2.RestartRequest(id=_jid(ids["service"]),
                                                                resourceVersion=7), timeout=10),
         code=S.INVALID_ARGUMENT, message="invalid job configuration version"),
    Case("restart without a configuration version",
         lambda c, ids: c.v0jobs.Restart(job_pb2.RestartRequest(
             id=_jid(ids["service"]), ranges=[_range(0, 1)]), timeout=10),
         code=S.INVALID_ARGUMENT, message="invalid job configuration version"),
]


@pytest.fixture
def ids(cluster: Cluster) -> Iterator[Ids]:
    cluster.rm.pools.update({"/parent": "respool-parent"})
    cluster.rm.parents.add("respool-parent")
    batch = create_batch(cluster, 2)
    killed = create_batch(cluster, 1)
    service = create(cluster, service_spec(1)).job_id.value
    wait_states(cluster, batch, {0: task_pb2.RUNNING, 1: task_pb2.RUNNING})
    wait_states(cluster, killed, {0: task_pb2.RUNNING})
    wait_running(cluster, service, 1)
    tasks_stub(cluster).Stop(task_pb2.StopRequest(jobId=_jid(killed)), timeout=10)

    def is_killed() -> bool:
        state = cluster.v0jobs.Get(job_pb2.GetRequest(id=_jid(killed)), timeout=10)
        return job_pb2.JobState.Name(state.jobInfo.runtime.state) == "KILLED"

    cluster.until(is_killed, "the stopped job KILLED")
    yield {"batch": batch, "killed": killed, "service": service}


def test_v0_job_manager_answers_every_error_case_as_peloton(cluster: Cluster, ids: Ids) -> None:
    for case in CASES:
        check(case, cluster, ids)
    assert TaskState.RUNNING  # the fixture ran real tasks through the fakes
