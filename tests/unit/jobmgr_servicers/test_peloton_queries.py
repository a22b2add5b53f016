"""Job and task queries answer as Peloton's did, over the served v0 and v1alpha APIs.

Peloton's answers come from uber/peloton pkg/storage/cassandra/store.go (QueryJobs,
QueryTasks, Less), pkg/storage/objects/job_index.go (the index's owner field is the
owning team), pkg/jobmgr/jobsvc/handler.go (v0 Query), pkg/jobmgr/jobsvc/stateless/
handler.go (QueryJobs, QueryPods), pkg/jobmgr/tasksvc/handler.go (v0 Query), and
Peloton's own integration test tests/integration/batch_job_test/test_job_query.py.
"""

from __future__ import annotations

import math
from typing import Any

import grpc
import pytest

from peloton.api.convert.v0_job import JobQuerySpec
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.core.states import JobState, TaskState
from peloton.jobmgr.servicers.queries import QueryRefused, job_query
from peloton.storage import SortField, TimeRange
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import POOL, create, job_id, service_spec
from tests.unit.jobmgr_servicers.test_v0_methods import batch_config, tasks_stub

DAY = 24 * 3600.0


def _create(c: Cluster, name: str, owner: str = "alice", team: str = "web",
            instances: int = 1) -> str:
    config = batch_config(instances)
    config.name, config.owner, config.owningTeam = name, owner, team
    resp = c.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    assert not resp.HasField("error"), resp.error
    return str(resp.jobId.value)


def _query(c: Cluster, **spec: Any) -> Any:
    return c.v0jobs.Query(job_pb2.QueryRequest(spec=spec, summaryOnly=True), timeout=10)


def _names(resp: Any) -> list[str]:
    return [r.name for r in resp.results]


# -- the pure translation: defaults, window, pages -------------------------------------------

def test_pages_are_cut_by_max_limit_before_offset_and_limit() -> None:
    # store.go: `LIMIT maxLimit` in the query, total = rows read, then [offset:][:limit].
    page = job_query(JobQuerySpec(), None, 0.0)
    assert (page.query.offset, page.query.limit, page.cap) == (0, 10, 100)  # the defaults
    page = job_query(JobQuerySpec(offset=1, limit=2, max_limit=2), None, 0.0)
    assert (page.query.offset, page.query.limit, page.cap) == (1, 1, 2)
    page = job_query(JobQuerySpec(offset=7, limit=5, max_limit=5), None, 0.0)
    assert page.query.limit == 0  # past the cap: an empty page


def test_time_ranges_are_whole_seconds_and_terminal_states_default_to_seven_days() -> None:
    now = 1_700_000_000.75
    page = job_query(JobQuerySpec(creation_time=(100.9, 200.2)), None, now)
    assert page.query.creation_time == TimeRange(100.0, 200.0)  # yyyyMMddHHmmss in the index
    page = job_query(JobQuerySpec(states=frozenset({JobState.RUNNING, JobState.KILLED})), None,
                     now)
    end = math.floor(now + 30)  # jobQueryJitter
    assert page.query.creation_time == TimeRange(end - 7 * DAY, end)
    assert job_query(JobQuerySpec(states=frozenset({JobState.RUNNING})), None,
                     now).query.creation_time is None
    with_range = job_query(JobQuerySpec(states=frozenset({JobState.KILLED}),
                                        completion_time=(0.0, now)), None, now)
    assert with_range.query.creation_time is None
    with pytest.raises(QueryRefused, match=r"^Incorrect timerange$"):
        job_query(JobQuerySpec(creation_time=(200.0, 100.0)), None, now)
    with pytest.raises(QueryRefused, match=r"^timestamp: nil Timestamp$"):
        job_query(JobQuerySpec(completion_time=(None, 100.0)), None, now)


def test_order_by_is_peloton_s_property_list() -> None:
    page = job_query(JobQuerySpec(order_by=(("name", False), ("owner", True))), None, 0.0)
    # Peloton's `owner` field is the owning team.
    assert (page.query.order_by, page.query.descending) == (SortField.NAME, False)
    assert page.query.then_by == ((SortField.OWNING_TEAM, True),)
    default = job_query(JobQuerySpec(), None, 0.0).query
    assert (default.order_by, default.descending) == (SortField.CREATION_TIME, True)


# -- v0 JobManager.Query over gRPC ---------------------------------------------------------

