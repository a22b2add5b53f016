"""The Kubernetes backend's converters (pure): nodes to hosts, launches to pods, pods to states."""

from __future__ import annotations

from typing import Any

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.host import EXCLUSIVE_ATTRIBUTE
from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import CommandSpec, HealthCheckSpec, HealthCheckType, PortSpec, TaskSpec
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.k8s_wire import (
    RUN_ID_ANNOTATION,
    host_of,
    is_ours,
    node_facts,
    pod_host_ports,
    pod_manifest,
    pod_name,
    pod_requests,
    pod_status,
    quantity,
)

CONFIG = KubeConfig(source="in-cluster")
JOB = "6d1b7c0e-0000-4000-8000-000000000001"
RUN = f"{JOB}-4-2"


def _node(*, ready: bool = True, unschedulable: bool = False, gpus: int = 0,
          taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    allocatable = {"cpu": "7500m", "memory": "32Gi", "ephemeral-storage": "100Gi", "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": "node-a", "uid": "uid-a", "labels": {"zone": "east"}},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]}}


@pytest.mark.parametrize(("text", "value"), [
    ("8", 8.0), ("500m", 0.5), ("1.5", 1.5), ("32Gi", 32 * 2.0 ** 30), ("128974848", 128974848.0),
    ("129e6", 129e6), ("1k", 1000.0), ("1Ki", 1024.0), ("100M", 1e8), (3, 3.0)])
def test_quantities(text: str | int, value: float) -> None:
    assert quantity(text) == pytest.approx(value)


def test_a_bad_quantity_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        quantity("12 apples")


def test_a_ready_node_is_a_host_with_its_labels_and_allocatable_less_other_pods() -> None:
    facts = node_facts(_node(), CONFIG)
    assert facts.ready and facts.schedulable and facts.gpu_resource == ""
    host = host_of(facts, Resources(cpu=1.5, mem_mb=1024), CONFIG)
    assert host.capacity == Resources(cpu=6.0, mem_mb=32 * 1024 - 1024, disk_mb=100 * 1024)
    assert Label("zone", "east") in host.labels and Label("hostname", "node-a") in host.labels
    assert host.agent_id == "uid-a" and host.address == "10.0.0.7" and host.schedulable


def test_other_pods_never_make_capacity_negative() -> None:
    host = host_of(node_facts(_node(), CONFIG), Resources(cpu=100.0), CONFIG)
    assert host.capacity.cpu == 0.0


def test_gpu_nodes_count_their_gpus() -> None:
    facts = node_facts(_node(gpus=2), CONFIG)
    assert facts.gpu_resource == "nvidia.com/gpu" and facts.allocatable.gpu == 2.0


def test_cordoned_and_not_ready_nodes() -> None:
    assert not node_facts(_node(unschedulable=True), CONFIG).schedulable
    assert not host_of(node_facts(_node(unschedulable=True), CONFIG), Resources(), CONFIG).schedulable
    assert not node_facts(_node(ready=False), CONFIG).ready


