"""Placement on Kubernetes through `peloton up --backend k8s:...`: our resource manager and
placement decide, the pods land bound to the chosen kwok node.

- a gang (sla.minimumRunningInstances) that does not fit the free room places none of its pods,
  and all of them once a node joins;
- GPU tasks land only on GPU nodes (their pods request nvidia.com/gpu), plain ones never there;
- a HOST label constraint reads the nodes' labels (zone=east);
- a tainted node is an exclusive host: only tasks whose constraint names `peloton/exclusive`
  land there, and their pods tolerate the taint;
- a pool at its limit keeps the extra tasks PENDING with the reason shown, and runs them once
  its limit is raised;
- a cordoned node takes no new pods but keeps its running ones;
- a NotReady node is not offered until it is Ready again.

Each test has its own `KubeCluster` (kwok nodes and cluster name of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.e2e.conftest import host_label, write_job, write_pool
from tests.e2e.test_batch_jobs import create, task_states
from tests.harness.cluster import UpCluster, eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster
from tests.harness.kube_nodes import reply_json

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]



def gang_job(path: Path, size: int) -> Path:
    """Make instances 0..size-1 of the job in `path` a gang (sla.minimumRunningInstances)."""
    text = path.read_text()
    path.write_text(text.replace("sla:\n", f"sla:\n  minimumRunningInstances: {size}\n", 1))
    return path


def with_cluster(kube: KubeControlPlane, kubeconfig: Path, base: Path,
                 body: Callable[[KubeCluster], None], **kwargs: Any) -> None:
    """Run `body` on a started KubeCluster of its own, closed whatever happens."""
    cluster = KubeCluster(kube, kubeconfig, base, **kwargs)
    try:
        cluster.start()
        body(cluster)
    finally:
        cluster.close()


def pool(up: UpCluster, base: Path, **limits: float) -> None:
    up.cli("respool", "create", "/k8s", str(write_pool(base, "k8s", **limits)))


def running(k8s: KubeCluster, job_id: str, count: int) -> dict[str, str]:
    """Pod name -> node once exactly `count` of the job's pods run (and its tasks are RUNNING)."""
    def check() -> dict[str, str] | None:
        pods = k8s.running_pods(job_id)
        states = task_states(k8s.up, job_id)
        if len(pods) == count and list(states.values()).count("RUNNING") == count:
            return pods
        return None
    try:
        found: dict[str, str] = eventually(check, 120, f"{count} pods of {job_id} running")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; pods {k8s.running_pods(job_id)}, tasks "
                             f"{task_states(k8s.up, job_id)}, waiting "
                             f"{waiting_reasons(k8s.up, job_id)}") from None
    return found


def waiting_reasons(up: UpCluster, job_id: str) -> dict[int, str]:
    """instance -> runtime reason of the tasks that are not RUNNING."""
    tasks = up.client.list_tasks(job_id).result.value
    return {i: t.runtime.reason for i, t in tasks.items()
            if t.runtime.state != task_pb2.TaskState.RUNNING}


def placement_failed(up: UpCluster, job_id: str, instances: set[int]) -> dict[int, str]:
    """Wait until placement tried the instances and found no host; their reasons."""
    def check() -> dict[int, str] | None:
        why = waiting_reasons(up, job_id)
        if set(why) == instances and all("last placement attempt" in r for r in why.values()):
            return why
        return None
    found: dict[int, str] = eventually(check, 90, f"placement of {sorted(instances)} failed")
    return found


def node_patch(kube: KubeControlPlane, name: str, body: dict[str, Any]) -> None:
    from kubernetes import client

    reply_json(client.CoreV1Api(kube.api()).patch_node(name, body, _preload_content=False))


def test_a_gang_places_all_or_nothing(kube: KubeControlPlane, kube_scheduler: Path,
                                      tmp_path: Path) -> None:
    def body(k8s: KubeCluster) -> None:
        up = k8s.up
        pool(up, tmp_path)
        # 3 x 1.2 cpu: the pool may admit 3.6 of the cluster's 4 cpus, but each 2-cpu node
        # holds one task only: 2 of the 3 could run, so the gang must not start at all.
        job = gang_job(write_job(tmp_path, "gang", "run", count=3, cpu=1.2, mem=64), 3)
        job_id = create(up, "/k8s", job)
        placement_failed(up, job_id, {0, 1, 2})
        assert k8s.pods(job_id) == [], "no pod of an unplaceable gang may be created"
        assert set(task_states(up, job_id).values()) <= {"PENDING", "READY", "PLACING",
                                                         "INITIALIZED"}
        new = k8s.add_nodes(1, cpu="2")
        pods = running(k8s, job_id, 3)
        assert sorted(pods) == [f"{job_id}-{i}-1" for i in range(3)]
        assert len(set(pods.values())) == 3 and new[0] in pods.values()
        # Placed together: the pods were created within a moment of each other.
        created = sorted(p["metadata"]["creationTimestamp"] for p in k8s.pods(job_id))
        first, last = (datetime.fromisoformat(t.replace("Z", "+00:00"))
                       for t in (created[0], created[-1]))
        assert (last - first).total_seconds() <= 3, created

    with_cluster(kube, kube_scheduler, tmp_path, body, nodes=2, cpu="2")


