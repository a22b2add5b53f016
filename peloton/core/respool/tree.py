"""The resource pool tree: create, update, delete and look up pools by id or path.

The tree is the resource manager's in-memory model of its pools.  Storage
is the daemon's business: it loads `ResourcePool` values with
`PoolTree.from_pools`, and persists each write after the tree accepted it
(validation happens here, so a rejected write never reaches storage).

Invariants:
  * the root has id "root" and path "/"; every other node's path is its
    parent's path plus its name, and names are unique among siblings;
  * `by_id` and `by_path` index exactly the nodes reachable from the root;
  * `version` grows on every accepted change, so a daemon can recompute
    entitlements as soon as the tree changes (Peloton's UpdatedChannel).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from peloton.core.errors import AlreadyExists, DataCorruption, NotFound
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.model.resources import Resources
from peloton.core.model.respool import ResourcePool, ResourcePoolConfig
from peloton.core.respool.node import PoolNode
from peloton.core.respool.validation import validate_delete, validate_write


class PoolTree:
    """A mutable tree of `PoolNode`s rooted at the pool "root"."""

    def __init__(self) -> None:
        self.root = PoolNode(ROOT_POOL_ID, ResourcePoolConfig(name=ROOT_POOL_ID, parent_id=""),
                             None)
        self.by_id: dict[str, PoolNode] = {ROOT_POOL_ID: self.root}
        self.by_path: dict[str, PoolNode] = {"/": self.root}
        self.version = 0

    @classmethod
    def from_pools(cls, pools: Iterable[ResourcePool]) -> PoolTree:
        """Build a tree from stored pools given in any order (parents need not come first).

        Raises DataCorruption naming the pools whose parent chain never
        reaches the root, and the usual validation errors for bad configs.
        """
        tree = cls()
        waiting = {p.pool_id: p for p in pools if p.pool_id != ROOT_POOL_ID}
        progress = True
        while waiting and progress:
            progress = False
            for pool_id, pool in list(waiting.items()):
                if pool.config.parent_id in tree.by_id:
                    tree.create(pool_id, pool.config)
                    del waiting[pool_id]
                    progress = True
        if waiting:
            names = ", ".join(sorted(f"{p.config.name} ({i})" for i, p in waiting.items()))
            raise DataCorruption(f"resource pools without a reachable parent: {names}")
        return tree

    # -- lookup ---------------------------------------------------------------
    def get(self, pool_id: str) -> PoolNode:
        """The pool with this id, or NotFound."""
        node = self.by_id.get(pool_id)
        if node is None:
            raise NotFound(f"resource pool {pool_id!r} not found", field="pool_id")
        return node

    def lookup(self, path: str) -> PoolNode:
        """The pool at `path` ("/" is the root, "/a/b" a nested pool), or NotFound."""
        norm = "/" + "/".join(part for part in path.split("/") if part)
        node = self.by_path.get(norm)
        if node is None:
            raise NotFound(f"resource pool path {path!r} not found", field="path")
        return node

    def __contains__(self, pool_id: object) -> bool:
        return pool_id in self.by_id

    def __len__(self) -> int:
        return len(self.by_id)

    def nodes(self) -> Iterator[PoolNode]:
        """Every node, parents before children (pre-order)."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def leaves(self) -> Iterator[PoolNode]:
        """The pools that accept tasks."""
        return (n for n in self.nodes() if n.is_leaf and not n.is_root)

    def pools(self) -> list[ResourcePool]:
        """Every non-root pool as a storable value, parents first."""
        return [ResourcePool(n.pool_id, n.config) for n in self.nodes() if not n.is_root]

    # -- writes -----------------------------------------------------------------
    def create(self, pool_id: str, config: ResourcePoolConfig) -> PoolNode:
        """Add a pool; AlreadyExists if the id is taken, InvalidArgument if a rule fails."""
        if pool_id in self.by_id and pool_id != ROOT_POOL_ID:
            raise AlreadyExists(f"resource pool {pool_id!r} already exists", field="pool_id")
        parent = self.by_id.get(config.parent_id)
        validate_write(pool_id, config, parent, None)
        assert parent is not None  # validate_write rejects a missing parent
        node = PoolNode(pool_id, config, parent)
        parent.children.append(node)
        parent.queues = None  # an empty leaf that gains a child stops being a queue holder
        self.by_id[pool_id] = node
        self.by_path[node.path] = node
        self.version += 1
        return node

    def update(self, pool_id: str, config: ResourcePoolConfig) -> PoolNode:
        """Replace a pool's config (same parent); renames move the whole subtree's paths."""
        node = self.get(pool_id)
        validate_write(pool_id, config, self.by_id.get(config.parent_id), node)
        old_paths = [n for n in self._subtree(node)]
        for n in old_paths:
            del self.by_path[n.path]
        node.apply_config(config)
        for n in old_paths:
            if n is not node:
                n.path = n.compute_path()
            self.by_path[n.path] = n
        self.version += 1
        return node

    def delete(self, pool_id: str) -> None:
        """Remove a leaf pool that has no demand and no allocation."""
        node = self.get(pool_id)
        validate_delete(node)
        assert node.parent is not None
        node.parent.children.remove(node)
        del self.by_id[pool_id]
        del self.by_path[node.path]
        self.version += 1

    def set_capacity(self, capacity: Resources) -> None:
        """Record the cluster capacity as the root's reservation and limit."""
        self.root.set_capacity(capacity)

    @staticmethod
    def _subtree(node: PoolNode) -> Iterator[PoolNode]:
        stack = [node]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))
