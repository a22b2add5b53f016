"""Converters between Kubernetes objects (as the API server's JSON) and backend values.

Pure functions, no I/O: a Node becomes `NodeFacts` and then a `BackendHost`,
a `LaunchSpec` becomes a Pod manifest, and a Pod becomes a `PodStatus`
(what our run state is, with exit code and reason).

Mapping, in short (the README of this folder has the table):
- A host's capacity is the node's allocatable minus the requests of pods that are
  not ours (kube-scheduler's pods share the node; we never overcommit it).
- Node labels become host labels; every NoSchedule / NoExecute taint adds a host label
  `peloton/exclusive=<key>[=<value>]`, so only tasks whose constraint names that label
  (Peloton's exclusive-host rule) are placed there; their pods tolerate the node's taints.
- A pod requests exactly what the task asked for (requests = limits), runs with
  restartPolicy Never (the job manager decides restarts) under our scheduler name, bound
  to its node by spec.nodeName.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.host import EXCLUSIVE_ATTRIBUTE
from peloton.core.model.ids import RunId
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import HealthCheckSpec, HealthCheckType
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.base import BackendHost
from peloton.hostmgr.backends.k8s_config import PREFIX, KubeConfig
from peloton.hostmgr.backends.task_env import environment, task_ports

Json = dict[str, Any]

#: Labels of our pods.
CLUSTER_LABEL = f"{PREFIX}/cluster"
JOB_LABEL = f"{PREFIX}/job-id"
INSTANCE_LABEL = f"{PREFIX}/instance"
RUN_LABEL = f"{PREFIX}/run"
#: Annotations of our pods: the exact run id, and whether its task has a health check.
RUN_ID_ANNOTATION = f"{PREFIX}/run-id"
HEALTH_ANNOTATION = f"{PREFIX}/health-check"
#: Every task label as "key=value" lines (labels a qualified name cannot carry too).
TASK_LABELS_ANNOTATION = f"{PREFIX}/task-labels"
#: Annotations a task label never overrides.
_RESERVED = frozenset({RUN_ID_ANNOTATION, HEALTH_ANNOTATION, TASK_LABELS_ANNOTATION})

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40, "Pi": 2.0 ** 50,
           "Ei": 2.0 ** 60, "n": 1e-9, "u": 1e-6}
_MIB = 2.0 ** 20
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"
                             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
#: Container waiting reasons after which the pod will not start without a change.
FATAL_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                           "ErrImageNeverPull", "CreateContainerConfigError",
                           "CreateContainerError", "RunContainerError"})
_PROBE_TYPES = {HealthCheckType.COMMAND, HealthCheckType.HTTP, HealthCheckType.GRPC}


# -- quantities ---------------------------------------------------------------------------
def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity ("500m", "32Gi", "1e3", 8) as a float in base units."""
    if isinstance(text, int | float):
        return float(text)
    match = _QUANTITY.match(text.strip())
    if match is None or match.group(2) not in _SUFFIX:
        raise InvalidArgument(f"not a Kubernetes quantity: {text!r}", field="quantity")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def resources_of(amounts: Mapping[str, Any], gpu_resources: Sequence[str]) -> Resources:
    """cpu, memory, ephemeral-storage and GPUs of a resource list, in our units."""
    gpus = sum(quantity(amounts[name]) for name in gpu_resources if name in amounts)
    return Resources(cpu=quantity(amounts.get("cpu", 0)),
                     mem_mb=quantity(amounts.get("memory", 0)) / _MIB,
                     disk_mb=quantity(amounts.get("ephemeral-storage", 0)) / _MIB, gpu=gpus)


