"""CreateJob -> pods RUNNING; GetJob, GetJobIDFromJobName, QueryJobs, ListJobs, ListPods, QueryPods."""

from __future__ import annotations

import grpc
import pytest

from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import create, get, job_id, pods, service_spec, wait_running


def test_create_runs_pods_and_get_job_shows_the_rolling_create(cluster: Cluster) -> None:
    resp = create(cluster, opaque_data={"data": "made-by-test"})
    jid = resp.job_id.value
    assert resp.version.value == "1-1-1"  # config 1, desired state 1, first workflow
    running = wait_running(cluster, jid, 3)
    assert {p.spec.pod_name.value for p in running} == {f"{jid}-{i}" for i in range(3)}
    info = get(cluster, jid)
    assert info.job_info.spec.name == "www/prod/web" and info.job_info.spec.instance_count == 3
    assert info.job_info.status.desired_state == stateless_pb2.JOB_STATE_RUNNING
    flow = info.workflow_info
    assert flow.opaque_data.data == "made-by-test"
    assert flow.status.type == stateless_pb2.WORKFLOW_TYPE_UPDATE
    assert flow.status.version.value.startswith("1-") and flow.status.prev_version.value.startswith("0-")
    assert [(getattr(r, "from"), r.to) for r in flow.instances_added] == [(0, 2)]  # to inclusive
    assert flow.events and flow.events[-1].state == stateless_pb2.WORKFLOW_STATE_INITIALIZED


def test_get_job_by_version_and_summary(cluster: Cluster) -> None:
    jid = create(cluster).job_id.value
    wait_running(cluster, jid, 3)
    by_version = cluster.jobs.GetJob(svc.GetJobRequest(job_id=job_id(jid),
                                                       version={"value": "1-0-0"}), timeout=10)
    assert by_version.job_info.spec.revision.version == 1
    assert not by_version.job_info.HasField("status")
    def summary() -> stateless_pb2.JobSummary | None:
        out = cluster.jobs.GetJob(svc.GetJobRequest(job_id=job_id(jid), summary_only=True),
                                  timeout=10).summary
        return out if out.status.state == stateless_pb2.JOB_STATE_RUNNING else None

    found = cluster.until(summary, "the job runtime to show RUNNING")
    assert found.name == "www/prod/web" and found.instance_count == 3
    assert found.status.version.value and found.status.pod_stats["POD_STATE_RUNNING"] == 3
    assert found.status.workflow_status.state == stateless_pb2.WORKFLOW_STATE_SUCCEEDED
    with pytest.raises(grpc.RpcError) as err:
        cluster.jobs.GetJob(svc.GetJobRequest(job_id=job_id(jid), version={"value": "9-0-0"}),
                            timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND   # Peloton's text names the job
    assert err.value.details() == (f"fail to get job spec: code:not-found message:Job config "
                                   f"not found {jid}")


def test_get_job_errors(cluster: Cluster) -> None:
    with pytest.raises(grpc.RpcError) as err:  # an id that is not a UUID names no job
        get(cluster, "not-a-uuid")
    assert err.value.code() is grpc.StatusCode.NOT_FOUND and "not-a-uuid" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        get(cluster, "6c5b6d6e-1f0a-4c47-9a43-2b0f3c9f0a11")
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


def test_job_id_from_name_newest_first(cluster: Cluster) -> None:
    first = create(cluster).job_id.value
    second = create(cluster).job_id.value
    resp = cluster.jobs.GetJobIDFromJobName(svc.GetJobIDFromJobNameRequest(job_name="www/prod/web"),
                                            timeout=10)
    assert [j.value for j in resp.job_id] == [second, first]
    with pytest.raises(grpc.RpcError) as err:
        cluster.jobs.GetJobIDFromJobName(svc.GetJobIDFromJobNameRequest(job_name="nope"), timeout=10)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert err.value.details() == 'job id for job name not found: "nope"'


def test_query_jobs_by_label_with_pagination_and_list_jobs(cluster: Cluster) -> None:
    web = [create(cluster).job_id.value for _ in range(3)]
    other = create(cluster, service_spec(name="db", labels=(("team", "db"),))).job_id.value
    spec = stateless_pb2.QuerySpec(labels=[{"key": "team", "value": "web"}],
                                   pagination={"offset": 0, "limit": 2})
    page = cluster.jobs.QueryJobs(svc.QueryJobsRequest(spec=spec), timeout=10)
    assert len(page.records) == 2 and page.pagination.total == 3 and page.pagination.limit == 2
    assert {r.job_id.value for r in page.records} <= set(web)
    record = page.records[0]
    assert record.status.desired_state == stateless_pb2.JOB_STATE_RUNNING
    assert record.status.version.value and record.status.workflow_status.type == \
        stateless_pb2.WORKFLOW_TYPE_UPDATE
    assert page.spec == spec
    listed = [j.job_id.value for r in cluster.jobs.ListJobs(svc.ListJobsRequest(), timeout=10)
              for j in r.jobs]
    assert sorted(listed) == sorted([*web, other])


def test_list_and_query_pods(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(5)).job_id.value
    wait_running(cluster, jid, 5)
    listed = [p for r in cluster.jobs.ListPods(svc.ListPodsRequest(
        job_id=job_id(jid), range={"from": 1, "to": 3}), timeout=10) for p in r.pods]
    assert [p.pod_name.value for p in listed] == [f"{jid}-1", f"{jid}-2"]
    full = pods(cluster, jid)
    first = full[0]
    assert first.spec.containers[0].name == "app" and first.spec.pod_name.value == f"{jid}-0"
    status = first.status
    assert status.pod_id.value == f"{jid}-0-1" and status.host.startswith("host-")
    assert status.agent_id.value == f"agent-{status.host}" and status.version.value == "1-0-0"
    assert status.start_time and status.containers_status[0].ports["http"] >= 31000
    by_name = pods(cluster, jid, spec=pod_pb2.QuerySpec(names=[{"value": f"{jid}-3"}]))
    assert [p.spec.pod_name.value for p in by_name] == [f"{jid}-3"]
    by_host = pods(cluster, jid, spec=pod_pb2.QuerySpec(hosts=[status.host]))
    assert by_host and all(p.status.host == status.host for p in by_host)
    none = pods(cluster, jid, spec=pod_pb2.QuerySpec(pod_states=[pod_pb2.POD_STATE_KILLED]))
    assert none == []
    paged = cluster.jobs.QueryPods(svc.QueryPodsRequest(
        job_id=job_id(jid), spec={"pagination": {"offset": 1, "limit": 2}}, summary_only=True),
        timeout=10)
    assert [p.spec.pod_name.value for p in paged.pods] == [f"{jid}-1", f"{jid}-2"]
    assert not paged.pods[0].spec.containers and paged.pagination.total == 5