def test_gpu_tasks_land_only_on_gpu_nodes_and_plain_ones_never(
        kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> None:
    def body(k8s: KubeCluster) -> None:
        (gpu_node,) = k8s.add_nodes(1, gpus=2)
        plain_nodes = set(k8s.nodes) - {gpu_node}
        up = k8s.up
        eventually(lambda: gpu_node in {h.hostname for h in up.client.list_host_capacity().hosts
                                        if h.connected}, 60, "the GPU node is a host")
        pool(up, tmp_path, gpu_limit=4)
        gpu = create(up, "/k8s", write_job(tmp_path, "gpu", "train", count=2, cpu=0.5, gpu=1))
        pods = running(k8s, gpu, 2)
        assert set(pods.values()) == {gpu_node}
        for pod in k8s.pods(gpu):
            resources = pod["spec"]["containers"][0]["resources"]
            assert resources["requests"]["nvidia.com/gpu"] == "1"
            assert resources["limits"]["nvidia.com/gpu"] == "1"
        plain = create(up, "/k8s", write_job(tmp_path, "plain", "serve", count=6, cpu=0.5))
        placed = running(k8s, plain, 6)
        assert set(placed.values()) <= plain_nodes, placed
        for pod in k8s.pods(plain):
            assert "nvidia.com/gpu" not in pod["spec"]["containers"][0]["resources"]["limits"]

    with_cluster(kube, kube_scheduler, tmp_path, body, nodes=2)


def test_a_host_label_constraint_reads_the_node_labels(kube: KubeControlPlane,
                                                        kube_scheduler: Path,
                                                        tmp_path: Path) -> None:
    def body(k8s: KubeCluster) -> None:
        (east,) = k8s.add_nodes(1, labels={"zone": "east"})
        up = k8s.up
        eventually(lambda: east in {h.hostname for h in up.client.list_host_capacity().hosts
                                    if h.connected}, 60, "the east node is a host")
        pool(up, tmp_path)
        job_id = create(up, "/k8s", write_job(tmp_path, "east", "serve", count=3, cpu=0.5,
                                              extra=host_label("zone", "east")))
        assert set(running(k8s, job_id, 3).values()) == {east}
        # No node is in zone west: the job is refused at once, saying why.
        refused = up.cli("job", "create", "/k8s", str(write_job(
            tmp_path, "west", "serve", count=1, extra=host_label("zone", "west"))), check=False)
        assert refused.returncode != 0
        assert "zone=west" in refused.stdout + refused.stderr, refused

    with_cluster(kube, kube_scheduler, tmp_path, body, nodes=2)


def test_a_tainted_node_takes_only_tasks_naming_it(kube: KubeControlPlane,
                                                    kube_scheduler: Path,
                                                    tmp_path: Path) -> None:
    taint = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}

    def body(k8s: KubeCluster) -> None:
        (plain_node,) = k8s.nodes
        (tainted,) = k8s.add_nodes(1, cpu="4", taints=[taint])
        up = k8s.up
        eventually(lambda: tainted in {h.hostname for h in up.client.list_host_capacity().hosts
                                       if h.connected}, 60, "the tainted node is a host")
        pool(up, tmp_path)
        # 3 x 1 cpu, the plain node holds 2; the tainted node's 4 free cpus are not for them.
        plain = create(up, "/k8s", write_job(tmp_path, "plain", "serve", count=3, cpu=1))
        pods = running(k8s, plain, 2)
        assert set(pods.values()) == {plain_node}
        (left,) = placement_failed(up, plain, {i for i in range(3)
                                               if f"{plain}-{i}-1" not in pods}).values()
        assert "exclusive" in left, left
        exclusive = create(up, "/k8s", write_job(
            tmp_path, "ml", "train", count=2, cpu=1,
            extra=host_label("peloton/exclusive", "dedicated=ml")))
        assert set(running(k8s, exclusive, 2).values()) == {tainted}
        for pod in k8s.pods(exclusive):
            assert {"key": "dedicated", "operator": "Equal", "value": "ml",
                    "effect": "NoSchedule"} in pod["spec"]["tolerations"]
        assert all(p["spec"]["nodeName"] == plain_node for p in k8s.pods(plain))
        assert len(k8s.running_pods(plain)) == 2

    with_cluster(kube, kube_scheduler, tmp_path, body, nodes=1, cpu="2")


