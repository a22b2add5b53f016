"""The fake Nodes of a test control plane: created, made Ready or NotReady, deleted.

kwok plays every Node annotated `kwok.x-k8s.io/node: fake` by the stages in
tests/harness/kwok_stages.yaml; nothing else (no kubelet, no node lifecycle controller) touches
them, so what a test sets is what the API shows.
"""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.harness.procs import wait_for

#: kwok manages only nodes carrying this annotation with the value "fake".
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Node annotation: present, kwok keeps the node NotReady (`FakeNodes.set_ready` uses it).
NODE_NOT_READY_ANNOTATION = "pelotonpy.dev/fake-node-not-ready"
#: Node InternalIPs `FakeNodes.add` hands out: the upper half of 10/8 (pods get the lower).
NODE_IP_BASE = ipaddress.IPv4Address("10.128.0.1")


def reply_json(reply: Any) -> Any:
    """The JSON body of a client call made with `_preload_content=False` (None if empty).

    The body is read to its end before the connection goes back to the pool: a connection
    released with unread bytes hands them to the next request as its status line.
    """
    try:
        data = reply.data
        return json.loads(data) if data else None
    finally:
        reply.release_conn()


class FakeNodes:
    """The kwok-played Nodes of one control plane; `api` returns its admin ApiClient."""

    def __init__(self, api: Callable[[], Any]) -> None:
        self._api = api
        self._nodes_made = 0

    def add(self, count: int, *, prefix: str = "kwok-node-", cpu: str = "8", memory: str = "32Gi",
                  pods: str = "110", storage: str = "200Gi", gpus: int = 0,
                  labels: dict[str, str] | None = None,
                  taints: list[dict[str, str]] | None = None, start: int = 0,
                  threads: int = 8) -> list[str]:
        """Create `count` kwok-managed Nodes named `<prefix><n>` and return their names.

        Capacity and allocatable are both set (cpu, memory, pods, ephemeral-storage, and
        `nvidia.com/gpu` when gpus > 0); each node gets its own InternalIP; `labels` are added
        to the usual kubernetes.io/hostname, os and arch ones; `taints` are dicts like
        {"key": ..., "value": ..., "effect": "NoSchedule"}.  kwok then makes them Ready (see
        `wait_ready`).  Numbering starts at `start`.  Requests go out on `threads`
        threads with undecoded replies: 5,000 nodes were created in 11 s and Ready in 20 s here.
        """
        from kubernetes import client

        core = client.CoreV1Api(self._api())
        resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": storage}
        if gpus > 0:
            resources["nvidia.com/gpu"] = str(gpus)
        names = [f"{prefix}{n}" for n in range(start, start + count)]
        # Each node its own InternalIP (pods' hostIP), unique across calls.
        first_ip = self._nodes_made
        self._nodes_made += count
        addresses = {name: str(NODE_IP_BASE + first_ip + i) for i, name in enumerate(names)}

        def body(name: str) -> dict[str, Any]:
            return {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {FAKE_NODE_ANNOTATION: "fake"},
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                               "kubernetes.io/arch": "amd64", "type": "kwok", **(labels or {})},
                },
                "spec": {"taints": list(taints or [])},
                "status": {"capacity": dict(resources), "allocatable": dict(resources),
                           "addresses": [{"type": "InternalIP", "address": addresses[name]},
                                         {"type": "Hostname", "address": name}]},
            }

        def create(name: str) -> None:
            # Decoding each reply into a V1Node costs more than the request itself.
            reply_json(core.create_node(body(name), _preload_content=False))

        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            list(pool.map(create, names))
        return names

    def _items(self) -> list[dict[str, Any]]:
        from kubernetes import client

        reply = client.CoreV1Api(self._api()).list_node(_preload_content=False)
        items: list[dict[str, Any]] = reply_json(reply)["items"]
        return items

    @staticmethod
    def _ready_status(node: dict[str, Any]) -> str:
        for condition in node.get("status", {}).get("conditions") or []:
            if condition.get("type") == "Ready":
                return str(condition.get("status"))
        return "Unknown"

    def wait_ready(self, names: Sequence[str], timeout: float = 120.0) -> None:
        """Wait until every node in `names` reports Ready=True (AssertionError after `timeout`)."""
        wanted = set(names)
        left: set[str] = set(wanted)

        def all_ready() -> bool:
            ready = {item["metadata"]["name"] for item in self._items()
                     if self._ready_status(item) == "True"}
            left.clear()
            left.update(wanted - ready)
            return not left

        try:
            wait_for(all_ready, timeout, f"{len(wanted)} nodes to be Ready", interval=0.5)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {len(left)} not Ready, e.g. {sorted(left)[:5]}") from None

    def delete(self, name: str) -> None:
        """Delete Node `name` (no error if it is gone).

        Its pods stay (no pod garbage collector runs) and kwok stops playing them.
        """
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            reply_json(client.CoreV1Api(self._api()).delete_node(name, _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def set_ready(self, name: str, ready: bool, timeout: float = 30.0) -> None:
        """Make node `name` Ready or NotReady and wait until the API shows it.

        NotReady: the node gets the annotation `pelotonpy.dev/fake-node-not-ready` (kwok's
        node-initialize stage skips such nodes and node-not-ready keeps them NotReady, so kwok
        does not revert it) and its Ready condition is patched to False at once.  Ready: the
        annotation is removed and the condition patched to True (kwok's node-initialize would
        do it too).  Other conditions, taints and pods are left alone: no node lifecycle
        controller runs to taint the node or evict its pods.
        """
        from kubernetes import client

        core = client.CoreV1Api(self._api())
        annotation = None if ready else "true"
        metadata = {"annotations": {NODE_NOT_READY_ANNOTATION: annotation}}
        reply_json(core.patch_node(name, {"metadata": metadata}, _preload_content=False))
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        condition = {
            "type": "Ready", "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "set NotReady by the test harness",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }
        reply_json(core.patch_node_status(name, {"status": {"conditions": [condition]}},
                                          _preload_content=False))
        want = "True" if ready else "False"

        def shows() -> bool:
            node = reply_json(core.read_node(name, _preload_content=False))
            return self._ready_status(node) == want

        wait_for(shows, timeout, f"node {name} Ready={want}", interval=0.1)
