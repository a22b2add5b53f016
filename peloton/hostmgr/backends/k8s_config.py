"""Settings of the Kubernetes backend.

The backend is named `k8s:in-cluster` (the service account a pod is given)
or `k8s:PATH` (a kubeconfig file, its current context).  Everything else is
here, with defaults that suit one scheduler per Kubernetes cluster: pods go
to the namespace `pelotonpy` under the scheduler name `pelotonpy` (so
kube-scheduler never binds or moves them), and a pod is ours only if it
carries this cluster's label, so two of our clusters sharing one Kubernetes
cluster never adopt each other's pods.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from peloton.core.errors import InvalidArgument

#: The label and annotation prefix of everything the backend writes.
PREFIX = "pelotonpy.dev"
#: A DNS-1123 label: what a namespace or a cluster label value must be.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class KubeConfig:
    """How the Kubernetes backend reaches the API server and shapes its pods."""

    #: "in-cluster" or the path of a kubeconfig file (what follows `k8s:` in the backend's name).
    source: str = ""
    #: The kubeconfig context (empty: the file's current context).
    context: str = ""
    #: Namespace of every pod whose pool has no entry in `pool_namespaces`.
    namespace: str = "pelotonpy"
    #: Resource pool id -> namespace (a pool's pods go to its namespace; `peloton respool
    #: lookup PATH` prints a pool's id).
    pool_namespaces: Mapping[str, str] = field(default_factory=dict)
    #: The container image of a task that names none (Peloton's container info, Aurora's
    #: Docker or Mesos image name one).
    default_image: str = "busybox:1.36"
    #: spec.schedulerName of our pods: kube-scheduler leaves pods of another scheduler alone.
    scheduler_name: str = "pelotonpy"
    #: This cluster's name, the value of the `pelotonpy.dev/cluster` label of its pods.
    cluster_name: str = "pelotonpy"
    #: Only nodes matching this label selector become hosts (empty: every node).
    node_selector: str = ""
    #: Extended resources that count as GPUs (the first a node has is the one requested).
    gpu_resources: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu")
    #: Ports offered to tasks on every node (hostPort), first..last inclusive: below
    #: Kubernetes' NodePort range (30000-32767) and Linux's ephemeral ports (32768-).
    port_range: tuple[int, int] = (28000, 29999)
    #: Mark a node unschedulable (cordon) while the host manager drains it for maintenance.
    cordon_on_maintenance: bool = True
    #: A finished pod is deleted this long after its end was acknowledged (its logs with it).
    finished_pod_ttl_secs: float = 60.0
    #: Re-delivery period of unacknowledged updates.
    resend_secs: float = 10.0
    #: Pod creations in flight at once (the API server's CPU is the limit, not the client).
    create_concurrency: int = 8
    #: A watch is re-opened after this long even if the server keeps it (a relist is not needed).
    watch_timeout_secs: int = 300
    call_timeout_secs: float = 30.0
    max_backoff_secs: float = 10.0
    #: An announced job's Service is deleted once no run of the job has been live this long
    #: (k8s_services.py; long enough for a one-instance rolling update to start its new run).
    service_linger_secs: float = 30.0
    #: The StorageClass of stateful instances' PersistentVolumeClaims (k8s_volumes.py; empty:
    #: the cluster's default class).  It must bind late (WaitForFirstConsumer).
    volume_storage_class: str = ""

    def __post_init__(self) -> None:
        for name in (self.namespace, *self.pool_namespaces.values()):
            if not _DNS_LABEL.match(name):
                raise InvalidArgument(f"namespace {name!r} is not a DNS-1123 label",
                                      field="namespace")
        if not _DNS_LABEL.match(self.cluster_name):
            raise InvalidArgument(f"cluster_name {self.cluster_name!r} is not a DNS-1123 label",
                                  field="cluster_name")
        low, high = self.port_range
        if not 0 < low <= high <= 65535:
            raise InvalidArgument(f"port_range must be 1 <= first <= last <= 65535, got "
                                  f"{self.port_range}", field="port_range")
        if not 1 <= self.watch_timeout_secs <= 3600:
            raise InvalidArgument("watch_timeout_secs must be in 1..3600, got "
                                  f"{self.watch_timeout_secs}", field="watch_timeout_secs")
        if self.create_concurrency < 1 or self.create_concurrency > 256:
            raise InvalidArgument("create_concurrency must be in 1..256, got "
                                  f"{self.create_concurrency}", field="create_concurrency")
        for name in ("finished_pod_ttl_secs", "resend_secs", "call_timeout_secs", "max_backoff_secs",
                     "service_linger_secs"):
            value = getattr(self, name)
            if not 0 <= value < 1e9:
                raise InvalidArgument(f"{name} must be a non-negative number of seconds, got {value}",
                                      field=name)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace our pods may live in."""
        return tuple(sorted({self.namespace, *self.pool_namespaces.values()}))

    def namespace_of(self, pool: str) -> str:
        """The namespace of a pool's pods."""
        return self.pool_namespaces.get(pool, self.namespace)
