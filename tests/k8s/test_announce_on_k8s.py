"""Service discovery on the Kubernetes backend: an announced Aurora job gets a Service.

An Apache-Thrift-generated Aurora client deploys a service whose Thermos data has an
Announcer through `peloton up --backend k8s:...` (kwok nodes of its own, the least-privilege
scheduler account of docs/deploy/kubernetes/rbac.yaml).  The bridge marks the pods
`peloton/announce`; the backend makes a Service that selects the job's pods by
`pelotonpy.dev/job-id` and targets their named ports, and deletes it once the job is
killed (after `service_linger_secs`, short here).  kwok pods run until deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.aurora_apache_client import connect, generate
from tests.harness.cluster import eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
def k8s(kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> Iterator[KubeCluster]:
    """`peloton up` on three kwok nodes, announced jobs' Services deleted 1 s after their end."""
    cluster = KubeCluster(kube, kube_scheduler, tmp_path, settings={"service_linger_secs": 1.0})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


def task_config(t: Any, name: str) -> Any:
    data = json.dumps({"task": {"name": name, "processes": [{"name": "web", "cmdline": "sleep 1000"}]},
                       "announce": {"primary_port": "http", "portmap": {"aurora": "http"}}})
    return t.TaskConfig(
        job=t.JobKey(role="www", environment="prod", name=name), owner=t.Identity(user="www"),
        isService=True, priority=0, maxTaskFailures=-1, production=False, tier="preemptible",
        resources=[t.Resource(numCpus=0.1), t.Resource(ramMb=32), t.Resource(diskMb=16),
                   t.Resource(namedPort="http"), t.Resource(namedPort="admin")],
        executorConfig=t.ExecutorConfig(name="AuroraExecutor", data=data),
        container=t.Container(mesos=t.MesosContainer()))


def test_an_announced_job_gets_a_service_until_it_is_killed(k8s: KubeCluster, tmp_path: Path) -> None:
    admin, t = generate(tmp_path / "aurora-client")
    client = connect(admin, f"http://127.0.0.1:{k8s.up.aurora_port}/api", "json")
    name = f"web{k8s.tag}"
    job = t.JobKey(role="www", environment="prod", name=name)
    try:
        config = t.JobConfiguration(key=job, owner=t.Identity(user="www"), instanceCount=2,
                                    taskConfig=task_config(t, name))
        resp = client.createJob(config)
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        service = eventually(lambda: next(iter(k8s.services()), None), 120, "the job's Service")
        pods = eventually(lambda: len(p := k8s.pods()) == 2 and p, 60, "the job's two pods")
        job_id = pods[0]["metadata"]["labels"]["pelotonpy.dev/job-id"]
        assert {p["metadata"]["annotations"]["peloton/announce"] for p in pods} == {f"www/prod/{name}"}

        meta, spec = service["metadata"], service["spec"]
        assert meta["name"] == f"{name}-prod-www" and meta["namespace"] == "pelotonpy"
        assert spec["selector"] == {"pelotonpy.dev/cluster": k8s.name, "pelotonpy.dev/job-id": job_id}
        ports = {p["name"]: (p["port"], p["targetPort"]) for p in spec["ports"]}
        assert ports == {"http": (80, "http"), "admin": (10000, "admin"), "aurora": (10001, "http")}
        # The named target ports are the pods' own port names, each pod with its own number.
        for pod in pods:
            names = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
            assert names == {"http", "admin"}, pod["spec"]["containers"][0]["ports"]
        assert len(k8s.services()) == 1, "one Service per job, not per pod"

        assert client.killTasks(job, None, "done").responseCode == t.ResponseCode.OK
        eventually(lambda: not k8s.services(), 60, "the Service deleted with the job")
        assert not k8s.running_pods(job_id)
    finally:
        client._iprot.trans.close()