# -- nodes --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint that keeps pods away (NoSchedule or NoExecute)."""

    key: str
    value: str
    effect: str

    @property
    def label(self) -> Label:
        """The host label that makes the node exclusive to tasks naming it."""
        return Label(EXCLUSIVE_ATTRIBUTE, f"{self.key}={self.value}" if self.value else self.key)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the backend needs of a Node."""

    name: str
    uid: str
    ready: bool
    schedulable: bool
    allocatable: Resources
    #: The extended resource that is this node's GPU ("" if it has none).
    gpu_resource: str
    labels: tuple[Label, ...]
    taints: tuple[Taint, ...]
    address: str

    @property
    def usable(self) -> bool:
        """Ready: the host manager may count on it (cordoned nodes are usable, not offered)."""
        return self.ready


def node_facts(node: Json, config: KubeConfig) -> NodeFacts:
    """Read a Node object."""
    meta, spec, status = node.get("metadata", {}), node.get("spec", {}), node.get("status", {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or ())
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    gpu = next((name for name in config.gpu_resources if quantity(allocatable.get(name, 0)) > 0), "")
    taints = tuple(Taint(t.get("key", ""), t.get("value", "") or "", t.get("effect", ""))
                   for t in spec.get("taints") or ()
                   if t.get("effect") in ("NoSchedule", "NoExecute"))
    # The cordon taint mirrors spec.unschedulable, which is read on its own.
    taints = tuple(t for t in taints if t.key != "node.kubernetes.io/unschedulable")
    labels = tuple(sorted(Label(k, str(v)) for k, v in (meta.get("labels") or {}).items()))
    addresses = {a.get("type"): a.get("address", "") for a in status.get("addresses") or ()}
    return NodeFacts(
        name=meta.get("name", ""), uid=meta.get("uid", ""), ready=ready,
        schedulable=not spec.get("unschedulable", False),
        allocatable=resources_of(allocatable, (gpu,) if gpu else ()), gpu_resource=gpu,
        labels=labels, taints=taints,
        address=addresses.get("InternalIP") or addresses.get("Hostname") or "")


def host_of(facts: NodeFacts, foreign: Resources, config: KubeConfig,
            taken_ports: frozenset[int] = frozenset()) -> BackendHost:
    """The host a node is: allocatable minus what pods that are not ours request, and our port
    range minus the host ports those pods hold."""
    labels = {*facts.labels, Label("hostname", facts.name), *(t.label for t in facts.taints)}
    low, high = config.port_range
    return BackendHost(hostname=facts.name, agent_id=facts.uid or facts.name,
                       capacity=facts.allocatable.minus_clamped(foreign),
                       ports=port_ranges_without(low, high, taken_ports),
                       labels=tuple(sorted(labels)), address=facts.address,
                       schedulable=facts.schedulable)


def port_ranges_without(low: int, high: int, taken: frozenset[int]) -> tuple[PortRange, ...]:
    """low..high (inclusive) as ranges, leaving out the `taken` ports."""
    out: list[PortRange] = []
    start = low
    for port in sorted(p for p in taken if low <= p <= high):
        if port > start:
            out.append(PortRange(start, port - 1))
        start = port + 1
    if start <= high:
        out.append(PortRange(start, high))
    return tuple(out)


def pod_host_ports(pod: Json) -> tuple[int, ...]:
    """The host ports a pod's containers hold on its node."""
    return tuple(int(p["hostPort"]) for c in pod.get("spec", {}).get("containers") or ()
                 for p in c.get("ports") or () if p.get("hostPort"))


# -- pods: what we create -----------------------------------------------------------------
def pod_name(run_id: str) -> str:
    """A run's pod name: the run id where it is a DNS subdomain, else a digest of it."""
    lowered = run_id.lower()
    if lowered == run_id and _DNS_SUBDOMAIN.match(run_id):
        return run_id
    return "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:40]


def _label_safe(value: str) -> str:
    return value if _LABEL_VALUE.match(value) else hashlib.sha256(value.encode()).hexdigest()[:40]


def _millicpu(cpu: float) -> str:
    return f"{max(1, math.ceil(cpu * 1000 - 1e-6))}m"


def _mebibytes(mb: float) -> str:
    return f"{max(1, math.ceil(mb - 1e-9))}Mi"


def _limits(spec: LaunchSpec, node: NodeFacts) -> Json:
    res = spec.spec.resources
    out: Json = {}
    if res.cpu > 0:
        out["cpu"] = _millicpu(res.cpu)
    if res.mem_mb > 0:
        out["memory"] = _mebibytes(res.mem_mb)
    if res.disk_mb > 0:
        out["ephemeral-storage"] = _mebibytes(res.disk_mb)
    if res.gpu > 0:
        if not node.gpu_resource:
            raise InvalidArgument(f"node {node.name} has no GPU for run {spec.run_id}", field="gpu")
        out[node.gpu_resource] = str(math.ceil(res.gpu - 1e-9))
    return out


