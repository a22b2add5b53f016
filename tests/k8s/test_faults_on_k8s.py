"""Faults under `peloton up --backend k8s:...` on the real control plane:

- a node deleted under running pods: their runs are LOST, run again on the other nodes, and the
  old pods are gone;
- `peloton up` killed -9 and started again: the running pods are adopted (same names and uids,
  no second pod per instance, tasks still RUNNING) and a later kill deletes them;
- the API server restarted mid-job: the batch job still ends SUCCEEDED, each instance run once.

A watch that expires (410 Gone) is not forced here: the API server answers 410 only when a
watch it ended on its own is re-opened from a resourceVersion its watch cache no longer holds
(etcd compaction does not reach that cache), and after a broken watch (the restart below) the
backend lists again without re-watching.  tests/unit/hostmgr/test_k8s_backend.py plays the
410 with an in-process API.

`restart_apiserver` affects every test on the shared control plane: fine, tests run one at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import create, job_state, task_states
from tests.harness.cluster import UpCluster, eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster, fake_labels

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def k8s(kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> Iterator[KubeCluster]:
    """`peloton up` on three 4-cpu kwok nodes of its own."""
    cluster = KubeCluster(kube, kube_scheduler, tmp_path)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def pool(up: UpCluster, base: Path) -> None:
    up.cli("respool", "create", "/k8s", str(write_pool(base, "k8s")))


def all_running(k8s: KubeCluster, job_id: str, count: int) -> dict[str, str]:
    """Pod name -> node once `count` pods of the job run and its tasks are all RUNNING."""
    def check() -> dict[str, str] | None:
        pods = k8s.running_pods(job_id)
        states = task_states(k8s.up, job_id)
        if (len(pods) == count and len(states) == count
                and set(states.values()) == {"RUNNING"}):
            return pods
        return None
    found: dict[str, str] = eventually(check, 120, f"{count} pods of {job_id} running")
    return found


def uids(k8s: KubeCluster, job_id: str) -> dict[str, str]:
    """Pod name -> uid of every pod of the job."""
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in k8s.pods(job_id)}


def runs_of(up: UpCluster, job_id: str, inst: int) -> set[str]:
    """Run ids in an instance's pod events."""
    return {e.taskId.value for e in up.client.get_pod_events(job_id, inst).result}


def test_a_deleted_node_loses_its_runs_and_they_run_again_elsewhere(
        k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    pool(up, tmp_path)
    job_id = create(up, "/k8s", write_job(tmp_path, "movers", "serve", count=4, cpu=0.5))
    before = all_running(k8s, job_id, 4)
    victim = before[f"{job_id}-0-1"]
    lost = sorted(int(name.split("-")[-2]) for name, node in before.items() if node == victim)
    kept = {name: node for name, node in before.items() if node != victim}
    old_uids = uids(k8s, job_id)

    k8s.kube.nodes.delete(victim)

    def moved() -> dict[str, str] | None:
        pods = k8s.running_pods(job_id)
        wanted = {f"{job_id}-{i}-2" for i in lost}
        if wanted <= set(pods) and set(task_states(up, job_id).values()) == {"RUNNING"}:
            return pods
        return None
    after = eventually(moved, 120, f"instances {lost} running again")
    assert victim not in after.values()
    assert set(after) == set(kept) | {f"{job_id}-{i}-2" for i in lost}, after
    # The pods on the deleted node are gone, the others untouched.
    names = set(uids(k8s, job_id))
    assert not any(f"{job_id}-{i}-1" in names for i in lost), names
    assert {n: u for n, u in uids(k8s, job_id).items() if n in kept} == \
        {n: old_uids[n] for n in kept}
    for inst in lost:
        events = list(up.client.get_pod_events(job_id, inst).result)
        first = [e for e in events if e.taskId.value == f"{job_id}-{inst}-1"]
        assert any(e.actualState == "LOST" and victim in e.message for e in first), first
        info = up.client.get_task(job_id, inst).result
        assert info.runtime.mesosTaskId.value == f"{job_id}-{inst}-2"
        assert info.runtime.host != victim


def test_kill_9_and_restart_adopts_the_running_pods(k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    pool(up, tmp_path)
    job_id = create(up, "/k8s", write_job(tmp_path, "survivor", "serve", count=3, cpu=0.5))
    all_running(k8s, job_id, 3)
    before = uids(k8s, job_id)
    assert sorted(before) == [f"{job_id}-{i}-1" for i in range(3)]

    up.kill9()
    assert uids(k8s, job_id) == before, "pods must outlive the scheduler"
    up.start()

    def adopted() -> bool:
        hosts = up.client.list_host_capacity().hosts
        return (sum(h.tasks for h in hosts if h.hostname in k8s.nodes) == 3
                and set(task_states(up, job_id).values()) == {"RUNNING"})
    eventually(adopted, 120, "the 3 runs adopted on their nodes")
    assert uids(k8s, job_id) == before, "an adopted pod was replaced or doubled"
    assert len(k8s.running_pods(job_id)) == 3
    for inst in range(3):
        info = up.client.get_task(job_id, inst).result
        assert info.runtime.mesosTaskId.value == f"{job_id}-{inst}-1"
        assert runs_of(up, job_id, inst) == {f"{job_id}-{inst}-1"}

    up.cli("job", "stop", job_id)
    eventually(lambda: job_state(up, job_id) == "KILLED", 90, "job KILLED")
    eventually(lambda: not k8s.pods(job_id), 60, "the adopted pods deleted")


def test_the_api_server_restarted_mid_job(k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    pool(up, tmp_path)
    job_id = create(up, "/k8s", write_job(tmp_path, "steady", "work", count=4, cpu=0.5,
                                          task_labels=fake_labels(exit_code=0, run_secs=6)))
    all_running(k8s, job_id, 4)
    seen = set(uids(k8s, job_id))

    k8s.kube.restart_apiserver()

    def done() -> bool:
        seen.update(uids(k8s, job_id))
        return job_state(up, job_id) == "SUCCEEDED"
    eventually(done, 120, "job SUCCEEDED after the API server restart")
    assert set(task_states(up, job_id).values()) == {"SUCCEEDED"}
    assert seen == {f"{job_id}-{i}-1" for i in range(4)}, seen
    for inst in range(4):
        assert runs_of(up, job_id, inst) == {f"{job_id}-{inst}-1"}
        assert up.client.get_task(job_id, inst).result.runtime.failureCount == 0