def test_v0_owner_is_the_owning_team_and_names_are_case_sensitive(cluster: Cluster) -> None:
    _create(cluster, "Web-Frontend", owner="alice", team="search")
    _create(cluster, "web-backend", owner="bob", team="ads")
    assert _names(_query(cluster, owner="alice")) == []  # not the owner field
    assert _names(_query(cluster, owner="search")) == ["Web-Frontend"]
    assert _names(_query(cluster, name="web")) == ["web-backend"]
    assert _names(_query(cluster, name="Web")) == ["Web-Frontend"]
    # The summary says which job it is; Peloton's index summary also put the owning
    # team in `owner` (a difference kept: ours carries the real owner).
    (found,) = _query(cluster, owner="search").results
    assert (found.owner, found.owningTeam) == ("alice", "search")


def test_v0_pagination_as_peloton_s_own_integration_test(cluster: Cluster) -> None:
    for i in range(5):
        _create(cluster, f"TestJob-salt-{i}")
    pagination = {"offset": 0, "limit": 2, "maxLimit": 5}
    resp = _query(cluster, keywords=["salt"], pagination=pagination)
    assert len(resp.results) == 2 and resp.pagination.total == 5
    pagination["maxLimit"] = 2
    resp = _query(cluster, keywords=["salt"], pagination=pagination)
    assert len(resp.results) == 2 and resp.pagination.total == 2
    pagination["offset"] = 1
    resp = _query(cluster, keywords=["salt"], pagination=pagination)
    assert len(resp.results) == 1
    # The reply echoes the request's offset and limit, and its spec.
    assert (resp.pagination.offset, resp.pagination.limit) == (1, 2)
    assert resp.spec.pagination.maxLimit == 2 and list(resp.spec.keywords) == ["salt"]


def test_v0_default_page_is_ten_newest_first(cluster: Cluster) -> None:
    for i in range(12):
        _create(cluster, f"job-{i:02d}")
    resp = _query(cluster, keywords=["job-"])
    assert resp.pagination.total == 12 and len(resp.results) == 10
    assert (resp.pagination.offset, resp.pagination.limit) == (0, 0)  # echoed as sent
    assert _names(resp) == [f"job-{i:02d}" for i in range(11, 1, -1)]  # creation_time DESC
    by_name = _query(cluster, keywords=["job-"], pagination={
        "limit": 3, "orderBy": [{"order": "ASC", "property": {"value": "name"}}]})
    assert _names(by_name) == ["job-00", "job-01", "job-02"]


def test_v0_query_without_a_spec_finds_nothing(cluster: Cluster) -> None:
    _create(cluster, "lonely")
    resp = cluster.v0jobs.Query(job_pb2.QueryRequest(summaryOnly=True), timeout=10)
    assert list(resp.results) == [] and resp.pagination.total == 0
    assert not resp.HasField("spec") and not resp.HasField("error")


def test_v0_records_leave_instance_configs_out(cluster: Cluster) -> None:
    config = batch_config(2)
    config.name = "with-instances"
    config.instanceConfig[1].name = "special"
    resp = cluster.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    assert not resp.HasField("error")
    got = cluster.v0jobs.Query(job_pb2.QueryRequest(spec={"name": "with-instances"}), timeout=10)
    (record,) = got.records
    assert record.config.name == "with-instances" and not record.config.instanceConfig
    assert len(got.results) == 1  # Peloton returns the summaries too


def test_v0_respool_id_filters(cluster: Cluster) -> None:
    _create(cluster, "in-pool")
    found = cluster.v0jobs.Query(job_pb2.QueryRequest(respoolID={"value": POOL}, spec={},
                                                      summaryOnly=True), timeout=10)
    assert _names(found) == ["in-pool"]
    other = cluster.v0jobs.Query(job_pb2.QueryRequest(respoolID={"value": "respool-other"},
                                                      spec={}, summaryOnly=True), timeout=10)
    assert _names(other) == []


# -- v1alpha QueryJobs ------------------------------------------------------------------------

def test_v1_query_jobs_pages_and_echoes_as_peloton(cluster: Cluster) -> None:
    for i in range(3):
        spec = service_spec(1, name=f"svc-{i}")
        spec.owning_team = "infra"
        create(cluster, spec)
    resp = cluster.jobs.QueryJobs(svc.QueryJobsRequest(spec={
        "owner": "infra", "pagination": {"offset": 1, "limit": 1}}), timeout=10)
    assert [r.name for r in resp.records] == ["svc-1"]
    assert (resp.pagination.offset, resp.pagination.limit, resp.pagination.total) == (1, 1, 3)
    assert resp.spec.owner == "infra"
    # A pool path that names no pool is no filter in Peloton (its lookup answered an
    # error inside the reply, which QueryJobs read as "no pool").
    anywhere = cluster.jobs.QueryJobs(svc.QueryJobsRequest(spec={
        "respool": {"value": "/nowhere"}}), timeout=10)
    assert anywhere.pagination.total == 3