def _probe(hc: HealthCheckSpec, first_port: int) -> Json:
    probe: Json = {"initialDelaySeconds": max(0, math.ceil(hc.initial_interval_secs)),
                   "periodSeconds": max(1, math.ceil(hc.interval_secs)),
                   "timeoutSeconds": max(1, math.ceil(hc.timeout_secs)),
                   "failureThreshold": max(1, hc.max_consecutive_failures)}
    if hc.type is HealthCheckType.COMMAND:
        probe["exec"] = {"command": ["/bin/sh", "-c", hc.command]}
    elif hc.type is HealthCheckType.HTTP:
        # Port 0 is the task's first port, as on our agent.
        probe["httpGet"] = {"port": hc.http_port or first_port, "path": hc.http_path or "/",
                            "scheme": (hc.http_scheme or "http").upper()}
    else:
        probe["grpc"] = {"port": hc.http_port or first_port}
    return probe


def _command(spec: LaunchSpec) -> list[str]:
    cmd = spec.spec.command
    if cmd.shell:
        return ["/bin/sh", "-c", cmd.value]
    return [cmd.value, *cmd.arguments] if cmd.value else list(cmd.arguments)


def _annotations(spec: LaunchSpec) -> Json:
    out: Json = {RUN_ID_ANNOTATION: spec.run_id}
    labels = spec.spec.labels
    if labels:
        out[TASK_LABELS_ANNOTATION] = "\n".join(f"{lb.key}={lb.value}" for lb in labels)
        # Task labels that are valid annotation keys are also annotations of their own, so
        # tools that read pods (and kwok's stages in the tests) see them as written.
        for lb in labels:
            if _QUALIFIED_NAME.match(lb.key) and lb.key not in _RESERVED:
                out[lb.key] = lb.value
    hc = spec.spec.health_check
    if hc is not None and hc.enabled and hc.type in _PROBE_TYPES:
        out[HEALTH_ANNOTATION] = "true"
    return out


def pod_manifest(spec: LaunchSpec, node: NodeFacts, namespace: str, config: KubeConfig) -> Json:
    """The Pod that runs `spec` on `node`."""
    labels = {CLUSTER_LABEL: config.cluster_name}
    try:
        run = RunId.parse(spec.run_id)
        labels.update({JOB_LABEL: _label_safe(run.job_id), INSTANCE_LABEL: str(run.instance),
                       RUN_LABEL: str(run.run)})
    except InvalidArgument:
        pass  # not a Peloton run id (tools, tests): the run-id annotation still names it
    ports = task_ports(spec)
    container: Json = {
        "name": "task", "image": spec.spec.container_image or config.default_image,
        "command": _command(spec),
        "env": [{"name": k, "value": v} for k, v in environment(spec).items()],
        "resources": {"requests": (limits := _limits(spec, node)), "limits": dict(limits)},
    }
    if ports:
        container["ports"] = [{"name": _port_name(name, i), "containerPort": number,
                               "hostPort": number, "protocol": "TCP"}
                              for i, (name, number, _) in enumerate(ports)]
    hc = spec.spec.health_check
    if hc is not None and hc.enabled and hc.type in _PROBE_TYPES:
        first = ports[0][1] if ports else 0
        # Liveness kills the container after the failures in a row (the run then fails, as
        # on our agent); readiness says HEALTHY / UNHEALTHY meanwhile.
        container["livenessProbe"] = _probe(hc, first)
        container["readinessProbe"] = _probe(hc, first)
    pod_spec: Json = {
        "nodeName": node.name, "schedulerName": config.scheduler_name, "restartPolicy": "Never",
        "terminationGracePeriodSeconds": max(0, math.ceil(spec.spec.kill_grace_period_secs)),
        "containers": [container], "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if node.taints:
        pod_spec["tolerations"] = [
            {"key": t.key, "operator": "Equal" if t.value else "Exists", "effect": t.effect,
             **({"value": t.value} if t.value else {})} for t in node.taints]
    # A stateful run's volume is its PersistentVolumeClaim, mounted by the backend
    # (k8s_volumes.mount_claim).
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(spec.run_id), "namespace": namespace, "labels": labels,
                         "annotations": _annotations(spec)},
            "spec": pod_spec}


def _port_name(name: str, index: int) -> str:
    cleaned = re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")[:15].strip("-")
    return cleaned if cleaned and re.search(r"[a-z]", cleaned) else f"port{index}"


# -- pods: what we read -------------------------------------------------------------------
def run_id_of(pod: Json) -> str:
    """The run id of one of our pods ("" for a pod that is not a run)."""
    return str((pod.get("metadata", {}).get("annotations") or {}).get(RUN_ID_ANNOTATION, ""))


