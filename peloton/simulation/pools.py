"""The resource pool tree a simulation starts with (POOLS.yaml).

    version: 1
    pools:
      - name: batch                 # every pool is a respool.yaml document ...
        resources:
          - {kind: cpu, reservation: 40, limit: 100, share: 1}
        children:                   # ... plus its child pools
          - name: adhoc
            resources: [{kind: cpu, reservation: 10, limit: 100, share: 1}]
      - file: services.yaml         # or a respool.yaml file (relative to this file)

Each pool's own fields are read exactly as `peloton respool create` reads a
resource pool YAML file (Peloton's key spelling, enums by name or number), except
that an unknown key is an error here rather than a warning.  The whole tree is
then built with the core's `PoolTree`, so every rule the resource manager
enforces (limit >= reservation, children's reservations within their parent's,
unique sibling names) is checked before a simulation starts.

Pools are identified by path (`/batch/adhoc`); the pool ids of the tree are the
paths themselves.  Jobs may only be submitted to leaf pools.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from peloton.api.convert.v0_respool import respool_config_from_v0
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.yaml_load import message_from_data
from peloton.core.errors import InvalidArgument, PelotonError
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.model.respool import ReservationType, ResourcePoolConfig
from peloton.core.respool.tree import PoolTree
from peloton.simulation.errors import InputError
from peloton.simulation.fields import Fields, check_version, kind_of, load_yaml, read_text

VERSION = 1
#: Keys a pool node has besides the respool.yaml fields.
_TREE_KEYS = ("children", "file")


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """One pool: its path and its configuration (`parent_id` is the parent's path, or "root")."""

    path: str
    config: ResourcePoolConfig

    @property
    def parent(self) -> str:
        """The parent's path ("/" for a top-level pool)."""
        return self.path.rsplit("/", 1)[0] or "/"


@dataclass(frozen=True, slots=True)
class PoolsSpec:
    """Every pool, parents before children (pre-order, siblings in file order)."""

    pools: tuple[PoolSpec, ...]

    def __iter__(self) -> Iterator[PoolSpec]:
        return iter(self.pools)

    def paths(self) -> tuple[str, ...]:
        """Every pool path, pre-order."""
        return tuple(p.path for p in self.pools)

    def leaves(self) -> tuple[str, ...]:
        """Paths of the pools without children (the ones jobs are submitted to), pre-order."""
        parents = {p.parent for p in self.pools}
        return tuple(p.path for p in self.pools if p.path not in parents)

    def get(self, path: str) -> PoolSpec:
        """The pool at `path` (KeyError if none)."""
        for pool in self.pools:
            if pool.path == path:
                return pool
        raise KeyError(path)

    def tree(self) -> PoolTree:
        """A core pool tree with these pools (ids are the paths); validates every rule."""
        tree = PoolTree()
        for pool in self.pools:
            tree.create(pool.path, pool.config)
        return tree

    def with_config(self, path: str, config: ResourcePoolConfig) -> PoolsSpec:
        """A copy with the pool at `path` given `config` (validated against the whole tree)."""
        updated = PoolsSpec(tuple(PoolSpec(p.path, config) if p.path == path else p
                                  for p in self.pools))
        updated.tree()
        return updated


def _strip_field_prefix(message: str, field: str | None) -> str:
    """The API loader's messages start with the field; ours add it in front themselves."""
    if field and message.startswith(f"{field}: "):
        return message[len(field) + 2:]
    return message


def _pool_config(data: dict[Any, Any], where: str, parent_id: str) -> ResourcePoolConfig:
    """A respool.yaml mapping -> core config, strictly (unknown keys are errors)."""
    try:
        loaded = message_from_data(data, respool_pb2.ResourcePoolConfig)
        if loaded.warnings:
            key = loaded.warnings[0].split(":", 1)[0]
            raise InvalidArgument("unknown key of a resource pool", field=key)
        if loaded.message.HasField("parent"):
            raise InvalidArgument("the tree gives a pool its parent; remove this key", field="parent")
        config = respool_config_from_v0(loaded.message)
    except InvalidArgument as exc:
        field = f"{where}.{exc.field}" if exc.field else where
        raise InvalidArgument(_strip_field_prefix(exc.message, exc.field), field=field) from None
    return replace(config, parent_id=parent_id)


def _walk(nodes: object, where: str, parent_path: str, base: Path | None,
          out: list[PoolSpec]) -> None:
    if not isinstance(nodes, list):
        raise InvalidArgument(f"must be a list of pools, got {kind_of(nodes)}", field=where)
    for i, node in enumerate(nodes):
        here = f"{where}[{i}]"
        if not isinstance(node, dict):
            raise InvalidArgument(f"must be a mapping (a pool), got {kind_of(node)}", field=here)
        own = {k: v for k, v in node.items() if k not in _TREE_KEYS}
        if node.get("file") is not None:
            own = _included(node["file"], own, here, base)
        parent_id = ROOT_POOL_ID if parent_path == "/" else parent_path
        config = _pool_config(own, here, parent_id)
        path = f"{parent_path.rstrip('/')}/{config.name}"
        out.append(PoolSpec(path, config))
        children = node.get("children")
        if children is not None:
            _walk(children, f"{here}.children", path, base, out)


def _included(name: object, own: dict[Any, Any], where: str, base: Path | None) -> dict[Any, Any]:
    """A node's fields from a respool.yaml file; keys beside `file` override the file's."""
    if not isinstance(name, str):
        raise InvalidArgument(f"must be a file name, got {kind_of(name)}", field=f"{where}.file")
    path = Path(name) if base is None or Path(name).is_absolute() else base / name
    data = load_yaml(read_text(path), str(path))
    return {**data, **own}


def pools_from_data(data: object, base: Path | None = None) -> PoolsSpec:
    """A parsed POOLS.yaml document; `base` is the directory `file:` names are relative to."""
    if not isinstance(data, dict):
        raise InvalidArgument(f"must be a mapping, got {kind_of(data)}")
    unknown = sorted(str(k) for k in data if k not in ("version", "pools"))
    if unknown:
        raise InvalidArgument(f"unknown key {unknown[0]!r} (known: version, pools)", field=unknown[0])
    check_version(Fields(data, "", ("version", "pools")), VERSION, "pools file")
    if not data.get("pools"):
        raise InvalidArgument("must list at least one pool", field="pools")
    found: list[PoolSpec] = []
    _walk(data["pools"], "pools", "/", base, found)
    spec = PoolsSpec(tuple(found))
    try:
        spec.tree()
    except PelotonError as exc:
        raise InvalidArgument(exc.message, field="pools") from None
    return spec


def read_pools(text: str, source: str = "pools.yaml", base: Path | None = None) -> PoolsSpec:
    """Parse POOLS.yaml text; InputError naming the file and the pool's place in the tree."""
    data = load_yaml(text, source)
    try:
        return pools_from_data(data, base)
    except InvalidArgument as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(source, exc.message, field=exc.field) from None


def load_pools(path: str | Path) -> PoolsSpec:
    """Read POOLS.yaml from `path` (`file:` entries relative to its directory)."""
    return read_pools(read_text(path), str(path), Path(path).parent)


# -- writing -------------------------------------------------------------------------------
def _config_data(config: ResourcePoolConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"name": config.name}
    if config.owning_team:
        out["owningTeam"] = config.owning_team
    if config.ldap_groups:
        out["ldapGroups"] = list(config.ldap_groups)
    if config.description:
        out["description"] = config.description
    out["resources"] = []
    for rc in config.resources:
        entry: dict[str, Any] = {"kind": rc.kind.value, "reservation": _plain(rc.reservation),
                                 "limit": _plain(rc.limit), "share": _plain(rc.share)}
        if rc.type is ReservationType.STATIC:
            entry["type"] = "STATIC"
        out["resources"].append(entry)
    if config.controller_limit_percent is not None:
        out["controllerLimit"] = {"maxPercent": _plain(config.controller_limit_percent)}
    if config.slack_limit_percent is not None:
        out["slackLimit"] = {"maxPercent": _plain(config.slack_limit_percent)}
    return out


def _plain(value: float) -> int | float:
    value = float(value)
    return int(value) if value.is_integer() else value


def pools_to_data(spec: PoolsSpec) -> dict[str, Any]:
    """The POOLS.yaml document for `spec` (the inverse of `pools_from_data`)."""
    nodes: dict[str, dict[str, Any]] = {}
    top: list[dict[str, Any]] = []
    for pool in spec.pools:
        node = _config_data(pool.config)
        nodes[pool.path] = node
        if pool.parent == "/":
            top.append(node)
        else:
            nodes[pool.parent].setdefault("children", []).append(node)
    return {"version": VERSION, "pools": top}
