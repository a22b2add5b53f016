"""Services through `peloton up --backend k8s:...`: rolling updates with rollback, stateful and
daemon jobs, host maintenance (cordon) and preemption, on kwok nodes of each test's own.

The same scenarios as tests/e2e/test_services.py, test_sla_maintenance.py and the preemption
test of test_batch_jobs.py, on Kubernetes: every test checks both what the API server holds (pods,
their nodes, annotations, volumes; nodes cordoned) and what Peloton says (task and workflow
states).  kwok's pods run until deleted unless their task labels say how they end
(tests/harness/kube_cluster.fake_labels).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.hostmgr.backends.k8s_volumes import SELECTED_NODE, claim_name
from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import create as create_v0
from tests.e2e.test_batch_jobs import task_states
from tests.e2e.test_persistent_volumes import _volumes as volumes
from tests.e2e.test_services import STATEFUL_JOB, create, pods, replace, running_on, version, wf_state
from tests.harness.cluster import UpCluster, eventually
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_cluster import KubeCluster, fake_labels

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
S = task_pb2.TaskState
EXIT_CODE = "pelotonpy.dev/fake-exit-code"


def start_cluster(kube: KubeControlPlane, kubeconfig: Path, base: Path,
                  **kwargs: Any) -> KubeCluster:
    """A KubeCluster with the pool /svc, whose reservation non-preemptible jobs run in."""
    cluster = KubeCluster(kube, kubeconfig, base, **kwargs)
    try:
        cluster.start()
        cluster.up.cli("respool", "create", "/svc", str(write_pool(
            base, "svc", cpu_res=1, mem_res=1024, disk_res=1000)))
    except BaseException:
        cluster.close()
        raise
    return cluster


@pytest.fixture
def k8s(kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> Iterator[KubeCluster]:
    """`peloton up` on three 4-cpu kwok nodes of its own, with the pool /svc."""
    cluster = start_cluster(kube, kube_scheduler, tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def small(kube: KubeControlPlane, kube_scheduler: Path, tmp_path: Path) -> Iterator[KubeCluster]:
    """`peloton up` on two 2-cpu kwok nodes of its own (4 cpus to fight over)."""
    cluster = KubeCluster(kube, kube_scheduler, tmp_path, nodes=2, cpu="2").start()
    try:
        yield cluster
    finally:
        cluster.close()


def pod_annotations(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("annotations") or {})


def live_pods(k8s: KubeCluster, job_id: str) -> dict[str, dict[str, Any]]:
    """name -> pod of the job's pods that exist and are not being deleted."""
    return {p["metadata"]["name"]: p for p in k8s.pods(job_id)
            if not p["metadata"].get("deletionTimestamp")}


def running_tasks(up: UpCluster, job_id: str) -> dict[int, tuple[str, str]]:
    """instance -> (host, run id) of the job's RUNNING tasks (v0 view)."""
    tasks = up.client.list_tasks(job_id).result.value
    return {i: (t.runtime.host, t.runtime.mesosTaskId.value) for i, t in tasks.items()
            if t.runtime.state == S.RUNNING}


# -- 1. a rolling update that fails and rolls back --------------------------------------------
SERVICE_SPEC = """\
name: {name}
owner: e2e
owningteam: e2e
description: "a service on Kubernetes"
instancecount: {count}
sla:
  priority: 1
  preemptible: false
defaultspec:
{labels}  containers:
  - resource:
      cpulimit: 0.1
      memlimitmb: 32
      disklimitmb: 10
    entrypoint:
      value: '{command}'
"""


def service_spec(base: Path, name: str, command: str, count: int, labels: str = "") -> Path:
    path = base / f"{name}-{abs(hash((command, count, labels)))}.yaml"
    path.write_text(SERVICE_SPEC.format(name=name, count=count, command=command,
                                        labels=f"  labels:\n{labels}\n" if labels else ""))
    return path


