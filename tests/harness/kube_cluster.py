"""`peloton up --backend k8s:...` on kwok nodes of its own, for end-to-end tests on Kubernetes.

Each `KubeCluster` tags its nodes with a label of its own and runs under a cluster
name of its own, so clusters of several tests share one control plane (the session's
`kube`) without seeing each other's nodes or adopting each other's pods.  It signs in
with the least-privilege scheduler kubeconfig (`kube_scheduler`).

kwok's nodes run nothing: a pod ends when its annotations say so (tests/harness/
kwok_stages.yaml).  `fake_labels` gives the task labels that become those annotations,
so a job says in its config how its fake run ends (exit code, run time, reason).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.harness.cluster import UpCluster
from tests.harness.kube import KubeControlPlane
from tests.harness.kube_nodes import reply_json


def fake_labels(exit_code: int | None = None, run_secs: float | None = None, reason: str = "",
                waiting_reason: str = "") -> str:
    """The YAML list of task labels (Peloton's `labels:` of a task config) that tell kwok how
    a run ends; with no exit code a run keeps running (a service)."""
    labels = []
    if exit_code is not None:
        labels.append(("pelotonpy.dev/fake-exit-code", str(exit_code)))
    if run_secs is not None:
        labels.append(("pelotonpy.dev/fake-run-secs", str(run_secs)))
    if reason:
        labels.append(("pelotonpy.dev/fake-reason", reason))
    if waiting_reason:
        labels.append(("pelotonpy.dev/fake-waiting-reason", waiting_reason))
    return "\n".join(f"  - key: {k}\n    value: \"{v}\"" for k, v in labels)


class KubeCluster:
    """A `peloton up` whose hosts are kwok nodes of its own; see the module docstring."""

    def __init__(self, kube: KubeControlPlane, kubeconfig: Path, base: Path, *, nodes: int = 3,
                 cpu: str = "4", memory: str = "16Gi", gpus: int = 0,
                 labels: dict[str, str] | None = None, settings: dict[str, Any] | None = None,
                 extra: Sequence[str] = ()) -> None:
        self.kube = kube
        self.tag = uuid.uuid4().hex[:8]
        self.name = f"t-{self.tag}"
        self.node_label = {"pelotonpy-test": self.tag}
        self.nodes: list[str] = []
        self.add_nodes(nodes, cpu=cpu, memory=memory, gpus=gpus, labels=labels)
        self.settings: dict[str, Any] = {
            "node_selector": f"pelotonpy-test={self.tag}", "cluster_name": self.name,
            "finished_pod_ttl_secs": 5.0, "resend_secs": 2.0, **(settings or {})}
        self.settings_file = base / "kubernetes.yaml"
        self.settings_file.write_text(yaml.safe_dump(self.settings))
        self.up = UpCluster(base, agents=0, extra=["--backend", f"k8s:{kubeconfig}",
                                                   "--k8s-config", str(self.settings_file), *extra])

    def configure(self, **settings: Any) -> None:
        """Change backend settings (the `kubernetes:` section) for the next `start()`."""
        self.settings.update(settings)
        self.settings_file.write_text(yaml.safe_dump(self.settings))

    def add_nodes(self, count: int, *, cpu: str = "4", memory: str = "16Gi", gpus: int = 0,
                  labels: dict[str, str] | None = None,
                  taints: list[dict[str, str]] | None = None) -> list[str]:
        """More kwok nodes of this cluster (Ready before this returns)."""
        names = self.kube.nodes.add(count, prefix=f"{self.name}-", start=len(self.nodes), cpu=cpu,
                                    memory=memory, gpus=gpus, taints=taints,
                                    labels={**self.node_label, **(labels or {})})
        self.kube.nodes.wait_ready(names)
        self.nodes.extend(names)
        return names

    def start(self) -> KubeCluster:
        """Start `peloton up` and wait until it serves."""
        self.up.start()
        return self

    def close(self) -> None:
        """Stop `peloton up`, delete this cluster's pods, Services, claims and nodes."""
        try:
            self.up.close()
        finally:
            from kubernetes.client.exceptions import ApiException

            core = self._core()
            for pod in self.pods():
                meta = pod["metadata"]
                try:
                    # The reply is read before the connection goes back to the pool (an unread
                    # body would be taken for the next reply's status line).
                    reply_json(core.delete_namespaced_pod(meta["name"], meta["namespace"],
                                                          grace_period_seconds=0,
                                                          _preload_content=False))
                except ApiException as exc:
                    if exc.status != 404:  # gone meanwhile (its finished-pod TTL ran out)
                        raise
            for service in self.services():
                meta = service["metadata"]
                try:
                    reply_json(core.delete_namespaced_service(meta["name"], meta["namespace"],
                                                              _preload_content=False))
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            for claim in self.claims():
                meta = claim["metadata"]
                try:
                    reply_json(core.delete_namespaced_persistent_volume_claim(
                        meta["name"], meta["namespace"], _preload_content=False))
                    # No controller-manager here to lift `kubernetes.io/pvc-protection` once no
                    # pod uses the claim: the harness does it, or the claim would stay.
                    reply_json(core.patch_namespaced_persistent_volume_claim(
                        meta["name"], meta["namespace"], {"metadata": {"finalizers": None}},
                        _preload_content=False))
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            for name in self.nodes:
                self.kube.nodes.delete(name)

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.kube.api())

    def pods(self, job_id: str = "") -> list[dict[str, Any]]:
        """This cluster's pods (of one job, if named), as the API server's JSON."""
        import json

        selector = f"pelotonpy.dev/cluster={self.name}"
        if job_id:
            selector += f",pelotonpy.dev/job-id={job_id}"
        resp = self._core().list_pod_for_all_namespaces(label_selector=selector,
                                                        _preload_content=False)
        try:
            return list(json.loads(resp.data)["items"])
        finally:
            resp.release_conn()

    def claims(self) -> list[dict[str, Any]]:
        """This cluster's PersistentVolumeClaims (stateful instances' volumes), as JSON."""
        return list(reply_json(self._core().list_persistent_volume_claim_for_all_namespaces(
            label_selector=f"pelotonpy.dev/cluster={self.name}", _preload_content=False))["items"])

    def services(self) -> list[dict[str, Any]]:
        """This cluster's Services (those of announced jobs), as the API server's JSON."""
        return list(reply_json(self._core().list_service_for_all_namespaces(
            label_selector=f"pelotonpy.dev/cluster={self.name}", _preload_content=False))["items"])

    def running_pods(self, job_id: str = "") -> dict[str, str]:
        """Pod name -> node of this cluster's Running pods not being deleted."""
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in self.pods(job_id)
                if p.get("status", {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")}
