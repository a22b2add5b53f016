"""v1alpha JobService: every error case Peloton's handler distinguishes, with its answer.

Peloton's answers are read from uber/peloton pkg/jobmgr/jobsvc/stateless/
handler.go: its handlers wrap the lower error with their context and keep
its code ("fail to get runtime: code:not-found message:Job runtime not
found <id>"; see peloton/jobmgr/servicers/v1_answers.py).  Validation texts
below the wrapping are ours, so those cases check the wrapping only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import create, get, job_id, service_spec, version, wait_running
from tests.unit.jobmgr_servicers.parity import Case, Ids, check
from tests.unit.jobmgr_servicers.test_error_parity_v0_jobs import UNKNOWN
from tests.unit.jobmgr_servicers.test_v0_methods import create_batch

S = grpc.StatusCode
RUNTIME = f"code:not-found message:Job runtime not found {UNKNOWN}"
STALE = "unexpected entity version"


def _spec(**edit: Any) -> Any:
    spec = service_spec(1)
    for key, value in edit.items():
        if key == "respool":
            spec.respool_id.value = value
        elif key == "no_pool":
            spec.ClearField("respool_id")
        else:
            setattr(spec, key, value)
    return spec


def _v(ids: Ids) -> Any:
    return version(ids["version"])


CASES = [
    # -- CreateJob -------------------------------------------------------------------------
    Case("create with an id that is not a UUID",
         lambda c, ids: c.jobs.CreateJob(svc.CreateJobRequest(job_id=job_id("nope"),
                                                              spec=_spec()), timeout=10),
         code=S.INVALID_ARGUMENT, message="jobID is not valid UUID"),
    Case("create without a pool",
         lambda c, ids: c.jobs.CreateJob(svc.CreateJobRequest(spec=_spec(no_pool=True)),
                                         timeout=10),
         code=S.INVALID_ARGUMENT, message="failed to validate resource pool: "
         "code:invalid-argument message:resource pool ID is null"),
    Case("create in the root pool",
         lambda c, ids: c.jobs.CreateJob(svc.CreateJobRequest(spec=_spec(respool="root")),
                                         timeout=10),
         code=S.INVALID_ARGUMENT, message="failed to validate resource pool: "
         "code:invalid-argument message:cannot submit jobs to the `root` resource pool"),
    Case("create in an unknown pool",
         lambda c, ids: c.jobs.CreateJob(svc.CreateJobRequest(spec=_spec(respool="nope")),
                                         timeout=10),
         code=S.NOT_FOUND, message="failed to validate resource pool: "
         "code:not-found message:resource pool not found"),
    Case("create with an invalid spec",
         lambda c, ids: c.jobs.CreateJob(svc.CreateJobRequest(spec=_spec(instance_count=0)),
                                         timeout=10),
         code=S.INVALID_ARGUMENT, message="invalid job spec: code:invalid-argument message:",
         prefix=True),
    # -- ReplaceJob ------------------------------------------------------------------------
    Case("replace a job whose id is not a UUID",
         lambda c, ids: c.jobs.ReplaceJob(svc.ReplaceJobRequest(job_id=job_id("nope"),
                                                                spec=_spec()), timeout=10),
         code=S.INVALID_ARGUMENT, message="JobID must be of UUID format"),
    Case("replace an unknown job",
         lambda c, ids: c.jobs.ReplaceJob(svc.ReplaceJobRequest(job_id=job_id(UNKNOWN),
                                                                spec=_spec()), timeout=10),
         code=S.NOT_FOUND, message=f"failed to get job runtime from cache: {RUNTIME}"),
    Case("replace with another pool",
         lambda c, ids: c.jobs.ReplaceJob(svc.ReplaceJobRequest(
             job_id=job_id(ids["service"]), version=_v(ids), spec=_spec(respool="respool-other")),
             timeout=10),
         code=S.INVALID_ARGUMENT, message="failed to validate spec update: "
         "code:invalid-argument message:resource pool identifier is immutable"),
    Case("replace from a stale version",
         lambda c, ids: c.jobs.ReplaceJob(svc.ReplaceJobRequest(
             job_id=job_id(ids["service"]), version=version("9-9-9"), spec=_spec()), timeout=10),
         code=S.ABORTED, message=f"failed to create update workload: code:aborted message:{STALE}"),
    # -- RestartJob / workflows ----------------------------------------------------------
    Case("restart an unknown job",
         lambda c, ids: c.jobs.RestartJob(svc.RestartJobRequest(job_id=job_id(UNKNOWN)),
                                          timeout=10),
         code=S.NOT_FOUND, message=f"fail to get job runtime: {RUNTIME}"),
    Case("restart from a stale version",
         lambda c, ids: c.jobs.RestartJob(svc.RestartJobRequest(
             job_id=job_id(ids["service"]), version=version("9-9-9")), timeout=10),
         code=S.ABORTED, message=STALE),
    Case("pause the workflow of an unknown job",
         lambda c, ids: c.jobs.PauseJobWorkflow(svc.PauseJobWorkflowRequest(
             job_id=job_id(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message=f"failed to pause workload: {RUNTIME}"),
    Case("pause a job without a workflow",
         lambda c, ids: c.jobs.PauseJobWorkflow(svc.PauseJobWorkflowRequest(
             job_id=job_id(ids["batch"])), timeout=10),
         code=S.NOT_FOUND,
         message="failed to pause workload: code:not-found message:no workflow found"),
    Case("resume from a stale version",
         lambda c, ids: c.jobs.ResumeJobWorkflow(svc.ResumeJobWorkflowRequest(
             job_id=job_id(ids["service"]), version=version("9-9-9")), timeout=10),
         code=S.ABORTED, message=f"failed to resume workload: code:aborted message:{STALE}"),
    Case("abort the workflow of an unknown job",
         lambda c, ids: c.jobs.AbortJobWorkflow(svc.AbortJobWorkflowRequest(
             job_id=job_id(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message=f"failed to abort workflow: {RUNTIME}"),
    # -- StartJob / StopJob / DeleteJob ----------------------------------------------------
    Case("start an unknown job",
         lambda c, ids: c.jobs.StartJob(svc.StartJobRequest(job_id=job_id(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message=f"fail to get runtime: {RUNTIME}"),
    Case("stop from a stale version",
         lambda c, ids: c.jobs.StopJob(svc.StopJobRequest(
             job_id=job_id(ids["service"]), version=version("9-9-9")), timeout=10),
         code=S.ABORTED, message=STALE),
    Case("delete an unknown job",
         lambda c, ids: c.jobs.DeleteJob(svc.DeleteJobRequest(job_id=job_id(UNKNOWN)),
                                         timeout=10),
         code=S.NOT_FOUND, message=f"failed to get job runtime: {RUNTIME}"),
    Case("delete a job that is not stopped",
         lambda c, ids: c.jobs.DeleteJob(svc.DeleteJobRequest(
             job_id=job_id(ids["service"]), version=_v(ids)), timeout=10),
         code=S.ABORTED, message="job is not stopped"),
    Case("delete from a stale version",
         lambda c, ids: c.jobs.DeleteJob(svc.DeleteJobRequest(
             job_id=job_id(ids["service"]), version=version("9-9-9")), timeout=10),
         code=S.ABORTED, message=STALE),
    # -- no entity version: Peloton's ValidateEntityVersion compares it as given ----------
    Case("replace without a version",
         lambda c, ids: c.jobs.ReplaceJob(svc.ReplaceJobRequest(
             job_id=job_id(ids["service"]), spec=_spec()), timeout=10),
         code=S.ABORTED, message=f"failed to create update workload: code:aborted message:{STALE}"),
    Case("restart without a version",
         lambda c, ids: c.jobs.RestartJob(svc.RestartJobRequest(
             job_id=job_id(ids["service"])), timeout=10),
         code=S.ABORTED, message=STALE),
    Case("resume without a version",
         lambda c, ids: c.jobs.ResumeJobWorkflow(svc.ResumeJobWorkflowRequest(
             job_id=job_id(ids["service"])), timeout=10),
         code=S.ABORTED, message=f"failed to resume workload: code:aborted message:{STALE}"),
    Case("start without a version",
         lambda c, ids: c.jobs.StartJob(svc.StartJobRequest(job_id=job_id(ids["service"])),
                                        timeout=10),
         code=S.ABORTED, message=STALE),
    Case("stop without a version",
         lambda c, ids: c.jobs.StopJob(svc.StopJobRequest(job_id=job_id(ids["service"])),
                                       timeout=10),
         code=S.ABORTED, message=STALE),
    Case("delete without a version (checked before the job is stopped)",
         lambda c, ids: c.jobs.DeleteJob(svc.DeleteJobRequest(job_id=job_id(ids["service"])),
                                         timeout=10),
         code=S.ABORTED, message=STALE),
    Case("replace diff without a version",
         lambda c, ids: c.jobs.GetReplaceJobDiff(svc.GetReplaceJobDiffRequest(
             job_id=job_id(ids["service"]), spec=_spec()), timeout=10),
         code=S.ABORTED, message=STALE),
    # -- reads -----------------------------------------------------------------------------
    Case("get an unknown job",
         lambda c, ids: get(c, UNKNOWN),
         code=S.NOT_FOUND, message=f"failed to get job status: {RUNTIME}"),
    Case("get the summary of an unknown job",
         lambda c, ids: c.jobs.GetJob(svc.GetJobRequest(job_id=job_id(UNKNOWN),
                                                        summary_only=True), timeout=10),
         code=S.NOT_FOUND, message=f"failed to get job summary from DB: code:not-found "
                                   f"message:Job Index not found {UNKNOWN}"),
    Case("get a version of an unknown job",
         lambda c, ids: c.jobs.GetJob(svc.GetJobRequest(job_id=job_id(UNKNOWN),
                                                        version=version("1-0-0")), timeout=10),
         code=S.NOT_FOUND, message=f"fail to get job spec: code:not-found "
                                   f"message:Job config not found {UNKNOWN}"),
    Case("get the job ids of an unknown name",
         lambda c, ids: c.jobs.GetJobIDFromJobName(svc.GetJobIDFromJobNameRequest(
             job_name="nope"), timeout=10),
         code=S.NOT_FOUND, message='job id for job name not found: "nope"'),
    Case("workflow events of a job id that is not a UUID",
         lambda c, ids: c.jobs.GetWorkflowEvents(svc.GetWorkflowEventsRequest(
             job_id=job_id("nope")), timeout=10),
         code=S.INVALID_ARGUMENT, message="job ID must be of UUID format"),
    Case("workflow events of an unknown job",
         lambda c, ids: c.jobs.GetWorkflowEvents(svc.GetWorkflowEventsRequest(
             job_id=job_id(UNKNOWN)), timeout=10),
         code=S.NOT_FOUND, message=f"failed to get job runtime: {RUNTIME}"),
    Case("workflow events of a job without a workflow",
         lambda c, ids: c.jobs.GetWorkflowEvents(svc.GetWorkflowEventsRequest(
             job_id=job_id(ids["batch"])), timeout=10),
         code=S.UNAVAILABLE, message="job runtime does not have workflow"),
    Case("query the pods of an unknown job",
         lambda c, ids: c.jobs.QueryPods(svc.QueryPodsRequest(job_id=job_id(UNKNOWN)),
                                         timeout=10),
         code=S.NOT_FOUND, message=f"failed to find job runtime: {RUNTIME}"),
    # QueryPods / QueryJobs pass their store's refusals on, wrapped, as INTERNAL
    # (pkg/jobmgr/jobsvc/stateless/handler.go; pkg/storage/cassandra/store.go).
    Case("query pods sorted by a field Peloton cannot sort by",
         lambda c, ids: c.jobs.QueryPods(svc.QueryPodsRequest(
             job_id=job_id(ids["batch"]), spec={"pagination": {"order_by": [
                 {"property": {"value": "pod_id"}}]}}), timeout=10),
         code=S.INTERNAL, message="failed to query tasks from DB: Sort only supports fields: "
                                  "creation_time, host, instanceId, message, name, reason, state"),
    Case("query jobs with a creation time range whose min is after its max",
         lambda c, ids: c.jobs.QueryJobs(svc.QueryJobsRequest(spec={"creation_time_range": {
             "min": {"seconds": 2000}, "max": {"seconds": 1000}}}), timeout=10),
         code=S.INTERNAL, message="failed to get job summaries: Incorrect timerange"),
    Case("query jobs with a completion time range missing its min",
         lambda c, ids: c.jobs.QueryJobs(svc.QueryJobsRequest(spec={"completion_time_range": {
             "max": {"seconds": 1000}}}), timeout=10),
         code=S.INTERNAL, message="failed to get job summaries: timestamp: nil Timestamp"),
    Case("query jobs in a pool that does not exist (no pool filter, OK)",
         lambda c, ids: c.jobs.QueryJobs(svc.QueryJobsRequest(spec={"respool": {
             "value": "/no/such/pool"}}), timeout=10)),
    Case("list the pods of an unknown job (none, OK)",
         lambda c, ids: list(c.jobs.ListPods(svc.ListPodsRequest(job_id=job_id(UNKNOWN)),
                                             timeout=10))),
    Case("list workflows without a job id",
         lambda c, ids: c.jobs.ListJobWorkflows(svc.ListJobWorkflowsRequest(), timeout=10),
         code=S.INVALID_ARGUMENT, message="no job id provided"),
    Case("list the workflows of an unknown job (none, OK)",
         lambda c, ids: c.jobs.ListJobWorkflows(svc.ListJobWorkflowsRequest(
             job_id=job_id(UNKNOWN)), timeout=10)),
    Case("replace diff of a job id that is not a UUID",
         lambda c, ids: c.jobs.GetReplaceJobDiff(svc.GetReplaceJobDiffRequest(
             job_id=job_id("nope"), spec=_spec()), timeout=10),
         code=S.INVALID_ARGUMENT, message="JobID must be of UUID format"),
    Case("replace diff of an unknown job",
         lambda c, ids: c.jobs.GetReplaceJobDiff(svc.GetReplaceJobDiffRequest(
             job_id=job_id(UNKNOWN), spec=_spec()), timeout=10),
         code=S.NOT_FOUND, message=f"failed to get job status: {RUNTIME}"),
    Case("replace diff from a stale version",
         lambda c, ids: c.jobs.GetReplaceJobDiff(svc.GetReplaceJobDiffRequest(
             job_id=job_id(ids["service"]), version=version("9-9-9"), spec=_spec()), timeout=10),
         code=S.ABORTED, message=STALE),
    Case("replace diff with another pool",
         lambda c, ids: c.jobs.GetReplaceJobDiff(svc.GetReplaceJobDiffRequest(
             job_id=job_id(ids["service"]), version=_v(ids), spec=_spec(respool="respool-other")),
             timeout=10),
         code=S.INVALID_ARGUMENT, message="resource pool identifier is immutable"),
    Case("refresh an unknown job",
         lambda c, ids: c.jobs.RefreshJob(svc.RefreshJobRequest(job_id=job_id(UNKNOWN)),
                                          timeout=10),
         code=S.NOT_FOUND, message=f"fail to get job runtime: {RUNTIME}"),
    Case("the cache of a job not in the cache",
         lambda c, ids: c.jobs.GetJobCache(svc.GetJobCacheRequest(job_id=job_id(UNKNOWN)),
                                           timeout=10),
         code=S.NOT_FOUND, message="job not found in cache"),
]


@pytest.fixture
def ids(cluster: Cluster) -> Iterator[Ids]:
    cluster.rm.pools.update({"/other": "respool-other"})
    service = create(cluster, service_spec(1)).job_id.value
    batch = create_batch(cluster, 1)
    wait_running(cluster, service, 1)
    current = get(cluster, service).job_info.status.version.value
    yield {"service": service, "batch": batch, "version": current}


def test_v1_job_service_answers_every_error_case_as_peloton(cluster: Cluster, ids: Ids) -> None:
    for case in CASES:
        check(case, cluster, ids)