def test_a_pool_at_its_limit_keeps_tasks_pending_with_the_reason_until_room_appears(
        kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> None:
    def body(k8s: KubeCluster) -> None:
        up = k8s.up
        pool(up, tmp_path, cpu_limit=1)
        job_id = create(up, "/k8s", write_job(tmp_path, "capped", "serve", count=4, cpu=0.5))
        first = running(k8s, job_id, 2)

        def pending() -> dict[int, str] | None:
            why = waiting_reasons(up, job_id)
            states = task_states(up, job_id)
            if len(why) == 2 and all(states[i] == "PENDING" and r for i, r in why.items()):
                return why
            return None
        why = eventually(pending, 60, "2 tasks PENDING with a reason")
        # The pool's entitlement is its limit here (the cluster has 12 cpus): the reason says
        # it is all in use, and `job explain` names the limit.
        for reason in why.values():
            assert "waiting for admission in pool /k8s" in reason, reason
            assert "needs 0.5 cpu, 1 of its 1 cpu entitled in use" in reason, reason
        inst = min(why)
        message = up.client.get_task(job_id, inst).result.runtime.message
        assert message.startswith("waiting for admission in pool /k8s"), message
        shown = " ".join(up.cli("task", "get", job_id, str(inst)).stdout.split())
        assert "PENDING" in shown and "the pool is at its entitlement" in shown, shown
        explained = " ".join(up.cli("job", "explain", job_id).stdout.split())
        assert "limit 1 cpu" in explained and "Waiting, instances" in explained, explained
        assert len(k8s.pods(job_id)) == 2, "no pod for a task the pool has no room for"
        # Room appears: the pool's limit is raised, the waiting tasks run too.
        up.cli("respool", "update", "/k8s", str(write_pool(tmp_path, "k8s", cpu_limit=2)))
        pods = running(k8s, job_id, 4)
        assert first.items() <= pods.items()

    with_cluster(kube, kube_scheduler, tmp_path, body, nodes=2)


def test_a_cordoned_node_gets_no_new_pods_but_keeps_its_running_ones(
        kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> None:
    def body(k8s: KubeCluster) -> None:
        node0, node1 = k8s.nodes
        up = k8s.up
        pool(up, tmp_path)
        kept = create(up, "/k8s", write_job(tmp_path, "kept", "serve", count=1,
                                            extra=host_label("hostname", node0)))
        assert set(running(k8s, kept, 1).values()) == {node0}
        (before,) = [p["metadata"]["uid"] for p in k8s.pods(kept)]
        node_patch(kube, node0, {"spec": {"unschedulable": True}})
        # A job that may only run on the cordoned node waits; a free one goes elsewhere.
        pinned = create(up, "/k8s", write_job(tmp_path, "pinned", "serve", count=1,
                                              extra=host_label("hostname", node0)))
        free = create(up, "/k8s", write_job(tmp_path, "free", "serve", count=4, cpu=0.5))
        assert set(running(k8s, free, 4).values()) == {node1}
        placement_failed(up, pinned, {0})
        assert k8s.pods(pinned) == []
        assert [p["metadata"]["uid"] for p in k8s.pods(kept)] == [before]
        assert k8s.running_pods(kept) == {f"{kept}-0-1": node0}
        assert task_states(up, kept) == {0: "RUNNING"}
        # Uncordoned: the waiting task runs there.
        node_patch(kube, node0, {"spec": {"unschedulable": False}})
        assert set(running(k8s, pinned, 1).values()) == {node0}

    with_cluster(kube, kube_scheduler, tmp_path, body, nodes=2)


def test_a_not_ready_node_is_not_offered(kube: KubeControlPlane, kube_scheduler: Path,
                                         tmp_path: Path) -> None:
    def body(k8s: KubeCluster) -> None:
        node0, node1 = k8s.nodes
        up = k8s.up

        def connected() -> set[str]:
            return {h.hostname for h in up.client.list_host_capacity().hosts if h.connected}
        eventually(lambda: connected() == {node0, node1}, 60, "both nodes are hosts")
        kube.nodes.set_ready(node0, False)
        eventually(lambda: connected() == {node1}, 60, "the NotReady node is no host")
        pool(up, tmp_path)
        # 4 x 1 cpu: the Ready node holds 2, the NotReady one would hold the others.
        job_id = create(up, "/k8s", write_job(tmp_path, "ready", "serve", count=4, cpu=1))
        assert set(running(k8s, job_id, 2).values()) == {node1}
        # The cluster is the Ready node alone: the others wait for room, with no pod.
        waiting = eventually(lambda: (w := waiting_reasons(up, job_id)) and len(w) == 2
                             and all(w.values()) and w, 60, "2 tasks waiting with a reason")
        assert all("waiting for admission" in r for r in waiting.values()), waiting
        assert all(p["spec"]["nodeName"] == node1 for p in k8s.pods(job_id))
        kube.nodes.set_ready(node0, True)
        pods = running(k8s, job_id, 4)
        assert sorted(pods.values()) == [node0, node0, node1, node1]

    with_cluster(kube, kube_scheduler, tmp_path, body, nodes=2, cpu="2")