def test_taints_make_the_host_exclusive_and_its_pods_tolerate_them() -> None:
    taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
              {"key": "soft", "effect": "PreferNoSchedule"},
              {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    facts = node_facts(_node(taints=taints), CONFIG)
    host = host_of(facts, Resources(), CONFIG)
    assert [lb for lb in host.labels if lb.key == EXCLUSIVE_ATTRIBUTE] == [
        Label(EXCLUSIVE_ATTRIBUTE, "dedicated=gpu")]
    pod = pod_manifest(_launch(), facts, "ns", CONFIG)
    assert pod["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]


def _launch(**spec: Any) -> LaunchSpec:
    base: dict[str, Any] = {
        "name": "web", "resources": Resources(cpu=0.25, mem_mb=100, disk_mb=10),
        "command": CommandSpec(value="echo hi", environment=(("A", "1"),)),
        "labels": (Label("team", "x"), Label("pelotonpy.dev/fake-exit-code", "3"),
                   Label("not a key!", "v"), Label(RUN_ID_ANNOTATION, "forged")),
        "kill_grace_period_secs": 2.5}
    base.update(spec)
    return LaunchSpec(RUN, TaskSpec(**base), ports=(("http", 31005),), pool="pool-1")


def test_a_pod_is_bound_to_its_node_under_our_scheduler_and_asks_exactly_for_the_task() -> None:
    pod = pod_manifest(_launch(ports=(PortSpec("http"),)), node_facts(_node(), CONFIG), "team-ns",
                       CONFIG)
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == RUN and meta["namespace"] == "team-ns"
    assert meta["labels"] == {"pelotonpy.dev/cluster": "pelotonpy", "pelotonpy.dev/job-id": JOB,
                              "pelotonpy.dev/instance": "4", "pelotonpy.dev/run": "2"}
    assert meta["annotations"][RUN_ID_ANNOTATION] == RUN
    assert meta["annotations"]["team"] == "x"
    assert meta["annotations"]["pelotonpy.dev/fake-exit-code"] == "3"
    # A key that is no qualified name stays in the summary annotation only; ours are not forged.
    assert "not a key!=v" in meta["annotations"]["pelotonpy.dev/task-labels"]
    assert "not a key!" not in meta["annotations"]
    assert spec["nodeName"] == "node-a" and spec["schedulerName"] == "pelotonpy"
    assert spec["restartPolicy"] == "Never" and spec["terminationGracePeriodSeconds"] == 3
    container = spec["containers"][0]
    assert container["image"] == CONFIG.default_image
    assert container["command"] == ["/bin/sh", "-c", "echo hi"]
    want = {"cpu": "250m", "memory": "100Mi", "ephemeral-storage": "10Mi"}
    assert container["resources"] == {"requests": want, "limits": want}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PELOTON_TASK_ID"] == RUN and env["PORT_HTTP"] == "31005" and env["A"] == "1"
    assert container["ports"] == [{"name": "http", "containerPort": 31005, "hostPort": 31005,
                                   "protocol": "TCP"}]
    assert "livenessProbe" not in container


def test_an_image_argv_command_and_gpus() -> None:
    pod = pod_manifest(_launch(container_image="repo/app:2", resources=Resources(cpu=1, gpu=1),
                               command=CommandSpec(value="/app", shell=False, arguments=("-v",))),
                       node_facts(_node(gpus=4), CONFIG), "ns", CONFIG)
    container = pod["spec"]["containers"][0]
    assert container["image"] == "repo/app:2" and container["command"] == ["/app", "-v"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_a_gpu_task_on_a_node_without_gpus_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        pod_manifest(_launch(resources=Resources(cpu=1, gpu=1)), node_facts(_node(), CONFIG), "ns",
                     CONFIG)


def test_health_checks_become_liveness_and_readiness_probes() -> None:
    hc = HealthCheckSpec(type=HealthCheckType.HTTP, initial_interval_secs=5, interval_secs=2,
                         timeout_secs=1, max_consecutive_failures=4, http_port=31005,
                         http_path="/health")
    container = pod_manifest(_launch(health_check=hc), node_facts(_node(), CONFIG), "ns",
                             CONFIG)["spec"]["containers"][0]
    want = {"initialDelaySeconds": 5, "periodSeconds": 2, "timeoutSeconds": 1, "failureThreshold": 4,
            "httpGet": {"port": 31005, "path": "/health", "scheme": "HTTP"}}
    assert container["livenessProbe"] == want and container["readinessProbe"] == want
    disabled = pod_manifest(_launch(health_check=HealthCheckSpec(enabled=False, command="true")),
                            node_facts(_node(), CONFIG), "ns", CONFIG)
    assert "livenessProbe" not in disabled["spec"]["containers"][0]


def test_pod_names() -> None:
    assert pod_name(RUN) == RUN
    odd = pod_name("Some_Run/1")
    assert odd.startswith("run-") and odd == pod_name("Some_Run/1") and len(odd) <= 63


def _pod(phase: str, state: dict[str, Any] | None = None, *, ready: bool = False,
         health: bool = False, reason: str = "") -> dict[str, Any]:
    annotations = {RUN_ID_ANNOTATION: RUN, **({"pelotonpy.dev/health-check": "true"} if health else {})}
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"] = reason
    if state is not None:
        status["containerStatuses"] = [{"name": "task", "state": state, "ready": ready}]
    return {"metadata": {"name": RUN, "namespace": "pelotonpy", "uid": "u1", "annotations": annotations,
                         "labels": {"pelotonpy.dev/cluster": "pelotonpy"}},
            "spec": {"nodeName": "node-a"}, "status": status}


#: (pod, killed, was_healthy) -> (state, reason, exit code, health, words in the message)
STATUS_TABLE: list[tuple[dict[str, Any], bool, bool, TaskState, str, int | None,
                         HealthState | None, str]] = [
    (_pod("Pending"), False, False, TaskState.STARTING, "", None, None, "pending"),
    (_pod("Pending", {"waiting": {"reason": "ContainerCreating"}}), False, False, TaskState.STARTING,
     "", None, None, "ContainerCreating"),
    (_pod("Pending", {"waiting": {"reason": "ErrImagePull", "message": "no such image"}}), False,
     False, TaskState.FAILED, "REASON_CONTAINER_LAUNCH_FAILED", None, None, "ErrImagePull"),
    (_pod("Pending", {"waiting": {"reason": "ImagePullBackOff"}}), True, False, TaskState.STARTING,
     "", None, None, "ImagePullBackOff"),
    (_pod("Running", {"running": {}}), False, False, TaskState.RUNNING, "", None, None, "running"),
    (_pod("Running", {"running": {}}, health=True), False, False, TaskState.RUNNING, "", None,
     HealthState.HEALTH_UNKNOWN, "running"),
    (_pod("Running", {"running": {}}, health=True, ready=True), False, False, TaskState.RUNNING, "",
     None, HealthState.HEALTHY, "running"),
    (_pod("Running", {"running": {}}, health=True), False, True, TaskState.RUNNING, "", None,
     HealthState.UNHEALTHY, "running"),
    (_pod("Succeeded", {"terminated": {"exitCode": 0}}), False, False, TaskState.SUCCEEDED, "", 0,
     None, "exited with code 0"),
    (_pod("Failed", {"terminated": {"exitCode": 3, "reason": "Error"}}), False, False,
     TaskState.FAILED, "REASON_COMMAND_EXECUTOR_FAILED", 3, None, "exited with code 3"),
    (_pod("Failed", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}), False, False,
     TaskState.FAILED, "REASON_CONTAINER_LIMITATION_MEMORY", 137, None, "OOMKilled"),
    (_pod("Failed", {"terminated": {"exitCode": 143, "reason": "Error"}}), True, False,
     TaskState.KILLED, "", None, None, "killed"),
    (_pod("Failed", reason="Evicted"), False, False, TaskState.FAILED, "REASON_CONTAINER_PREEMPTED",
     None, None, "Evicted"),
    (_pod("Running", {"terminated": {"exitCode": 143}}), True, False, TaskState.KILLED, "", None,
     None, "killed"),
]


@pytest.mark.parametrize(("pod", "killed", "was_healthy", "state", "reason", "code", "health", "words"),
                         STATUS_TABLE)
def test_pod_states_as_run_states(pod: dict[str, Any], killed: bool, was_healthy: bool,
                                  state: TaskState, reason: str, code: int | None,
                                  health: HealthState | None, words: str) -> None:
    status = pod_status(pod, killed=killed, was_healthy=was_healthy)
    assert (status.state, status.reason, status.exit_code, status.healthy) == (state, reason, code, health)
    assert words in status.message


def test_every_pod_phase_has_a_row() -> None:
    phases = {row[0]["status"]["phase"] for row in STATUS_TABLE}
    assert phases == {"Pending", "Running", "Succeeded", "Failed"}


def test_ours_is_this_clusters_label_in_our_namespaces() -> None:
    pod = _pod("Running")
    assert is_ours(pod, CONFIG)
    assert not is_ours(pod, KubeConfig(source="in-cluster", cluster_name="other"))
    assert not is_ours({**pod, "metadata": {**pod["metadata"], "namespace": "kube-system"}}, CONFIG)


def test_a_pods_requests_are_its_containers_or_its_largest_init_container() -> None:
    pod = {"spec": {"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                                   {"resources": {"requests": {"cpu": "200m"}}}],
                    "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "1Mi"}}}]}}
    assert pod_requests(pod, ("nvidia.com/gpu",)) == Resources(cpu=1.0, mem_mb=64)


def test_config_refuses_bad_names_and_ranges() -> None:
    with pytest.raises(InvalidArgument, match="namespace"):
        KubeConfig(namespace="Bad_NS")
    with pytest.raises(InvalidArgument, match="port_range"):
        KubeConfig(port_range=(10, 5))
    assert KubeConfig(pool_namespaces={"p1": "team-a"}).namespace_of("p1") == "team-a"
    assert KubeConfig().namespace_of("other") == "pelotonpy"


def test_an_http_check_on_port_zero_probes_the_tasks_first_port() -> None:
    hc = HealthCheckSpec(type=HealthCheckType.HTTP, http_port=0, http_path="/")
    container = pod_manifest(_launch(health_check=hc, ports=(PortSpec("http"),)),
                             node_facts(_node(), CONFIG), "ns", CONFIG)["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["port"] == 31005


def test_ports_held_by_other_pods_are_not_offered() -> None:
    host = host_of(node_facts(_node(), CONFIG), Resources(), CONFIG, frozenset({28000, 28005, 1}))
    assert [(r.begin, r.end) for r in host.ports] == [(28001, 28004), (28006, 29999)]
    assert pod_host_ports({"spec": {"containers": [{"ports": [{"containerPort": 80, "hostPort": 8080},
                                                              {"containerPort": 81}]}]}}) == (8080,)
