"""A stateful run's PersistentVolumeClaim on Kubernetes (peloton/hostmgr/backends/k8s_volumes.py):
the claim pinned to the run's node, mounted by its pod, found again by later runs, a lost one
failing the run, deleted on request unless a live run mounts it."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

from peloton.core.errors import FailedPrecondition
from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import CommandSpec, TaskSpec, VolumeSpec
from peloton.hostmgr.backends.k8s_api import Conflict, KubeNotFound
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.k8s_volumes import (
    SELECTED_NODE,
    Claims,
    claim_manifest,
    claim_name,
    mount_claim,
)

Json = dict[str, Any]
JOB = "6d1b7c0e-0000-4000-8000-000000000001"
VOLUME = "0b5d8e57-8f2a-5d8e-9a4f-6c1d2e3f4a5b"
CLAIMS = "/api/v1/namespaces/{ns}/persistentvolumeclaims"


def _launch(volume_id: str = VOLUME, created: bool = False) -> LaunchSpec:
    spec = TaskSpec(name="db", resources=Resources(cpu=0.1, mem_mb=16),
                    command=CommandSpec("sleep 1000"), volume=VolumeSpec("/data", 20.5))
    return LaunchSpec(f"{JOB}-0-3", spec, volume_id=volume_id, volume_created=created)


class ClaimApi:
    """Claims by path, as the API server keeps them (create, get, delete)."""

    def __init__(self) -> None:
        self.claims: dict[str, Json] = {}
        self.calls: list[tuple[str, str]] = []

    def call(self, method: str, path: str, query: Sequence[tuple[str, str]] = (),
             body: Json | None = None) -> Json:
        self.calls.append((method, path))
        if method == "POST":
            assert body is not None
            key = f"{path}/{body['metadata']['name']}"
            if key in self.claims:
                raise Conflict(409, "already exists")
            self.claims[key] = copy.deepcopy(body)
            return body
        if path not in self.claims:
            raise KubeNotFound(404, f"{path} not found")
        if method == "DELETE":
            return self.claims.pop(path)
        return copy.deepcopy(self.claims[path])


def test_the_claim_is_pinned_to_the_node_and_mounted_by_the_pod() -> None:
    config = KubeConfig(source="in-cluster", volume_storage_class="local-path")
    claim = claim_manifest(_launch(), "node-b", "team-ns", config)
    assert claim["metadata"]["name"] == claim_name(VOLUME) == f"pelotonpy-vol-{VOLUME}"
    assert claim["metadata"]["namespace"] == "team-ns"
    assert claim["metadata"]["annotations"] == {SELECTED_NODE: "node-b"}
    assert claim["metadata"]["labels"] == {
        "pelotonpy.dev/cluster": "pelotonpy", "pelotonpy.dev/volume-id": VOLUME,
        "pelotonpy.dev/job-id": JOB, "pelotonpy.dev/instance": "0"}
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                             "resources": {"requests": {"storage": "21Mi"}},
                             "storageClassName": "local-path"}
    # No class configured: the cluster's default class (the field left out).
    default = claim_manifest(_launch(), "node-b", "team-ns", KubeConfig(source="in-cluster"))
    assert "storageClassName" not in default["spec"]
    pod: Json = {"spec": {"containers": [{"name": "task"}]}}
    mount_claim(pod, _launch())
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {
        "claimName": claim_name(VOLUME)}}]


def test_later_runs_find_the_claim_and_a_lost_one_fails_the_run() -> None:
    api = ClaimApi()
    config = KubeConfig(source="in-cluster")
    claims = Claims(config, api)  # type: ignore[arg-type]
    claim = claim_manifest(_launch(), "node-b", "pelotonpy", config)
    claims.ensure(claim, created_before=False)
    claims.ensure(claim, created_before=False)  # a retried launch: the same claim, taken as is
    claims.ensure(claim, created_before=True)   # a later run of the instance
    path = f"{CLAIMS.format(ns='pelotonpy')}/{claim_name(VOLUME)}"
    assert list(api.claims) == [path]

    assert claims.destroy([VOLUME], in_use={VOLUME}) == [VOLUME]  # a live run mounts it
    assert path in api.claims
    assert claims.destroy([VOLUME, "gone-already"], in_use=set()) == []
    assert api.claims == {}
    with pytest.raises(FailedPrecondition, match=f"persistent volume {VOLUME} was lost: its "
                                                 f"PersistentVolumeClaim {claim_name(VOLUME)} "
                                                 "is gone"):
        claims.ensure(claim, created_before=True)


def test_a_claim_of_another_cluster_is_not_taken() -> None:
    api = ClaimApi()
    ours = KubeConfig(source="in-cluster")
    theirs = claim_manifest(_launch(), "node-b", "pelotonpy",
                            KubeConfig(source="in-cluster", cluster_name="other"))
    api.call("POST", CLAIMS.format(ns="pelotonpy"), body=theirs)
    with pytest.raises(FailedPrecondition, match="is not this cluster's"):
        Claims(ours, api).ensure(claim_manifest(_launch(), "node-b", "pelotonpy", ours),  # type: ignore[arg-type]
                                 created_before=False)
