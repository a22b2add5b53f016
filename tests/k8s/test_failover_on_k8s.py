"""Separate daemons with ZooKeeper election driving Kubernetes, and pods nobody knows.

The host manager is `peloton hostmgr` with `backend: k8s:<kubeconfig>` and a `kubernetes:`
section, signed in as the least-privilege scheduler account.  When the leading host manager is
killed -9, the standby leads: it lists the pods that exist and adopts them (the running pod
keeps its uid, no second pod of the run appears), and new jobs complete.  A pod of ours whose
run the job manager does not know (left by an earlier cluster) is deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.cluster import eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster, fake_labels
from tests.harness.multiproc import MultiCluster
from tests.harness.procs import wait_for
from tests.integration.test_multiprocess import FAILOVER, POOL, SESSION, leader_port

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e, pytest.mark.timeout(300)]

JOB = """\
name: {name}
owningteam: test
description: "a job on Kubernetes"
instancecount: {count}
sla: {{priority: 1, preemptible: true}}
defaultconfig:
  resource: {{cpulimit: 0.1, memlimitmb: 32, disklimitmb: 10}}
  command: {{shell: true, value: 'true'}}
  labels:
{labels}
"""


@pytest.fixture
def nodes(kube: KubeControlPlane, tmp_path: Path) -> Iterator[KubeCluster]:
    """Two kwok nodes of this test (the `peloton up` of KubeCluster is not started)."""
    k8s = KubeCluster(kube, Path("unused"), tmp_path, nodes=2)
    try:
        yield k8s
    finally:
        k8s.close()


@pytest.fixture
def cluster(zookeeper: str, tmp_path: Path) -> Iterator[MultiCluster]:
    mc = MultiCluster(tmp_path, zookeeper, root=f"/mpk-{uuid.uuid4().hex[:10]}",
                      session_timeout=SESSION)
    try:
        yield mc
    finally:
        mc.close()


def _job_id(output: str) -> str:
    return next(w for w in output.split() if len(w) == 36 and w.count("-") == 4)


def test_separate_daemons_on_kubernetes_survive_a_host_manager_failover(
        cluster: MultiCluster, nodes: KubeCluster, kube_scheduler: Path) -> None:
    backend = f"k8s:{kube_scheduler}"
    settings = {**nodes.settings, "resend_secs": 1.0}
    leader = cluster.spawn("hostmgr", backend=backend, kubernetes=settings)
    daemons = [cluster.spawn(role) for role in ("resmgr", "placement", "jobmgr")]
    cluster.ready(leader, *daemons)
    for role in ("resmgr", "hostmgr", "jobmgr"):
        wait_for(lambda r=role: cluster.leader(r) is not None, 15, f"a {role} leader")  # type: ignore[misc]
    wait_for(lambda: nodes.nodes[0] in cluster.cli("host", "query", check=False).stdout, 20,
             "the kwok nodes as hosts")
    (cluster.base / "pool.yaml").write_text(POOL)
    cluster.cli("respool", "create", "/DefaultResPool", str(cluster.base / "pool.yaml"))

    # A service-like task (its pod runs until deleted) that lives across the failover.
    (cluster.base / "long.yaml").write_text(JOB.format(name="long", count=1, labels=fake_labels()
                                                       or "  - {key: team, value: test}"))
    long_id = _job_id(cluster.cli("job", "create", "/DefaultResPool",
                                  str(cluster.base / "long.yaml")).stdout)
    eventually(lambda: len(nodes.running_pods(long_id)) == 1, 60, "the long task's pod running")
    (pod,) = nodes.pods(long_id)
    uid = pod["metadata"]["uid"]

    standby = cluster.spawn("hostmgr", "hostmgr-2", args=("--backend", backend), kubernetes=settings)
    cluster.ready(standby)
    cluster.kill9(leader)
    wait_for(lambda: leader_port(cluster, "hostmgr") == standby.port, FAILOVER,
             "the standby host manager to lead")
    # Adopted: the same pod (uid), still the job's running task, and no second pod of it.
    eventually(lambda: "RUNNING" in cluster.cli("task", "list", long_id, check=False).stdout, 30,
               "the long task RUNNING under the new leader")
    assert [p["metadata"]["uid"] for p in nodes.pods(long_id)] == [uid]

    # New work completes through the new leader.
    (cluster.base / "after.yaml").write_text(JOB.format(
        name="after", count=3, labels=fake_labels(exit_code=0, run_secs=0.5)))
    out = cluster.cli("job", "create", "/DefaultResPool", str(cluster.base / "after.yaml"),
                      "--wait", "--wait-timeout", "60s", timeout=90).stdout
    assert "SUCCEEDED" in out, out + cluster.logs(60)

    cluster.cli("job", "stop", long_id)
    eventually(lambda: not nodes.pods(long_id), 60, "the long task's pod deleted by the new leader")


def test_a_pod_of_a_run_nobody_knows_is_deleted(nodes: KubeCluster, kube_scheduler: Path) -> None:
    from tests.k8s.manifests import apply

    stray_run = f"{uuid.uuid4()}-0-1"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": stray_run, "namespace": "pelotonpy",
                        "labels": {"pelotonpy.dev/cluster": nodes.name},
                        "annotations": {"pelotonpy.dev/run-id": stray_run}},
           "spec": {"nodeName": nodes.nodes[0], "schedulerName": "pelotonpy",
                    "restartPolicy": "Never",
                    "containers": [{"name": "task", "image": "busybox:1.36"}]}}
    apply(nodes.kube.api(), [pod], dry_run=False)
    eventually(lambda: any(p["metadata"]["name"] == stray_run for p in nodes.pods()), 30,
               "the stray pod exists")
    nodes.up.extra[nodes.up.extra.index("--backend") + 1] = f"k8s:{kube_scheduler}"
    nodes.start()
    eventually(lambda: not any(p["metadata"]["name"] == stray_run for p in nodes.pods()), 60,
               "the stray pod deleted: the job manager knows no such run")
