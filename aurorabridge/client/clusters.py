"""clusters.json as Aurora's client reads it: where each cluster's scheduler is.

Files, in order (a later one's cluster of the same name wins):
`$AURORA_CONFIG_ROOT/clusters.json` (default `/etc/aurora/clusters.json`),
then `~/.aurora/clusters.json`.  A file holds a list of clusters (or an object
whose values are clusters); an entry without `name` is ignored.  Fields read:
`name`, `scheduler_uri` (the scheduler's base URL; `/api` is appended), or `zk`
(comma-separated hosts), `zk_port` (2181) and `scheduler_zk_path` (where the
scheduler's ServerSet members are), `proxy_url` (for web links),
`auth_mechanism` (`UNAUTHENTICATED`, or `BASIC`: credentials from ~/.netrc).
Ours adds `thrift_protocol` (`binary`, the default as Aurora's current client,
or `json` as its older one).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ZK_PORT = 2181


class ClustersError(Exception):
    """A clusters.json that cannot be read."""


@dataclass(frozen=True)
class Cluster:
    """One cluster entry."""

    name: str
    attributes: dict[str, Any] = field(default_factory=dict)

    def _get(self, key: str, default: Any = None) -> Any:
        value = self.attributes.get(key)
        return default if value is None else value

    def _text(self, key: str) -> str | None:
        value = self.attributes.get(key)
        return None if value is None else str(value)

    @property
    def scheduler_uri(self) -> str | None:
        """The scheduler's base URL, when given directly."""
        return self._text("scheduler_uri")

    @property
    def zk(self) -> str | None:
        """ZooKeeper hosts (comma-separated), when the scheduler is found there."""
        return self._text("zk")

    @property
    def zk_port(self) -> int:
        """ZooKeeper's port."""
        return int(self._get("zk_port", DEFAULT_ZK_PORT))

    @property
    def scheduler_zk_path(self) -> str | None:
        """The ServerSet path of the scheduler."""
        return self._text("scheduler_zk_path")

    @property
    def proxy_url(self) -> str | None:
        """The URL used for web links instead of the scheduler's own."""
        return self._text("proxy_url")

    @property
    def auth_mechanism(self) -> str:
        """UNAUTHENTICATED or BASIC."""
        return str(self._get("auth_mechanism", "UNAUTHENTICATED"))

    @property
    def thrift_protocol(self) -> str:
        """binary or json (`AURORA_THRIFT_PROTOCOL` overrides)."""
        return str(os.environ.get("AURORA_THRIFT_PROTOCOL") or self._get("thrift_protocol", "binary"))


def search_paths() -> list[str]:
    """The clusters.json files Aurora's client reads, in order."""
    root = os.environ.get("AURORA_CONFIG_ROOT") or "/etc/aurora"
    return [os.path.join(root, "clusters.json"), os.path.join(os.path.expanduser("~/.aurora"),
                                                              "clusters.json")]


def parse(text: str, path: str) -> list[Cluster]:
    """The clusters of one file's text."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ClustersError(f"Unable to parse {path}: {exc}") from None
    if isinstance(doc, list):
        entries: Iterable[Any] = doc
    elif isinstance(doc, dict):
        entries = doc.values()
    else:
        raise ClustersError(f"Unknown layout in {path}")
    found = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ClustersError(f"Clusters must be maps of key/value pairs, got {type(entry).__name__}"
                                f" in {path}")
        if "name" in entry:
            found.append(Cluster(str(entry["name"]), dict(entry)))
    return found


def load(paths: Iterable[str] | None = None) -> dict[str, Cluster]:
    """Every cluster of the clusters.json files that exist, by name."""
    clusters: dict[str, Cluster] = {}
    for path in paths if paths is not None else search_paths():
        if not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ClustersError(f"Unable to read {path}: {exc}") from None
        for cluster in parse(text, path):
            clusters[cluster.name] = cluster
    return clusters
