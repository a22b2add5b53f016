"""Validation of resource pool configs against the tree they are written into.

Each rule raises `InvalidArgument` (or `FailedPrecondition` for state the
caller cannot fix by editing the request) with a message that names the
pool, the kind and both numbers, so `peloton respool create` can tell a user
exactly what to change.  Rules follow Peloton's `respoolconfig_validator.go`,
plus three it lacks:

  * an update may not lower a pool's limit below a child's limit, nor its
    reservation below the sum of its children's reservations (Peloton only
    checks these when the child is written, so a parent edit could break them);
  * a pool that holds tasks (demand or allocation) may not gain children,
    since only leaves hold queues;
  * values must be finite and at most MAX_AMOUNT (resources.check_amount).

Top-level pools are not checked against the root: the root's reservation and
limit are the cluster capacity, which changes as hosts come and go, and a
pool config must not become invalid because a host went down.
"""

from __future__ import annotations

import math

from peloton.core.errors import FailedPrecondition, InvalidArgument
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.model.resources import EPSILON, KINDS, ResourceKind, check_amount
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.core.respool.node import PoolNode


def parse_kind(name: str) -> ResourceKind:
    """A resource kind from its API name, or InvalidArgument listing the valid names."""
    try:
        return ResourceKind(name)
    except ValueError:
        valid = ", ".join(k.value for k in KINDS)
        raise InvalidArgument(f"unknown resource kind {name!r} (expected one of {valid})",
                              field="resources.kind") from None


def check_pool_amount(pool: str, kind: ResourceKind, label: str, value: float) -> float:
    """A pool's reservation, limit or share of `kind` (`label`): a finite number from 0 to
    MAX_AMOUNT (check_amount), else InvalidArgument naming pool, kind and field
    `resources.<label>`.  Every front that writes pools (v0 respool, Aurora setQuota)
    reaches this through `validate_config`; the bridge also calls it on a quota before it
    changes any pool, so a refused quota leaves no trace."""
    try:
        return check_amount(value, f"resources.{label}")
    except InvalidArgument as exc:
        raise InvalidArgument(f"pool {pool!r}: {kind.value} {label}: {exc.message}",
                              field=exc.field) from None


def validate_config(config: ResourcePoolConfig) -> None:
    """Rules that need only the config itself."""
    name = config.name
    if not name or "/" in name or name.strip() != name:
        raise InvalidArgument(f"pool name {name!r} must be non-empty, without '/' or "
                              "surrounding spaces", field="name")
    seen: set[ResourceKind] = set()
    for rc in config.resources:
        kind = rc.kind
        if kind in seen:
            raise InvalidArgument(f"pool {name!r}: resource kind {kind.value} is configured "
                                  "more than once", field="resources.kind")
        seen.add(kind)
        for label, value in (("reservation", rc.reservation), ("limit", rc.limit),
                             ("share", rc.share)):
            check_pool_amount(name, kind, label, value)
        if rc.limit < rc.reservation - EPSILON:
            raise InvalidArgument(f"pool {name!r}: {kind.value} limit {rc.limit:g} is below its "
                                  f"reservation {rc.reservation:g}", field="resources.limit")
    for label, pct in (("controller_limit", config.controller_limit_percent),
                       ("slack_limit", config.slack_limit_percent)):
        if pct is not None and not (math.isfinite(pct) and 0 <= pct <= 100):
            raise InvalidArgument(f"pool {name!r}: {label} must be a percent in [0, 100], "
                                  f"got {pct}", field=f"{label}.max_percent")


def validate_write(pool_id: str, config: ResourcePoolConfig, parent: PoolNode | None,
                   existing: PoolNode | None) -> None:
    """All rules for creating (`existing` None) or updating pool `pool_id` under `parent`.

    `parent` is None when the config names a parent that does not exist.
    """
    if pool_id == ROOT_POOL_ID:
        raise InvalidArgument(f"the root pool {ROOT_POOL_ID!r} cannot be written",
                              field="pool_id")
    if config.parent_id == pool_id:
        raise InvalidArgument(f"pool {pool_id!r} cannot be its own parent", field="parent_id")
    validate_config(config)
    if parent is None:
        raise InvalidArgument(f"parent pool {config.parent_id!r} does not exist",
                              field="parent_id")
    if existing is not None and existing.parent is not parent:
        old = existing.parent.pool_id if existing.parent else ""
        raise InvalidArgument(f"pool {existing.path}: changing the parent ({old!r} -> "
                              f"{config.parent_id!r}) is not allowed", field="parent_id")
    if existing is None and parent.is_leaf and not parent.is_root and parent.has_work():
        raise FailedPrecondition(f"pool {parent.path} holds tasks, so it cannot get a child "
                                 "pool (only leaf pools run tasks)", field="parent_id")
    for sibling in parent.children:
        if sibling is not existing and sibling.name == config.name:
            raise InvalidArgument(f"pool {parent.path} already has a child named "
                                  f"{config.name!r}", field="name")
    _check_against_parent(config, parent, existing)
    if existing is not None:
        _check_against_children(config, existing)


def _kind(node: PoolNode, kind: ResourceKind) -> ResourceConfig:
    return node.config.resource(kind)


def _check_against_parent(config: ResourcePoolConfig, parent: PoolNode,
                          existing: PoolNode | None) -> None:
    # Configs are compared as the user wrote them, with Peloton's epsilon, not as the
    # fixed-point amounts the tree holds: three children of 0.0416667 fit a parent of 0.125
    # in Peloton, though each rounds up to 0.042.
    if parent.is_root:
        return
    for kind in KINDS:
        rc = config.resource(kind)
        limit = _kind(parent, kind).limit
        if rc.limit > limit + EPSILON:
            raise InvalidArgument(f"pool {config.name!r}: {kind.value} limit {rc.limit:g} "
                                  f"exceeds parent {parent.path} limit {limit:g}",
                                  field="resources.limit")
        siblings = sum(_kind(c, kind).reservation for c in parent.children if c is not existing)
        reserved = _kind(parent, kind).reservation
        if siblings + rc.reservation > reserved + EPSILON:
            raise InvalidArgument(
                f"pool {config.name!r}: {kind.value} reservations of the children of "
                f"{parent.path} would sum to {siblings + rc.reservation:g}, above its "
                f"reservation {reserved:g}", field="resources.reservation")


def _check_against_children(config: ResourcePoolConfig, node: PoolNode) -> None:
    for kind in KINDS:
        rc = config.resource(kind)
        for child in node.children:
            limit = _kind(child, kind).limit
            if limit > rc.limit + EPSILON:
                raise InvalidArgument(f"pool {node.path}: {kind.value} limit {rc.limit:g} is "
                                      f"below child {child.path} limit {limit:g}",
                                      field="resources.limit")
        total = sum(_kind(c, kind).reservation for c in node.children)
        if total > rc.reservation + EPSILON:
            raise InvalidArgument(f"pool {node.path}: {kind.value} reservation "
                                  f"{rc.reservation:g} is below its children's total {total:g}",
                                  field="resources.reservation")


def validate_delete(node: PoolNode) -> None:
    """Only a leaf without demand or allocation may be deleted."""
    if node.is_root:
        raise InvalidArgument("the root pool cannot be deleted", field="pool_id")
    if not node.is_leaf:
        raise FailedPrecondition(f"pool {node.path} has {len(node.children)} child pool(s); "
                                 "delete them first", field="pool_id")
    if node.has_work():
        raise FailedPrecondition(
            f"pool {node.path} still has work: demand {node.demand_resources()}, "
            f"allocation {node.allocation_resources()}", field="pool_id")
