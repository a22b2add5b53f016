"""Resource pool CRUD with persistence: the in-memory tree and the store kept in step.

Every write is validated against the tree (the core's rules, so a bad
config is refused before storage is touched), then stored, then applied to
the tree; if storage fails the tree is left as it was, and if the tree
refuses after storage accepted (the tree changed in between, e.g. a parent
gained tasks) the stored write is undone.  Writes are serialised by their
own lock, held across the storage call; the daemon's state lock is only
held for tree reads and changes, so admission never waits for a disk.

`on_change` is called, with the state lock held, after every accepted
change: the daemon recomputes entitlements right there (Peloton's
UpdatedChannel), so a Query right after a Create already shows them.

Reads return `PoolView` snapshots, never live nodes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from peloton.api import peloton_texts as texts
from peloton.core.errors import FailedPrecondition, InvalidArgument, NotFound
from peloton.core.feasibility import over_limit
from peloton.core.model.ids import ROOT_POOL_ID, new_id
from peloton.core.model.resources import Resources
from peloton.core.model.respool import ResourcePool, ResourcePoolConfig
from peloton.core.respool.node import PoolNode, frozen
from peloton.core.respool.tree import PoolTree
from peloton.core.respool.validation import validate_write
from peloton.storage.cluster_store import ResourcePoolStore


@dataclass(frozen=True, slots=True)
class PoolView:
    """A pool as the API shows it: config, place in the tree, live accounting."""

    pool_id: str
    config: ResourcePoolConfig
    path: str
    parent_id: str
    children: tuple[str, ...]
    #: Admitted, unfinished work of regular tasks (what v0 `usage.allocation` shows).
    allocation: Resources
    #: Admitted, unfinished work of revocable tasks (v0 `usage.slack`).
    slack_allocation: Resources
    demand: Resources
    entitlement: Resources
    non_slack_entitlement: Resources
    slack_entitlement: Resources
    reservation: Resources = Resources()
    #: The pool's own limit (the root's is the cluster's capacity).
    limit: Resources = Resources()
    queued_gangs: int = 0
    queued_tasks: int = 0
    #: First task of the gang holding a backfill reservation here ("" if none).
    reserved_for: str = ""


def view_of(node: PoolNode) -> PoolView:
    """A snapshot of one node."""
    gangs = tasks = 0
    reserved = ""
    if node.queues is not None:
        for _, gang in node.queues.gangs():
            gangs += 1
            tasks += len(gang.tasks)
        held = [g for g in node.queues.reserved.values() if g.tasks]
        reserved = str(held[0].tasks[0].task_id) if held else ""
    return PoolView(
        pool_id=node.pool_id, config=node.config, path=node.path,
        parent_id=node.parent.pool_id if node.parent is not None else "",
        children=tuple(c.pool_id for c in node.children),
        allocation=node.non_slack_allocation_resources(),
        slack_allocation=node.slack_allocation_resources(),
        demand=node.demand_resources() + node.slack_demand_resources(),
        entitlement=node.entitlement_resources(),
        non_slack_entitlement=frozen(node.non_slack_entitlement),
        slack_entitlement=frozen(node.slack_entitlement),
        reservation=frozen(node.reservation), limit=frozen(node.limit),
        queued_gangs=gangs, queued_tasks=tasks, reserved_for=reserved)


def load_tree(store: ResourcePoolStore) -> PoolTree:
    """The tree of every stored pool (the root always exists and is never stored)."""
    return PoolTree.from_pools(store.get_resource_pools())


class PoolBook:
    """The pool API's operations over one tree and one store; see the module docstring."""

    def __init__(self, store: ResourcePoolStore, tree: PoolTree,
                 lock: AbstractContextManager[object], on_change: Callable[[], None]) -> None:
        self.store = store
        self.tree = tree
        self._lock = lock
        self._write_lock = threading.Lock()
        self._on_change = on_change

    # -- writes -------------------------------------------------------------------------------
    def create(self, config: ResourcePoolConfig, pool_id: str | None = None) -> str:
        """Add a pool; returns its id.  InvalidArgument/FailedPrecondition name the broken rule."""
        pool_id = pool_id or new_id()
        with self._write_lock:
            with self._lock:
                if pool_id in self.tree:
                    raise InvalidArgument(f"resource pool id {pool_id!r} is taken", field="id")
                validate_write(pool_id, config, self.tree.by_id.get(config.parent_id), None)
            self.store.create_resource_pool(ResourcePool(pool_id, config))
            try:
                with self._lock:
                    self.tree.create(pool_id, config)
                    self._on_change()
            except BaseException:
                self.store.delete_resource_pool(pool_id)
                raise
        return pool_id

    def update(self, pool_id: str, config: ResourcePoolConfig) -> None:
        """Replace a pool's config (same parent); NotFound if there is no such pool."""
        with self._write_lock:
            with self._lock:
                node = self.tree.get(pool_id)
                old = node.config
                validate_write(pool_id, config, self.tree.by_id.get(config.parent_id), node)
            self.store.update_resource_pool(ResourcePool(pool_id, config))
            try:
                with self._lock:
                    self.tree.update(pool_id, config)
                    self._on_change()
            except BaseException:
                self.store.update_resource_pool(ResourcePool(pool_id, old))
                raise

    def delete(self, path: str) -> str:
        """Remove the leaf pool at `path` if it has no demand and no allocation; returns its id.

        NotFound for an unknown path; FailedPrecondition with field "children" for a
        pool with children and "usage" for one with work; InvalidArgument for the root.
        """
        with self._write_lock:
            with self._lock:
                node = self.tree.lookup(path)
                self._check_delete(node)
                pool_id, config = node.pool_id, node.config
            self.store.delete_resource_pool(pool_id)
            try:
                with self._lock:
                    self._check_delete(self.tree.get(pool_id))
                    self.tree.delete(pool_id)
                    self._on_change()
            except BaseException:
                self.store.create_resource_pool(ResourcePool(pool_id, config))
                raise
        return pool_id

    @staticmethod
    def _check_delete(node: PoolNode) -> None:
        if node.is_root:
            raise InvalidArgument("the root pool cannot be deleted", field="path")
        if not node.is_leaf:
            names = ", ".join(c.path for c in node.children)
            raise FailedPrecondition(f"pool {node.path} is not a leaf (children: {names}); "
                                     "delete its children first", field="children")
        if node.has_work():
            raise FailedPrecondition(
                f"pool {node.path} is busy: demand {node.demand_resources()}, allocation "
                f"{node.allocation_resources()}", field="usage")

    # -- reads --------------------------------------------------------------------------------
    def get(self, pool_id: str) -> PoolView:
        """One pool ("" or "root" is the root); NotFound if unknown."""
        with self._lock:
            return view_of(self.tree.get(pool_id or ROOT_POOL_ID))

    def children(self, pool_id: str) -> list[PoolView]:
        """The direct children of a pool, in creation order."""
        with self._lock:
            return [view_of(c) for c in self.tree.get(pool_id or ROOT_POOL_ID).children]

    def all(self) -> list[PoolView]:
        """Every pool, the root first, parents before children."""
        with self._lock:
            return [view_of(n) for n in self.tree.nodes()]

    def lookup(self, path: str) -> str:
        """The id of the pool at `path`; NotFound if none."""
        with self._lock:
            return self.tree.lookup(path).pool_id

    def validate_for_job(self, pool_id: str, need: Resources | None = None) -> None:
        """A job may use this pool: it exists and is a leaf other than the root, and its
        limits could ever admit `need` (the job's largest gang), when given.

        The texts of the first checks are Peloton's (its job manager's
        validateResourcePool), which clients match on.
        """
        if not pool_id:
            raise InvalidArgument(texts.POOL_ID_NULL, field="respoolID")
        if pool_id == ROOT_POOL_ID:
            raise InvalidArgument(texts.POOL_IS_ROOT, field="respoolID")
        with self._lock:
            node = self.tree.by_id.get(pool_id)
            if node is None:
                raise NotFound(texts.POOL_NOT_FOUND, field="respoolID")
            if not node.is_leaf:
                raise InvalidArgument(texts.POOL_NOT_LEAF, field="respoolID")
            why = None if need is None else over_limit(need, node.effective_limit(), node.path)
        if why is not None:
            raise InvalidArgument(f"the job can never run: {why.message}", field=why.field)
