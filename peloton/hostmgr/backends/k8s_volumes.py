"""Persistent volumes on Kubernetes: a PersistentVolumeClaim per stateful instance, pinned
to its node.

The job manager names each instance's volume (peloton/jobmgr/volumes.py: an id minted with
the instance's first run on a node, the same id for every later run there) and says whether
an earlier run created it.  Here that volume is the claim `pelotonpy-vol-<volume id>` in the
namespace of the instance's pods:

* `storageClassName` is `volume_storage_class` (empty: the cluster's default class), which
  must bind late (`volumeBindingMode: WaitForFirstConsumer`: local-path, TopoLVM, OpenEBS
  LocalPV, a zonal cloud disk).  Our pods are created already bound (`spec.nodeName`), so
  kube-scheduler, which would otherwise choose the claim's node, never sees them: the claim
  is created with the annotation `volume.kubernetes.io/selected-node: <node>`, as
  kube-scheduler's volume binder writes it, and the class's provisioner makes the volume on
  that node (a local volume's nodeAffinity then pins it there).
* The size asked is `sizeMB` as `Mi`; the access mode ReadWriteOnce (one instance's data).
* The claim is created (an existing one is taken as is: a retried launch) before the run's
  pod, which mounts it at the volume's container path; a run whose volume an earlier run
  created finds its claim, or fails ("... was lost") rather than start on an empty one.
* `destroy` deletes claims (the job was deleted, or DeleteVolume); an absent claim counts
  as deleted.  A claim a live run of ours still mounts is kept and named.  Kubernetes'
  `pvc-protection` finalizer keeps a deleted claim until no pod uses it; the provisioner
  then removes the volume as its reclaim policy says (Delete for dynamic classes).

Names and labels: the cluster, job and instance labels of the pods, plus the volume id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from peloton.core.errors import FailedPrecondition, InvalidArgument
from peloton.core.model.ids import RunId
from peloton.core.model.sched import LaunchSpec
from peloton.hostmgr.backends.k8s_api import Conflict, KubeApi, KubeNotFound
from peloton.hostmgr.backends.k8s_config import PREFIX, KubeConfig
from peloton.hostmgr.backends.k8s_wire import CLUSTER_LABEL, INSTANCE_LABEL, JOB_LABEL, Json
from peloton.hostmgr.backends.k8s_wire import _label_safe as label_safe

#: On our claims: the volume id the job manager knows them by.
VOLUME_LABEL = f"{PREFIX}/volume-id"
#: What kube-scheduler's volume binder writes on a late-binding claim: its pod's node.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: The pod's volume name for its claim.
POD_VOLUME = "data"


def claim_name(volume_id: str) -> str:
    """The claim of a volume (a volume id is a UUID: a valid DNS subdomain once prefixed)."""
    return f"pelotonpy-vol-{volume_id.lower()}"


def claim_manifest(spec: LaunchSpec, node: str, namespace: str, config: KubeConfig) -> Json:
    """The PersistentVolumeClaim of a stateful run's volume, for `node`."""
    volume = spec.spec.volume
    if volume is None or not spec.volume_id:
        raise InvalidArgument(f"run {spec.run_id} has no persistent volume", field="volume")
    labels = {CLUSTER_LABEL: config.cluster_name, VOLUME_LABEL: label_safe(spec.volume_id)}
    try:
        run = RunId.parse(spec.run_id)
        labels.update({JOB_LABEL: label_safe(run.job_id), INSTANCE_LABEL: str(run.instance)})
    except InvalidArgument:
        pass  # not a Peloton run id (tools, tests)
    claim: Json = {
        "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": f"{max(1, math.ceil(volume.size_mb))}Mi"}}}
    if config.volume_storage_class:
        claim["storageClassName"] = config.volume_storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name(spec.volume_id), "namespace": namespace,
                         "labels": labels, "annotations": {SELECTED_NODE: node}},
            "spec": claim}


def mount_claim(pod: Json, spec: LaunchSpec) -> None:
    """Mount a stateful run's claim into its pod manifest at the volume's container path."""
    volume = spec.spec.volume
    if volume is None or not spec.volume_id:
        return
    container = pod["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": POD_VOLUME, "mountPath": volume.container_path}]
    pod["spec"]["volumes"] = [{"name": POD_VOLUME, "persistentVolumeClaim": {
        "claimName": claim_name(spec.volume_id)}}]


class Claims:
    """Creates and deletes the claims of stateful runs (called by the backend's workers)."""

    def __init__(self, config: KubeConfig, api: KubeApi) -> None:
        self.config = config
        self._api = api

    def ensure(self, claim: Json, created_before: bool) -> None:
        """Create the claim unless it exists.  Raises FailedPrecondition when an earlier run
        created it and it is gone (the volume was lost), or when the name is another
        cluster's claim; KubeError when the API server cannot be asked."""
        meta = claim["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims"
        if created_before:
            try:
                found = self._api.call("GET", f"{path}/{meta['name']}")
            except KubeNotFound:
                raise FailedPrecondition(
                    f"persistent volume {meta['labels'][VOLUME_LABEL]} was lost: its "
                    f"PersistentVolumeClaim {meta['name']} is gone", field="volume") from None
            self._check_ours(found)
            return
        try:
            self._api.call("POST", path, body=claim)
        except Conflict:  # a retried launch, or the claim of an earlier run of this instance
            self._check_ours(self._api.call("GET", f"{path}/{meta['name']}"))

    def _check_ours(self, claim: Json) -> None:
        labels = claim.get("metadata", {}).get("labels") or {}
        if labels.get(CLUSTER_LABEL) != self.config.cluster_name:
            name = claim.get("metadata", {}).get("name", "")
            raise FailedPrecondition(f"PersistentVolumeClaim {name} is not this cluster's",
                                     field="volume")

    def destroy(self, volume_ids: Sequence[str], in_use: set[str]) -> list[str]:
        """Delete the claims of these volumes in every namespace of ours, except those in
        `in_use` (returned); an absent claim counts as deleted."""
        kept = [v for v in volume_ids if v in in_use]
        for volume_id in volume_ids:
            if volume_id in in_use:
                continue
            for namespace in self.config.namespaces:
                try:
                    self._api.call("DELETE", f"/api/v1/namespaces/{namespace}/"
                                             f"persistentvolumeclaims/{claim_name(volume_id)}")
                except KubeNotFound:
                    continue
        return kept