def is_ours(pod: Json, config: KubeConfig) -> bool:
    """A pod this cluster launched (its label and one of our namespaces)."""
    meta = pod.get("metadata", {})
    return ((meta.get("labels") or {}).get(CLUSTER_LABEL) == config.cluster_name
            and meta.get("namespace") in config.namespaces and bool(run_id_of(pod)))


def pod_node(pod: Json) -> str:
    """The node a pod is bound to ("" if none)."""
    return str(pod.get("spec", {}).get("nodeName") or "")


def pod_terminal(pod: Json) -> bool:
    """The pod's containers are done (Succeeded or Failed)."""
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def pod_requests(pod: Json, gpu_resources: Sequence[str]) -> Resources:
    """What a live pod holds on its node (Kubernetes' rule: the larger of the sum of its
    containers and of any one init container)."""
    spec = pod.get("spec", {})
    total = Resources()
    for container in spec.get("containers") or ():
        total = total + resources_of((container.get("resources") or {}).get("requests") or {},
                                     gpu_resources)
    for container in spec.get("initContainers") or ():
        init = resources_of((container.get("resources") or {}).get("requests") or {}, gpu_resources)
        total = total.max(init)
    overhead = spec.get("overhead")
    return total + resources_of(overhead, gpu_resources) if overhead else total


@dataclass(frozen=True, slots=True)
class PodStatus:
    """A pod's state as our run state."""

    state: TaskState
    message: str
    reason: str = ""
    exit_code: int | None = None
    healthy: HealthState | None = None


#: Kubernetes' reasons as the Mesos reasons our status updates use.
_REASONS = {"OOMKilled": "REASON_CONTAINER_LIMITATION_MEMORY",
            "Evicted": "REASON_CONTAINER_PREEMPTED",
            "DeadlineExceeded": "REASON_MAX_COMPLETION_TIME_REACHED",
            "ContainerCannotRun": "REASON_CONTAINER_LAUNCH_FAILED",
            "StartError": "REASON_CONTAINER_LAUNCH_FAILED"}


def _container(pod: Json) -> Json:
    statuses = pod.get("status", {}).get("containerStatuses") or ()
    return next((c for c in statuses if c.get("name") == "task"), statuses[0] if statuses else {})


def pod_status(pod: Json, *, killed: bool, was_healthy: bool) -> PodStatus:
    """Our run state of a pod.  `killed`: we asked for its deletion (a container that dies
    meanwhile was killed, not failed); `was_healthy`: its health check passed before."""
    status = pod.get("status", {})
    phase = status.get("phase", "Pending")
    container = _container(pod)
    state = container.get("state") or {}
    if phase == "Succeeded":
        return PodStatus(TaskState.SUCCEEDED, "exited with code 0", exit_code=0)
    if phase == "Failed":
        return _failed(status, state.get("terminated") or {}, killed)
    if killed and "terminated" in state:
        return PodStatus(TaskState.KILLED, "killed on request")
    if phase == "Running" and ("running" in state or not container):
        healthy = None
        if (pod.get("metadata", {}).get("annotations") or {}).get(HEALTH_ANNOTATION) == "true":
            if container.get("ready"):
                healthy = HealthState.HEALTHY
            else:
                healthy = HealthState.UNHEALTHY if was_healthy else HealthState.HEALTH_UNKNOWN
        return PodStatus(TaskState.RUNNING, "running", healthy=healthy)
    waiting = state.get("waiting") or {}
    if waiting.get("reason") in FATAL_WAITING and not killed:
        why = waiting["reason"]
        detail = waiting.get("message", "")
        return PodStatus(TaskState.FAILED, f"container could not start: {why}"
                         + (f": {detail}" if detail else ""), "REASON_CONTAINER_LAUNCH_FAILED")
    why = waiting.get("reason") or status.get("reason") or "pod created"
    return PodStatus(TaskState.STARTING, f"pending: {why}")


def _failed(status: Json, terminated: Json, killed: bool) -> PodStatus:
    if killed:
        return PodStatus(TaskState.KILLED, "killed on request")
    why = terminated.get("reason") or status.get("reason") or ""
    reason = _REASONS.get(why, "REASON_COMMAND_EXECUTOR_FAILED")
    if "exitCode" in terminated:
        code = int(terminated["exitCode"])
        text = f"exited with code {code}" + (f" ({why})" if why and why != "Error" else "")
        return PodStatus(TaskState.FAILED, text, reason, exit_code=code)
    detail = status.get("message") or terminated.get("message") or ""
    return PodStatus(TaskState.FAILED, f"pod failed: {why or 'unknown'}"
                     + (f": {detail}" if detail else ""), reason)
