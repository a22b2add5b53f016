"""Batch jobs through `peloton up --backend k8s:...`: our pools and placement decide, pods run.

Each test has its own kwok nodes and cluster name (tests/harness/kube_cluster.py), signed in
with the least-privilege scheduler account.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import create, job_state, task_states
from tests.harness.cluster import eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster, fake_labels

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
def k8s(kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> Iterator[KubeCluster]:
    """`peloton up` on three 4-cpu kwok nodes of its own."""
    cluster = KubeCluster(kube, kube_scheduler, tmp_path).start()
    try:
        yield cluster
    finally:
        cluster.close()


def test_batch_job_succeeds_with_its_pods_on_the_nodes(k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    up.cli("respool", "create", "/k8s", str(write_pool(tmp_path, "k8s")))
    job = write_job(tmp_path, "ok", "echo hi", count=4, cpu=0.5, mem=64,
                    task_labels=fake_labels(exit_code=0, run_secs=1))
    job_id = create(up, "/k8s", job)
    eventually(lambda: job_state(up, job_id) == "SUCCEEDED", 120, "job SUCCEEDED")
    assert set(task_states(up, job_id).values()) == {"SUCCEEDED"}
    pods = k8s.pods(job_id)
    # Finished pods stay finished_pod_ttl_secs after their end was acknowledged.
    assert {p["metadata"]["name"] for p in pods} <= {f"{job_id}-{i}-1" for i in range(4)}
    for pod in pods:
        spec = pod["spec"]
        assert spec["nodeName"] in k8s.nodes and spec["schedulerName"] == "pelotonpy"
        assert spec["restartPolicy"] == "Never"
        limits = spec["containers"][0]["resources"]
        assert limits["requests"] == limits["limits"] and limits["limits"]["cpu"] == "500m"
    eventually(lambda: not k8s.pods(job_id), 60, "finished pods deleted after their TTL")


def test_failed_pods_report_their_exit_code_and_are_retried(k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    up.cli("respool", "create", "/k8s", str(write_pool(tmp_path, "k8s")))
    job = write_job(tmp_path, "bad", "exit 3", count=2, max_failures=2,
                    task_labels=fake_labels(exit_code=3, run_secs=0.5))
    job_id = create(up, "/k8s", job)
    eventually(lambda: job_state(up, job_id) == "FAILED", 120, "job FAILED")
    for inst in (0, 1):
        info = up.client.get_task(job_id, inst).result
        assert info.runtime.message.startswith("exited with code 3"), info.runtime
        assert info.runtime.failureCount == 2
    runs = up.cli("task", "get", job_id, "0").stdout
    assert "3" in runs


def test_an_oom_killed_pod_says_so(k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    up.cli("respool", "create", "/k8s", str(write_pool(tmp_path, "k8s")))
    job = write_job(tmp_path, "oom", "eat memory", count=1,
                    task_labels=fake_labels(exit_code=137, reason="OOMKilled"))
    job_id = create(up, "/k8s", job)
    eventually(lambda: job_state(up, job_id) == "FAILED", 120, "job FAILED")
    runtime = up.client.get_task(job_id, 0).result.runtime
    assert "OOMKilled" in runtime.message and runtime.reason == "REASON_CONTAINER_LIMITATION_MEMORY"


def test_an_image_that_cannot_be_pulled_fails_the_run_and_its_pod_goes(
        k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    up.cli("respool", "create", "/k8s", str(write_pool(tmp_path, "k8s")))
    job = write_job(tmp_path, "pull", "true", count=1,
                    task_labels=fake_labels(waiting_reason="ErrImagePull"))
    job_id = create(up, "/k8s", job)
    eventually(lambda: job_state(up, job_id) == "FAILED", 120, "job FAILED")
    runtime = up.client.get_task(job_id, 0).result.runtime
    assert "ErrImagePull" in runtime.message
    eventually(lambda: not k8s.pods(job_id), 60, "the pod deleted")


def test_a_pool_mapped_to_a_namespace_runs_its_pods_there_and_a_refused_pod_says_why(
        kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> None:
    from tests.k8s.manifests import MANIFESTS, apply, load_manifests

    k8s = KubeCluster(kube, kube_scheduler, tmp_path)
    namespace = f"{k8s.name}-team"
    admin = kube.api()
    # The team's namespace, with the scheduler's namespaced role bound there too.
    roles = [obj for obj in load_manifests(MANIFESTS / "rbac.yaml")
             if obj["kind"] in ("Role", "RoleBinding")]
    for obj in roles:
        obj["metadata"]["namespace"] = namespace
    apply(admin, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                  *roles], dry_run=False)
    try:
        k8s.start()
        up = k8s.up
        up.cli("respool", "create", "/team", str(write_pool(tmp_path, "team")))
        pool_id = up.cli("respool", "lookup", "/team").stdout.strip().split()[-1]
        k8s.up.stop()
        k8s.configure(pool_namespaces={pool_id: namespace})
        k8s.start()
        job_id = create(up, "/team", write_job(tmp_path, "team-job", "true", count=2,
                                               task_labels=fake_labels(exit_code=0, run_secs=30)))
        eventually(lambda: len(k8s.running_pods(job_id)) == 2, 120, "two pods running")
        assert {p["metadata"]["namespace"] for p in k8s.pods(job_id)} == {namespace}

        # A namespace whose LimitRange refuses the task's size: the run fails saying why (a
        # launch failure is the system's, so it is tried again, as any launch failure), and an
        # event says so.
        apply(admin, [{"apiVersion": "v1", "kind": "LimitRange",
                       "metadata": {"name": "small", "namespace": namespace},
                       "spec": {"limits": [{"type": "Container", "max": {"cpu": "50m"}}]}}],
              dry_run=False)
        refused = create(up, "/team", write_job(tmp_path, "refused", "true", count=1))

        def refusal() -> str:
            events = up.cli("pod", "events", refused, "0", check=False).stdout
            return events if "refused the pod" in events else ""

        events = eventually(refusal, 120, "a run failed with the API server's refusal")
        assert "maximum cpu usage per Container is 50m" in " ".join(events.split()), events
        assert not k8s.pods(refused)

        def failed_create_events() -> list[str]:
            from tests.k8s.manifests import call

            _, events = call(admin, "GET", f"/api/v1/namespaces/{namespace}/events")
            return [e["message"] for e in events.get("items", []) if e.get("reason") == "FailedCreate"]

        eventually(lambda: any(refused in m for m in failed_create_events()), 60,
                   "a FailedCreate event for the refused run")
    finally:
        k8s.close()
