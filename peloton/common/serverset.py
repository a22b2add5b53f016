"""Aurora ServerSet membership: how Aurora clients find the scheduler (here: the aurorabridge).

An Aurora cluster entry in clusters.json names `zk` and `scheduler_zk_path`;
the client lists the `member_*` children of that path, takes the first
(lowest sequence number), parses its ServerSet JSON

    {"serviceEndpoint": {"host": h, "port": p},
     "additionalEndpoints": {"http": {"host": h, "port": p}}, "status": "ALIVE"}

and talks to `http://host:port/api`, preferring additionalEndpoints
`https`, then `http` (we fall back to serviceEndpoint when neither exists).

`ServerSetMember` registers one ephemeral sequential `member_` node while
started and puts it back after the session is lost (an ephemeral node dies
with its session; kazoo then connects with a new one).  Register only while
leading: Aurora clients call the first member, so a follower must not be
listed first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError

from peloton.core.errors import DataCorruption, Unavailable

MEMBER_PREFIX = "member_"
#: Peloton's bridge default (`<root>/aurora/scheduler`); stock Aurora uses `/aurora/scheduler`.
DEFAULT_PATH = "/peloton/aurora/scheduler"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A host and port."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ServiceInstance:
    """One ServerSet member, as Twitter's ServerSet and Aurora's scheduler write it."""

    service_endpoint: Endpoint
    additional_endpoints: Mapping[str, Endpoint] = field(default_factory=dict)
    status: str = "ALIVE"
    shard: int | None = None

    @classmethod
    def for_http(cls, host: str, port: int) -> ServiceInstance:
        """What the bridge publishes: the same address as service and `http` endpoint."""
        endpoint = Endpoint(host, port)
        return cls(endpoint, {"http": endpoint})

    def to_json(self) -> bytes:
        """The ServerSet JSON (no `shard` key when it is None, as Peloton's bridge writes)."""
        doc: dict[str, Any] = {
            "serviceEndpoint": _endpoint_doc(self.service_endpoint),
            "additionalEndpoints": {k: _endpoint_doc(v) for k, v in self.additional_endpoints.items()},
            "status": self.status,
        }
        if self.shard is not None:
            doc["shard"] = self.shard
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ServiceInstance:
        """Parse a member node's data; DataCorruption if it is not ServerSet JSON."""
        try:
            doc = json.loads(data)
            extra = doc.get("additionalEndpoints") or {}
            return cls(service_endpoint=_endpoint(doc["serviceEndpoint"]),
                       additional_endpoints={str(k): _endpoint(v) for k, v in extra.items()},
                       status=str(doc.get("status", "ALIVE")),
                       shard=int(doc["shard"]) if doc.get("shard") is not None else None)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise DataCorruption(f"ServerSet member is not valid JSON: {data[:80]!r}") from exc

    def http_url(self) -> str:
        """The base URL an Aurora client would use (append `/api`)."""
        for scheme in ("https", "http"):
            if (endpoint := self.additional_endpoints.get(scheme)) is not None:
                return f"{scheme}://{endpoint.host}:{endpoint.port}"
        return f"http://{self.service_endpoint.host}:{self.service_endpoint.port}"


def _endpoint_doc(endpoint: Endpoint) -> dict[str, Any]:
    return {"host": endpoint.host, "port": endpoint.port}


def _endpoint(doc: Any) -> Endpoint:
    return Endpoint(host=str(doc["host"]), port=int(doc["port"]))


def members(client: KazooClient, path: str) -> list[str]:
    """The `member_` children of `path`, oldest first (empty if the path does not exist)."""
    try:
        children = client.get_children(path)
    except NoNodeError:
        return []
    return sorted((c for c in children if c.startswith(MEMBER_PREFIX)),
                  key=lambda c: (len(c), c))


def resolve(client: KazooClient, path: str) -> ServiceInstance:
    """The first member under `path`, the way Aurora's client picks it; Unavailable if none."""
    for name in members(client, path):
        try:
            data, _ = client.get(f"{path}/{name}")
        except NoNodeError:
            continue  # went away between the listing and the read
        return ServiceInstance.from_json(data)
    raise Unavailable(f"no ServerSet member under {path}")


def resolve_http_url(client: KazooClient, path: str) -> str:
    """`http://host:port` of the first member (what Aurora's client turns into `.../api`)."""
    return resolve(client, path).http_url()


class ServerSetMember:
    """Keeps one `member_` node with `instance` under `path` while started; a `Component`."""

    name = "serverset-member"

    def __init__(self, client: KazooClient, path: str, instance: ServiceInstance,
                 log: logging.Logger | None = None) -> None:
        self.path = path.rstrip("/") or "/"
        self.instance = instance
        self._client = client
        self._log = log or logging.getLogger("peloton.serverset")
        self._node: str | None = None
        self._started = False

    @property
    def node(self) -> str | None:
        """The full path of the member node while registered."""
        return self._node

    def start(self) -> None:
        """Register now (needs a connected client) and again after every reconnect."""
        if self._started:
            return
        self._started = True
        self._client.add_listener(self._on_state)
        self._ensure()

    def stop(self) -> None:
        """Unregister: delete the member node."""
        if not self._started:
            return
        self._started = False
        self._client.remove_listener(self._on_state)
        if self._client.connected:
            self._delete_node()
        self._node = None

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: never block here, re-register from a spawned task.
        if state == KazooState.CONNECTED and self._started:
            self._client.handler.spawn(self._ensure_logged)

    def _ensure_logged(self) -> None:
        try:
            self._ensure()
        except KazooException:
            self._log.warning("serverset: could not re-register under %s", self.path, exc_info=True)

    def _ensure(self) -> None:
        if self._node is not None and self._client.exists(self._node) is not None:
            return
        self._client.ensure_path(self.path)
        self._node = self._client.create(f"{self.path}/{MEMBER_PREFIX}", self.instance.to_json(),
                                         ephemeral=True, sequence=True)
        self._log.info("serverset: registered %s", self._node)
        if not self._started:  # stopped while registering
            self._delete_node()

    def _delete_node(self) -> None:
        node, self._node = self._node, None
        if node is not None:
            try:
                self._client.delete(node)
            except KazooException:
                self._log.warning("serverset: could not delete %s", node, exc_info=True)