def test_a_failing_update_rolls_back_and_the_old_pods_run_again(k8s: KubeCluster,
                                                                tmp_path: Path) -> None:
    up = k8s.up
    job_id = create(up, service_spec(tmp_path, "api", "serve v1", 4))
    eventually(lambda: running_on(up, job_id) == 4 and len(k8s.running_pods(job_id)) == 4, 90,
               "4 instances running, as 4 Running pods")
    old = version(up, job_id).split("-")[0]
    assert set(k8s.running_pods(job_id).values()) <= set(k8s.nodes)
    # The new config's pods die 1 s after they start (exit code 1): with a watch time each such
    # run fails its instance, two failed instances are more than the one tolerated.
    replace(up, job_id, service_spec(tmp_path, "api", "serve v2", 4,
                                     fake_labels(exit_code=1, run_secs=1)), 2,
            "--rollbackOnFailure", "--maxInstanceRetries", "2",
            "--maxTolerableInstanceFailures", "1", "--watch-time", "5")
    seen_bad: set[str] = set()

    def rolled_back() -> bool:
        seen_bad.update(name for name, pod in live_pods(k8s, job_id).items()
                        if pod_annotations(pod).get(EXIT_CODE) == "1")
        return wf_state(up, job_id) == "WORKFLOW_STATE_ROLLED_BACK"

    eventually(rolled_back, 200, "the failing update ROLLED_BACK", interval=0.5)
    assert seen_bad, "no pod of the new config was ever created"

    def back_on_old() -> dict[str, dict[str, Any]] | None:
        live = live_pods(k8s, job_id)
        running = k8s.running_pods(job_id)
        if running_on(up, job_id) == 4 and len(running) == 4 and set(live) == set(running):
            return live
        return None

    live = eventually(back_on_old, 120, "4 instances running again, and only their pods")
    rolled = version(up, job_id).split("-")[0]
    current: dict[str, str] = {}
    for summary in pods(up, job_id):
        pod = up.client.get_pod(summary.pod_name.value, limit=1).current
        assert pod.status.state == pod_pb2.POD_STATE_RUNNING, pod.status
        assert [c.entrypoint.value for c in pod.spec.containers] == ["serve v1"], pod.spec
        current[pod.status.pod_id.value] = pod.status.version.value.split("-")[0]
    # Every instance is on the old config: the rollback's copy of it, or the old version itself.
    assert set(current.values()) <= {old, rolled} and rolled in current.values(), \
        (old, rolled, current)
    # The API server holds exactly the current runs' pods, bound to our nodes, running the old
    # command without the new config's fake exit.
    assert set(live) == set(current), (sorted(live), sorted(current))
    assert not seen_bad & set(live)
    for pod in live.values():
        assert pod["spec"]["nodeName"] in k8s.nodes
        assert pod["spec"]["containers"][0]["command"] == ["/bin/sh", "-c", "serve v1"]
        assert EXIT_CODE not in pod_annotations(pod), pod["metadata"]
    failures = [e for i in range(4) for e in up.client.get_pod_events(job_id, i).result
                if "exited with code 1" in e.message]
    assert failures, "no run of the new config was seen failing"


# -- 2. a stateful instance stays on its node, with its volume --------------------------------


def test_a_stateful_instance_comes_back_on_its_node_with_its_volume(k8s: KubeCluster,
                                                                    tmp_path: Path) -> None:
    up = k8s.up
    (tmp_path / "db.yaml").write_text(STATEFUL_JOB)
    job_id = create_v0(up, "/svc", tmp_path / "db.yaml")

    most_running = 0

    def one_pod(not_run: str = "") -> tuple[str, str, dict[str, Any]] | None:
        """(host, run id, pod) once instance 0 is RUNNING as its one live, Running pod."""
        nonlocal most_running
        tasks = running_tasks(up, job_id)
        live = live_pods(k8s, job_id)
        running = k8s.running_pods(job_id)
        most_running = max(most_running, len(running))
        if 0 not in tasks or tasks[0][1] == not_run or len(live) != 1 or set(live) != set(running):
            return None
        host, run = tasks[0]
        (name, pod), = live.items()
        return (host, run, pod) if name == run and pod["spec"]["nodeName"] == host else None

    first, run, pod = eventually(one_pod, 90, "the stateful instance running")
    assert first in k8s.nodes

    def volume_of(pod: dict[str, Any]) -> str:
        """The claim the pod mounts at /data: one, pinned to the instance's first node."""
        (mount,) = pod["spec"]["containers"][0]["volumeMounts"]
        (volume,) = pod["spec"]["volumes"]
        assert mount == {"name": volume["name"], "mountPath": "/data"}, mount
        name = str(volume["persistentVolumeClaim"]["claimName"])
        (claim,) = k8s.claims()
        meta = claim["metadata"]
        assert (meta["name"], meta["namespace"]) == (name, pod["metadata"]["namespace"])
        assert meta["annotations"][SELECTED_NODE] == first, meta
        assert meta["labels"]["pelotonpy.dev/job-id"] == job_id
        assert claim["spec"]["resources"]["requests"]["storage"] == "10Mi"
        return name

    path = volume_of(pod)
    # The job manager's volume is that claim.
    assert path == claim_name(next(iter(volumes(up, job_id))))
    # Restarted twice: each new run is a new pod on the same node, on the same volume, and the
    # old pod is gone once the new one runs (a stateful instance never runs twice).
    for _ in range(2):
        up.cli("task", "restart", job_id)
        host, run, pod = eventually(partial(one_pod, run), 90, "the restarted run")
        assert host == first and pod["spec"]["nodeName"] == first
        assert volume_of(pod) == path
    # Stopped, then started: no pod while stopped; back on the same node after.
    up.cli("task", "stop", job_id)
    eventually(lambda: task_states(up, job_id) == {0: "KILLED"} and not live_pods(k8s, job_id),
               60, "the instance KILLED and its pod gone")
    up.cli("task", "start", job_id)
    host, run, pod = eventually(partial(one_pod, run), 90, "the started run")
    assert host == first and volume_of(pod) == path
    # Its node under maintenance: two other nodes have room, yet it waits for its own node.
    up.cli("host", "maintenance", "start", first)
    eventually(lambda: host_state(up, first) == host_pb2.HOST_STATE_DOWN, 90, "its node DOWN")
    assert node_unschedulable(k8s, first)

    def waiting() -> pod_pb2.PodStatus | None:
        (status,) = [p.status for p in up.client.query_pods(job_id, pod_pb2.QuerySpec()).pods]
        return status if "desired host" in status.reason and not live_pods(k8s, job_id) else None

    status = eventually(waiting, 60, "placement refusing every other node")
    assert status.state == pod_pb2.POD_STATE_PENDING and status.desiredHost == first, status
    up.cli("host", "maintenance", "complete", first)
    host, run, pod = eventually(partial(one_pod, run), 90, "running after maintenance")
    assert host == first and volume_of(pod) == path
    hosts = {ev.hostname for ev in up.client.get_pod_events(job_id, 0).result if ev.hostname}
    assert hosts == {first}, hosts
    assert most_running == 1, "two pods of the stateful instance were Running at once"
    # Deleting the job deletes its claim (Kubernetes keeps a deleted claim while a pod uses
    # it: here, with no controller-manager to lift that, it is at least being deleted).
    up.cli("job", "stop", job_id)
    eventually(lambda: not live_pods(k8s, job_id), 60, "the instance's pod gone")
    up.cli("job", "delete", job_id)
    eventually(lambda: all(c["metadata"].get("deletionTimestamp") for c in k8s.claims()), 60,
               "the claim deleted with the job")