# -- tasks: v0 TaskManager.Query and v1alpha QueryPods -----------------------------------------

def test_task_queries_page_ten_by_default_and_sort_as_peloton(cluster: Cluster) -> None:
    jid = _create(cluster, "many", instances=12)
    cluster.until(lambda: len(cluster.jm.cache.get(jid) or ()) == 12, "12 tasks created")
    stub = tasks_stub(cluster)
    resp = stub.Query(task_pb2.QueryRequest(jobId={"value": jid}), timeout=10)
    assert resp.pagination.total == 12
    assert [r.instanceId for r in resp.records] == list(range(10))  # default limit, by instance
    desc = stub.Query(task_pb2.QueryRequest(jobId={"value": jid}, spec={"pagination": {
        "limit": 3, "offset": 1,
        "orderBy": [{"order": "DESC", "property": {"value": "instanceId"}}]}}), timeout=10)
    assert [r.instanceId for r in desc.records] == [10, 9, 8]
    assert (desc.pagination.offset, desc.pagination.limit) == (1, 3)
    # Names are the task config's name (batch_config leaves it empty), not pod names.
    named = stub.Query(task_pb2.QueryRequest(jobId={"value": jid}, spec={"names": ["x"]}),
                       timeout=10)
    assert named.pagination.total == 0

    pods = cluster.jobs.QueryPods(svc.QueryPodsRequest(job_id=job_id(jid), summary_only=True),
                                  timeout=10)
    assert len(pods.pods) == 10 and pods.pagination.total == 12
    paged = cluster.jobs.QueryPods(svc.QueryPodsRequest(
        job_id=job_id(jid), summary_only=True, spec={"pagination": {"limit": 20}},
        pagination={"offset": 4, "limit": 1}), timeout=10)
    # Peloton pages by spec.pagination and echoes the request's own pagination.
    assert len(paged.pods) == 12
    assert (paged.pagination.offset, paged.pagination.limit) == (4, 1)


def test_task_get_lists_every_run_that_ended(cluster: Cluster) -> None:
    """Peloton's TaskManager.Get (pkg/jobmgr/tasksvc/handler.go): `result` is the current
    run; `results` one TaskInfo per terminal pod event of every run, newest first, with the
    task's config and a runtime of state, ids, host, agent, message and reason."""
    config = batch_config(1)
    config.defaultConfig.restartPolicy.maxFailures = 3
    resp = cluster.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    jid = resp.jobId.value
    stub = tasks_stub(cluster)

    def current() -> Any:
        try:
            got = stub.Get(task_pb2.GetRequest(jobId={"value": jid}, instanceId=0), timeout=10)
        except grpc.RpcError as exc:  # the job engine creates the task after Create replies
            assert exc.code() is grpc.StatusCode.NOT_FOUND
            return None
        return got if got.HasField("result") else None

    def fail(run: int) -> None:
        name = f"{jid}-0-{run}"
        cluster.until(lambda: name in cluster.hosts.runs(), f"run {run} launched")
        cluster.until(lambda: (got := current()) is not None and
                      got.result.runtime.mesosTaskId.value == name and
                      got.result.runtime.state == task_pb2.RUNNING, f"run {run} running")
        cluster.hosts.emit(name, TaskState.FAILED, cluster.hosts.runs()[name], f"boom {run}")

    first = cluster.until(current, "the task")
    assert list(first.results) == []  # nothing ended yet
    fail(1)
    fail(2)
    got = cluster.until(lambda: (g := current()) is not None and
                        g.result.runtime.mesosTaskId.value == f"{jid}-0-3" and g, "run 3")
    ended = [(r.runtime.mesosTaskId.value, r.runtime.prevMesosTaskId.value,
              task_pb2.TaskState.Name(r.runtime.state), r.runtime.message) for r in got.results]
    assert ended == [(f"{jid}-0-2", f"{jid}-0-1", "FAILED", "boom 2"),
                     (f"{jid}-0-1", f"{jid}-0-0", "FAILED", "boom 1")]
    for run in got.results:
        assert run.config == got.result.config and run.instanceId == 0
        assert run.jobId.value == jid and run.runtime.host
        assert run.runtime.HasField("agentID")
