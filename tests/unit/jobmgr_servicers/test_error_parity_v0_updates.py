"""v0 UpdateService: every error case Peloton's handler distinguishes, with its answer.

Peloton's answers are read from uber/peloton pkg/jobmgr/updatesvc/handler.go
(and "update not found" from its update store).  RollbackUpdate, which
Peloton leaves UNIMPLEMENTED, works here (see the README).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2 as pb
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import POOL, create, service_spec, wait_running
from tests.unit.jobmgr_servicers.parity import Case, Ids, check
from tests.unit.jobmgr_servicers.test_error_parity_v0_jobs import UNKNOWN
from tests.unit.jobmgr_servicers.test_v0_methods import batch_config, create_batch

S = grpc.StatusCode


def _jid(value: str) -> dict[str, str]:
    return {"value": value}


def _service_config(c: Cluster, jid: str, **edit: Any) -> job_pb2.JobConfig:
    config: job_pb2.JobConfig = c.v0jobs.Get(job_pb2.GetRequest(id=_jid(jid)),
                                             timeout=10).jobInfo.config
    config.defaultConfig.command.value = "serve --tag v2"
    for key, value in edit.items():
        if key == "respool":
            config.respoolID.value = value
        elif key == "no_changelog":
            config.ClearField("changeLog")
        elif key == "version":
            config.changeLog.version = value
        else:
            setattr(config, key, value)
    return config


def _create(c: Cluster, jid: str, *, in_place: bool = False, **edit: Any) -> Any:
    return c.updates.CreateUpdate(pb.CreateUpdateRequest(
        jobId=_jid(jid), jobConfig=_service_config(c, jid, **edit) if jid != UNKNOWN
        else batch_config(1), updateConfig={"batchSize": 1, "inPlace": in_place}), timeout=10)


CASES = [
    Case("create an update of a job id that is not a UUID",
         lambda c, ids: c.updates.CreateUpdate(pb.CreateUpdateRequest(
             jobId=_jid("nope"), jobConfig=batch_config(1)), timeout=10),
         code=S.INVALID_ARGUMENT, message="JobID must be of UUID format"),
    Case("create an in-place update",
         lambda c, ids: _create(c, ids["service"], in_place=True),
         code=S.UNIMPLEMENTED, message="in-place update is not supported yet"),
    Case("create an update of an unknown job",
         lambda c, ids: _create(c, UNKNOWN),
         code=S.NOT_FOUND, message="job not found"),
    Case("create an update of a batch job",
         lambda c, ids: c.updates.CreateUpdate(pb.CreateUpdateRequest(
             jobId=_jid(ids["batch"]), jobConfig=batch_config(2)), timeout=10),
         code=S.INVALID_ARGUMENT, message="job must be of type service"),
    Case("create an update without a changelog",
         lambda c, ids: _create(c, ids["service"], no_changelog=True),
         code=S.INVALID_ARGUMENT, message="missing changelog in job configuration"),
    Case("create an update that changes the job type",
         lambda c, ids: _create(c, ids["service"], type=job_pb2.BATCH),
         code=S.INVALID_ARGUMENT, message="job type is immutable"),
    Case("create an update that changes the pool",
         lambda c, ids: _create(c, ids["service"], respool="respool-other"),
         code=S.INVALID_ARGUMENT, message="resource pool identifier is immutable"),
    Case("create an update from a stale configuration version",
         lambda c, ids: _create(c, ids["service"], version=9),
         code=S.INVALID_ARGUMENT, message="invalid job configuration version"),
    Case("get an update without an id",
         lambda c, ids: c.updates.GetUpdate(pb.GetUpdateRequest(), timeout=10),
         code=S.INVALID_ARGUMENT, message="no update ID provided"),
    Case("get an unknown update",
         lambda c, ids: c.updates.GetUpdate(pb.GetUpdateRequest(updateId=_jid(UNKNOWN)),
                                            timeout=10),
         code=S.NOT_FOUND, message="update not found"),
    Case("list the updates without a job id",
         lambda c, ids: c.updates.ListUpdates(pb.ListUpdatesRequest(), timeout=10),
         code=S.INVALID_ARGUMENT, message="no job ID provided"),
    Case("list the updates of an unknown job (none, OK)",
         lambda c, ids: c.updates.ListUpdates(pb.ListUpdatesRequest(jobID=_jid(UNKNOWN)),
                                              timeout=10)),
    Case("pause without an update id",
         lambda c, ids: c.updates.PauseUpdate(pb.PauseUpdateRequest(), timeout=10),
         code=S.INVALID_ARGUMENT, message="no update ID provided"),
    Case("resume an unknown update",
         lambda c, ids: c.updates.ResumeUpdate(pb.ResumeUpdateRequest(updateId=_jid(UNKNOWN)),
                                               timeout=10),
         code=S.NOT_FOUND, message="update not found"),
    Case("abort an unknown update",
         lambda c, ids: c.updates.AbortUpdate(pb.AbortUpdateRequest(updateId=_jid(UNKNOWN)),
                                              timeout=10),
         code=S.NOT_FOUND, message="update not found"),
    Case("get the cache of an unknown update",
         lambda c, ids: c.updates.GetUpdateCache(pb.GetUpdateCacheRequest(
             updateId=_jid(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message="update not found"),
]


@pytest.fixture
def ids(cluster: Cluster) -> Iterator[Ids]:
    cluster.rm.pools.update({"/other": "respool-other"})
    service = create(cluster, service_spec(1)).job_id.value
    batch = create_batch(cluster, 1)
    wait_running(cluster, service, 1)
    assert POOL
    yield {"service": service, "batch": batch}


def test_v0_update_service_answers_every_error_case_as_peloton(cluster: Cluster,
                                                                ids: Ids) -> None:
    for case in CASES:
        check(case, cluster, ids)