# -- 3. a daemon job: one pod on every node ---------------------------------------------------
DAEMON_JOB = """\
name: node-agent
owningteam: e2e
instancecount: 1
type: 2
sla:
  priority: 1
  preemptible: false
defaultconfig:
  resource:
    cpulimit: 0.1
    memlimitmb: 16
    disklimitmb: 10
  command:
    shell: true
    value: 'run node agent'
"""


def test_a_daemon_job_runs_a_pod_on_every_node_even_one_added_later(k8s: KubeCluster,
                                                                     tmp_path: Path) -> None:
    up = k8s.up
    (tmp_path / "daemon.yaml").write_text(DAEMON_JOB)
    job_id = create_v0(up, "/svc", tmp_path / "daemon.yaml")

    def one_per_node() -> dict[str, str] | None:
        """node -> pod name once every node has exactly one Running pod, the run of a RUNNING
        instance on that node."""
        pods_on = k8s.running_pods(job_id)
        tasks = running_tasks(up, job_id)
        nodes = sorted(pods_on.values())
        if nodes != sorted(k8s.nodes) or len(live_pods(k8s, job_id)) != len(nodes):
            return None
        if {run: host for host, run in tasks.values()} != pods_on:
            return None
        return {node: name for name, node in pods_on.items()}

    before = eventually(one_per_node, 90, "one pod on each of the 3 nodes")
    assert len(before) == 3
    (late,) = k8s.add_nodes(1)
    after = eventually(one_per_node, 90, "a pod on the node added later")
    assert late in after and len(after) == 4
    assert {n: after[n] for n in before} == before, "the first pods were left alone"


# -- 4. host maintenance drains a node and cordons it -----------------------------------------
SPREAD_SERVICE = """\
name: spread
type: SERVICE
owningTeam: e2e
instanceCount: 3
placementStrategy: PLACEMENT_STRATEGY_SPREAD_JOB
sla:
  preemptible: false
defaultConfig:
  resource:
    cpuLimit: 0.1
    memLimitMb: 16
    diskLimitMb: 10
  command:
    shell: true
    value: "serve"
"""


def host_state(up: UpCluster, hostname: str) -> int:
    return next(h.state for h in up.client.query_hosts().host_infos if h.hostname == hostname)


def node_unschedulable(k8s: KubeCluster, name: str) -> bool:
    from kubernetes import client

    node = client.CoreV1Api(k8s.kube.api()).read_node(name)
    return bool(node.spec.unschedulable)


