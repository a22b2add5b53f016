"""Every read that returns tasks says why each waiting one waits (servicers/waiting.py):
v0 task Get/List/Query and v1alpha GetPod/ListPods/QueryPods, from the resource manager's
explanation, the job's own limits, or "unplaceable" once the cluster shrank."""

from __future__ import annotations

from typing import Any

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2 as svc
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from tests.fakes.resmgr import WAITING
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import job_id
from tests.unit.jobmgr_servicers.test_v0_methods import (
    batch_config,
    create_batch,
    task_list,
    tasks_stub,
)

WHY = "waiting for admission in pool /DefaultResPool (2nd of 2 queued): the pool is full"


def _queued(c: Cluster, jid: str, n: int) -> None:
    c.until(lambda: sum(t.job_id == jid for t in c.rm.queued) == n,
            f"{n} tasks of {jid} queued")


def test_every_read_carries_the_resource_managers_reason(cluster: Cluster) -> None:
    cluster.rm.auto_place = False
    jid = create_batch(cluster, 2)
    _queued(cluster, jid, 2)
    cluster.rm.reasons[TaskId(jid, 1)] = WHY
    tasks = task_list(cluster, jid)
    assert tasks[0].runtime.reason == WAITING and tasks[0].runtime.message == WAITING
    assert tasks[1].runtime.reason == WHY
    got = tasks_stub(cluster).Get(task_pb2.GetRequest(jobId={"value": jid}, instanceId=1),
                                  timeout=10)
    assert got.result.runtime.reason == WHY
    query = tasks_stub(cluster).Query(task_pb2.QueryRequest(jobId={"value": jid}), timeout=10)
    assert [t.runtime.reason for t in query.records] == [WAITING, WHY]
    pod = pod_svc_pb2.GetPodRequest(status_only=True)
    pod.pod_name.value = f"{jid}-1"
    assert cluster.pods.GetPod(pod, timeout=10).current.status.reason == WHY
    listed: list[Any] = [p for r in cluster.jobs.ListPods(
        svc.ListPodsRequest(job_id=job_id(jid)), timeout=10) for p in r.pods]
    assert [p.status.message for p in listed] == [WAITING, WHY]
    queried = cluster.jobs.QueryPods(svc.QueryPodsRequest(job_id=job_id(jid)), timeout=10).pods
    assert queried[1].status.reason == WHY


def test_a_task_the_shrunk_cluster_cannot_hold_says_unplaceable(cluster: Cluster) -> None:
    cluster.rm.auto_place = False
    jid = create_batch(cluster, 1)
    _queued(cluster, jid, 1)

    def shrink() -> None:
        for host in cluster.hosts.hosts.values():
            host.capacity = Resources(0.25, 65536, 100_000, 0)

    shrink()
    why = task_list(cluster, jid)[0].runtime.reason
    assert why.startswith("unplaceable: no UP host could hold it now: it asks for 0.5 cpu; "
                          "the largest UP host, host-3, has 0.25 cpu in all (4 hosts checked)")


def test_tasks_held_by_maximum_running_instances_say_so(cluster: Cluster) -> None:
    cluster.rm.auto_place = False
    config = batch_config(3)
    config.sla.maximumRunningInstances = 1
    resp = cluster.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    jid = resp.jobId.value
    _queued(cluster, jid, 1)

    def three_reasons() -> list[str] | None:
        t = task_list(cluster, jid)
        return [t[i].runtime.reason for i in range(3)] if len(t) == 3 else None

    reasons = cluster.until(three_reasons, "three tasks")
    assert reasons[0] == WAITING
    assert all("at most 1 of its tasks run at once" in r for r in reasons[1:]), reasons
