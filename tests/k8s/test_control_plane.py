"""The test control plane itself: real API server behaviour and each kwok stage of kwok_stages.yaml.

Every wait polls the API with a deadline; nothing sleeps for a state to appear.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.harness.kube import (
    EXIT_CODE_ANNOTATION,
    REASON_ANNOTATION,
    RUN_SECS_ANNOTATION,
    WAITING_REASON_ANNOTATION,
    KubeControlPlane,
)
from tests.harness.kube_nodes import reply_json
from tests.harness.procs import wait_for

_names = itertools.count()


@pytest.fixture
def core(kube: KubeControlPlane) -> client.CoreV1Api:
    """The admin's core/v1 API."""
    return client.CoreV1Api(kube.api())


@pytest.fixture(scope="module")
def node(kube: KubeControlPlane) -> str:
    """One Ready kwok node for the pod tests."""
    names = kube.nodes.add(1, prefix="pods-node-")
    kube.nodes.wait_ready(names, timeout=60)
    return names[0]


@pytest.fixture
def namespace(kube: KubeControlPlane) -> Iterator[str]:
    """A fresh namespace per test."""
    core = client.CoreV1Api(kube.api())
    name = f"t{next(_names)}-{int(time.time() * 1000) % 100000}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name


def pod_body(name: str, node: str, annotations: dict[str, str] | None = None,
             containers: int = 1) -> dict[str, Any]:
    """A pod already bound to `node`, as the scheduler creates them."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{"name": f"c{i}", "image": "example.invalid/task:1"} for i in range(containers)],
        },
    }


def read_pod(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod as raw JSON, or None once it is gone."""
    try:
        reply = core.read_namespaced_pod(name, namespace, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    pod: dict[str, Any] = reply_json(reply)
    return pod


def wait_pod(core: client.CoreV1Api, namespace: str, name: str,
             predicate: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30) -> dict[str, Any]:
    """Poll the pod until `predicate(pod)` holds; return that pod."""
    seen: list[dict[str, Any]] = []

    def check() -> bool:
        pod = read_pod(core, namespace, name)
        if pod is None:
            return False
        seen[:] = [pod]
        return predicate(pod)

    try:
        wait_for(check, timeout, f"pod {namespace}/{name}: {what}", interval=0.1)
    except AssertionError as exc:
        status = seen[0].get("status") if seen else None
        raise AssertionError(f"{exc}; last status: {json.dumps(status)}") from None
    return seen[0]


def phase_is(phase: str) -> Callable[[dict[str, Any]], bool]:
    """A predicate: the pod's phase is `phase`."""
    return lambda pod: pod.get("status", {}).get("phase") == phase


def condition(pod: dict[str, Any], kind: str) -> str | None:
    """The status ("True"/"False") of the pod's or node's condition `kind`, None if absent."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def test_nodes_become_ready_with_their_resources(kube: KubeControlPlane, core: client.CoreV1Api) -> None:
    names = kube.nodes.add(3, prefix="gpu-node-", cpu="16", memory="64Gi", gpus=2,
                           labels={"pool": "gpu"},
                           taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}])
    kube.nodes.wait_ready(names, timeout=60)
    node = reply_json(core.read_node(names[0], _preload_content=False))
    status = node["status"]
    given = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"}
    assert {key: status["capacity"].get(key) for key in given} == given
    assert status["allocatable"] == status["capacity"]
    addresses = {a["type"]: a["address"] for a in status["addresses"]}
    assert addresses["Hostname"] == names[0]
    assert addresses["InternalIP"].startswith("10.")
    assert node["metadata"]["labels"]["pool"] == "gpu"
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]


def test_node_outside_kwok_is_left_alone(kube: KubeControlPlane, core: client.CoreV1Api) -> None:
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "not-kwok"}})
    # kwok would have answered within the time the next fake node takes to become Ready.
    kube.nodes.wait_ready(kube.nodes.add(1, prefix="witness-"), timeout=60)
    node = reply_json(core.read_node("not-kwok", _preload_content=False))
    assert condition(node, "Ready") is None
    assert not node["spec"].get("taints"), "TaintNodesByCondition should be off (see kube.py)"


def test_bound_pod_becomes_running(node: str, core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("runner", node, containers=2))
    pod = wait_pod(core, namespace, "runner", phase_is("Running"), "Running")
    status = pod["status"]
    assert condition(pod, "Ready") == "True"
    assert status["podIP"].startswith("10.")
    node_ips = [a["address"] for a in reply_json(core.read_node(node, _preload_content=False))
                ["status"]["addresses"] if a["type"] == "InternalIP"]
    assert status["hostIP"] == node_ips[0]
    assert [c["name"] for c in status["containerStatuses"]] == ["c0", "c1"]
    for container in status["containerStatuses"]:
        assert container["ready"] is True
        assert container["state"]["running"]["startedAt"]


def test_unbound_pod_stays_pending(kube: KubeControlPlane, node: str, core: client.CoreV1Api,
                                   namespace: str) -> None:
    body = pod_body("unbound", node)
    del body["spec"]["nodeName"]
    core.create_namespaced_pod(namespace, body)
    core.create_namespaced_pod(namespace, pod_body("witness", node))
    wait_pod(core, namespace, "witness", phase_is("Running"), "Running")
    assert read_pod(core, namespace, "unbound")["status"]["phase"] == "Pending"  # type: ignore[index]


def terminated(pod: dict[str, Any]) -> dict[str, Any]:
    """The first container's terminated state."""
    state: dict[str, Any] = pod["status"]["containerStatuses"][0]["state"]
    assert set(state) == {"terminated"}, state
    return dict(state["terminated"])


def test_exit_code_zero_succeeds(node: str, core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("ok", node, {EXIT_CODE_ANNOTATION: "0"}))
    pod = wait_pod(core, namespace, "ok", phase_is("Succeeded"), "Succeeded")
    end = terminated(pod)
    assert end["exitCode"] == 0
    assert end["reason"] == "Completed"
    assert end["startedAt"] <= end["finishedAt"]
    assert condition(pod, "Ready") == "False"


def test_exit_code_three_fails(node: str, core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("bad", node, {EXIT_CODE_ANNOTATION: "3"}, containers=2))
    pod = wait_pod(core, namespace, "bad", phase_is("Failed"), "Failed")
    for container in pod["status"]["containerStatuses"]:
        assert container["state"]["terminated"]["exitCode"] == 3
        assert container["state"]["terminated"]["reason"] == "Error"


def test_fake_reason_shows_as_terminated_reason(node: str, core: client.CoreV1Api, namespace: str) -> None:
    annotations = {EXIT_CODE_ANNOTATION: "137", REASON_ANNOTATION: "OOMKilled"}
    core.create_namespaced_pod(namespace, pod_body("oom", node, annotations))
    pod = wait_pod(core, namespace, "oom", phase_is("Failed"), "Failed")
    assert terminated(pod) | {"startedAt": None, "finishedAt": None, "containerID": None} == {
        "exitCode": 137, "reason": "OOMKilled", "startedAt": None, "finishedAt": None, "containerID": None}


def test_run_secs_keeps_the_pod_running_that_long(node: str, core: client.CoreV1Api, namespace: str) -> None:
    annotations = {EXIT_CODE_ANNOTATION: "0", RUN_SECS_ANNOTATION: "3"}
    core.create_namespaced_pod(namespace, pod_body("timed", node, annotations))
    wait_pod(core, namespace, "timed", phase_is("Running"), "Running")
    running_seen = time.monotonic()
    wait_pod(core, namespace, "timed", phase_is("Succeeded"), "Succeeded", timeout=30)
    ran = time.monotonic() - running_seen
    # 3 s after kwok made it Running (at most 1 s more had kwok seen an update), plus latency.
    assert 2.8 <= ran <= 10, ran


def test_waiting_reason_keeps_the_pod_pending(node: str, core: client.CoreV1Api, namespace: str) -> None:
    annotations = {WAITING_REASON_ANNOTATION: "ErrImagePull", EXIT_CODE_ANNOTATION: "0"}
    core.create_namespaced_pod(namespace, pod_body("pull", node, annotations))

    def waiting(pod: dict[str, Any]) -> bool:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return bool(statuses) and statuses[0]["state"].get("waiting", {}).get("reason") == "ErrImagePull"

    pod = wait_pod(core, namespace, "pull", waiting, "waiting with ErrImagePull")
    assert pod["status"]["phase"] == "Pending"
    assert condition(pod, "Ready") == "False"
    # Removing the annotation is the image pull succeeding: the pod starts, then ends (exit code 0).
    core.patch_namespaced_pod("pull", namespace,
                              {"metadata": {"annotations": {WAITING_REASON_ANNOTATION: None}}})
    wait_pod(core, namespace, "pull", phase_is("Succeeded"), "Succeeded")


def test_deleted_pod_disappears(node: str, core: client.CoreV1Api, namespace: str) -> None:
    body = pod_body("doomed", node)
    # A finalizer nobody else would remove: kwok's pod-delete stage clears it, as it would a kubelet's.
    body["metadata"]["finalizers"] = ["pelotonpy.dev/test-finalizer"]
    core.create_namespaced_pod(namespace, body)
    wait_pod(core, namespace, "doomed", phase_is("Running"), "Running")
    core.delete_namespaced_pod("doomed", namespace)
    wait_for(lambda: read_pod(core, namespace, "doomed") is None, 30, "the deleted pod to disappear")


def test_set_node_ready_false_sticks_until_set_true(kube: KubeControlPlane, core: client.CoreV1Api) -> None:
    name = kube.nodes.add(1, prefix="flaky-")[0]
    kube.nodes.wait_ready([name], timeout=60)
    kube.nodes.set_ready(name, False)
    # Any update makes kwok re-evaluate the node's stages; node-initialize must not match it now.
    core.patch_node(name, {"metadata": {"labels": {"touched": "yes"}}})
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        node = reply_json(core.read_node(name, _preload_content=False))
        assert condition(node, "Ready") == "False", "kwok reverted the NotReady node"
        time.sleep(0.2)
    kube.nodes.set_ready(name, True)
    kube.nodes.wait_ready([name], timeout=30)


def test_restart_apiserver_keeps_the_data(kube: KubeControlPlane, node: str, core: client.CoreV1Api,
                                          namespace: str) -> None:
    core.create_namespaced_config_map(
        namespace, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept"},
                    "data": {"answer": "42"}})
    port, old_pid = kube.apiserver_port, kube.pids["kube-apiserver"]
    kube.restart_apiserver()
    assert kube.apiserver_port == port
    assert kube.pids["kube-apiserver"] != old_pid
    assert core.read_namespaced_config_map("kept", namespace).data == {"answer": "42"}

    kube.kill_apiserver()
    assert "kube-apiserver" not in kube.pids
    with pytest.raises(Exception):  # noqa: B017  (connection refused surfaces as urllib3's errors)
        client.CoreV1Api(kube.client_for(kube.admin_kubeconfig)).list_namespace(_request_timeout=2)
    kube.restart_apiserver()
    assert core.read_namespaced_config_map("kept", namespace).data == {"answer": "42"}
    # kwok's watches reconnect: a pod created now still starts.
    core.create_namespaced_pod(namespace, pod_body("after-restart", node))
    wait_pod(core, namespace, "after-restart", phase_is("Running"), "Running", timeout=60)


def test_service_account_token_is_refused_what_no_role_grants(kube: KubeControlPlane, tmp_path: Any) -> None:
    token = kube.token_for_service_account("sa-test", "robot")
    api = kube.client_for(kube.kubeconfig_for_token(token, tmp_path / "robot.kubeconfig"))
    try:
        review = client.AuthenticationV1Api(api).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review.status.user_info.username == "system:serviceaccount:sa-test:robot"
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(api).list_namespaced_pod("kube-system")
        assert refused.value.status == 403
    finally:
        api.close()