def test_maintenance_drains_and_cordons_a_node_and_completing_it_uncordons(
        k8s: KubeCluster, tmp_path: Path) -> None:
    up = k8s.up
    spec = tmp_path / "spread.yaml"
    spec.write_text(SPREAD_SERVICE)
    job_id = create_v0(up, "/svc", spec)

    def placed() -> dict[int, tuple[str, str]] | None:
        """instance -> (host, run) once 3 instances run, exactly as the 3 live pods."""
        tasks = running_tasks(up, job_id)
        pods_on = k8s.running_pods(job_id)
        if len(tasks) == 3 and set(live_pods(k8s, job_id)) == set(pods_on) and \
                {run: host for host, run in tasks.values()} == pods_on:
            return tasks
        return None

    before = eventually(placed, 90, "three instances running")
    assert len({host for host, _ in before.values()}) == 3, before
    drained = before[0][0]
    assert not node_unschedulable(k8s, drained)
    up.cli("host", "maintenance", "start", drained)
    eventually(lambda: node_unschedulable(k8s, drained), 30, "the node cordoned")
    eventually(lambda: host_state(up, drained) == host_pb2.HOST_STATE_DOWN, 90, "the host DOWN")
    after = eventually(lambda: (p := placed()) and drained not in {h for h, _ in p.values()}
                       and p, 90, "the instance moved off the drained node")
    assert drained not in k8s.running_pods(job_id).values()
    assert not any(p["spec"]["nodeName"] == drained for p in k8s.pods(job_id))
    moved = after[0]
    assert moved[0] != drained and moved[1] != before[0][1], (before, after)
    assert {i: after[i] for i in (1, 2)} == {i: before[i] for i in (1, 2)}, "others were moved"
    assert drained in up.cli("host", "query", "-s", "HOST_STATE_DOWN").stdout
    up.cli("host", "maintenance", "complete", drained)
    eventually(lambda: not node_unschedulable(k8s, drained), 30, "the node uncordoned")
    assert host_state(up, drained) == host_pb2.HOST_STATE_UP
    # The host takes new runs again: a pod of a new job lands on it (the only node with room
    # for a 3.95-cpu task once the service's 0.1s are on the others).
    job = write_job(tmp_path, "big", "run", cpu=3.95)
    big = create_v0(up, "/svc", job)
    eventually(lambda: list(k8s.running_pods(big).values()) == [drained], 90,
               "a new pod on the node back from maintenance")


# -- 5. preemption deletes the preempted pods -------------------------------------------------
def test_preemption_deletes_low_priority_pods_for_reserved_work(small: KubeCluster,
                                                                tmp_path: Path) -> None:
    up = small.up
    up.cli("respool", "create", "/elastic", str(write_pool(tmp_path, "elastic")))
    up.cli("respool", "create", "/reserved", str(write_pool(
        tmp_path, "reserved", cpu_res=2, mem_res=1024, disk_res=1000, cpu_limit=2)))
    hog = create_v0(up, "/elastic", write_job(tmp_path, "hog", "hog", count=8, cpu=0.5))
    first = eventually(lambda: len(p := small.running_pods(hog)) == 8 and p, 90,
                       "the preemptible job fills both nodes (8 x 0.5 of 4 cpus)")
    assert list(task_states(up, hog).values()).count("RUNNING") == 8
    # Tasks of the hog's size: preemption frees entitlement, not room on one node, so a
    # larger task could wait for ever for the half cpus left free on two nodes.
    vip = create_v0(up, "/reserved", write_job(tmp_path, "vip", "vip", count=4, cpu=0.5,
                                               preemptible=False, priority=10))
    eventually(lambda: list(task_states(up, vip).values()).count("RUNNING") == 4
               and len(small.running_pods(vip)) == 4, 120,
               "the reserved job runs after preemption")
    assert set(small.running_pods(vip).values()) <= set(small.nodes)
    # 2 of the 4 cpus went to the reserved job: at least 4 hog runs were preempted and their
    # pods deleted from the API server; the hog never holds more than what is left.
    gone = eventually(lambda: len(g := set(first) - {p["metadata"]["name"]
                                                      for p in small.pods(hog)}) >= 4 and g,
                      60, "the preempted pods gone from the API server")
    running_hog = list(task_states(up, hog).values()).count("RUNNING")
    assert running_hog <= 4 and len(small.running_pods(hog)) <= 4
    preempted = [e for i in range(8) for e in up.client.get_pod_events(hog, i).result
                 if "PREEMPT" in e.reason or "preempt" in e.message.lower()]
    assert preempted, "no pod event says the hog was preempted"
    gone_runs = {name.rsplit("-", 1)[0] for name in gone}
    assert gone_runs <= {e.taskId.value.rsplit("-", 1)[0] for e in preempted}
