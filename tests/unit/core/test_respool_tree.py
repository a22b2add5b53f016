"""Resource pool tree: writes, lookups, derived limits and every validation rule."""

from __future__ import annotations

import pytest

from peloton.core.errors import (
    AlreadyExists,
    DataCorruption,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from peloton.core.model.resources import ResourceKind, Resources, to_units
from peloton.core.model.respool import ResourceConfig, ResourcePool, ResourcePoolConfig
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.respool.validation import parse_kind
from peloton.core.states import TaskState
from tests.unit.core.factories import pool_config, rm_task, units


@pytest.fixture
def tree() -> PoolTree:
    t = PoolTree()
    t.create("a", pool_config("a", cpu=(50, 100, 1), mem=(1000, 2000, 1)))
    t.create("b", pool_config("b", "a", cpu=(20, 80, 1), mem=(500, 1000, 1)))
    return t


def test_paths_and_lookup(tree: PoolTree) -> None:
    assert tree.lookup("/").is_root
    assert tree.lookup("/a/b").pool_id == "b"
    assert tree.lookup("a/b/").pool_id == "b"
    assert tree.get("b").path == "/a/b"
    assert [n.pool_id for n in tree.leaves()] == ["b"]
    with pytest.raises(NotFound):
        tree.lookup("/a/c")
    with pytest.raises(NotFound):
        tree.get("zzz")


def test_rename_moves_subtree_paths(tree: PoolTree) -> None:
    tree.update("a", pool_config("x", cpu=(50, 100, 1), mem=(1000, 2000, 1)))
    assert tree.lookup("/x/b").pool_id == "b"
    with pytest.raises(NotFound):
        tree.lookup("/a/b")


def test_derived_limits() -> None:
    t = PoolTree()
    node = t.create("p", pool_config("p", cpu=(10, 20, 1), mem=(100, 200, 1),
                                     controller_pct=50))
    assert node.slack_limit == units(0, 20)  # 20% of mem reservation, cpu pinned at 0
    assert node.controller_limit == units(5, 50)
    node2 = t.create("q", pool_config("q", cpu=(10, 20, 1), mem=(100, 200, 1), slack_pct=50))
    assert node2.slack_limit == units(0, 50)
    assert node2.controller_limit is None


def test_version_grows_on_every_change(tree: PoolTree) -> None:
    v = tree.version
    tree.create("c", pool_config("c", "a"))
    tree.update("c", pool_config("c", "a", cpu=(1, 2, 1)))
    tree.delete("c")
    assert tree.version == v + 3


def test_from_pools_any_order_and_orphans() -> None:
    pools = [ResourcePool("b", pool_config("b", "a")), ResourcePool("a", pool_config("a"))]
    t = PoolTree.from_pools(pools)
    assert t.lookup("/a/b").pool_id == "b"
    assert [p.pool_id for p in t.pools()] == ["a", "b"]
    with pytest.raises(DataCorruption, match="orphan"):
        PoolTree.from_pools([ResourcePool("x", pool_config("orphan", "missing"))])


def test_duplicate_id(tree: PoolTree) -> None:
    with pytest.raises(AlreadyExists):
        tree.create("a", pool_config("other"))


@pytest.mark.parametrize(("pool_id", "config", "match"), [
    ("root", pool_config("r"), "root pool"),
    ("n", pool_config(""), "non-empty"),
    ("n", pool_config("x/y"), "without '/'"),
    ("n", pool_config("n", "missing"), "does not exist"),
    ("n", pool_config("n", "n"), "own parent"),
    ("n", pool_config("n", cpu=(-1, 10, 1)), "reservation must be >= 0"),
    ("n", pool_config("n", cpu=(1, 10, -1)), "share must be >= 0"),
    ("n", pool_config("n", cpu=(5, 3, 1)), "below its reservation"),
    ("n", pool_config("n", cpu=(float("nan"), 3, 1)), "finite"),
    ("n", pool_config("b", "a"), "already has a child named 'b'"),
    ("n", pool_config("n", "a", cpu=(0, 101, 1)), "exceeds parent /a limit 100"),
    ("n", pool_config("n", "a", cpu=(31, 40, 1)), "would sum to 51"),
    ("n", pool_config("n", controller_pct=150), "controller_limit"),
    ("n", pool_config("n", slack_pct=-1), "slack_limit"),
])
def test_validation_rules(tree: PoolTree, pool_id: str, config: ResourcePoolConfig,
                          match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        tree.create(pool_id, config)
    assert pool_id not in tree or pool_id == "root"


def test_duplicate_kind_rejected(tree: PoolTree) -> None:
    cfg = ResourcePoolConfig("n", "root", (ResourceConfig(ResourceKind.CPU, 1, 2),
                                           ResourceConfig(ResourceKind.CPU, 1, 2)))
    with pytest.raises(InvalidArgument, match="more than once") as err:
        tree.create("n", cfg)
    assert err.value.field == "resources.kind"


def test_unknown_kind_name() -> None:
    assert parse_kind("gpu") is ResourceKind.GPU
    with pytest.raises(InvalidArgument, match="unknown resource kind 'cpus'"):
        parse_kind("cpus")


def test_update_rules(tree: PoolTree) -> None:
    with pytest.raises(InvalidArgument, match="changing the parent"):
        tree.update("b", pool_config("b", "root"))
    with pytest.raises(InvalidArgument, match="below child /a/b limit 80"):
        tree.update("a", pool_config("a", cpu=(50, 60, 1), mem=(1000, 2000, 1)))
    with pytest.raises(InvalidArgument, match="below its children's total 20"):
        tree.update("a", pool_config("a", cpu=(10, 100, 1), mem=(1000, 2000, 1)))
    # An update may keep its own reservation in the sibling sum.
    tree.update("b", pool_config("b", "a", cpu=(50, 80, 1), mem=(500, 1000, 1)))
    assert tree.get("b").reservation[0] == to_units(50)


def test_top_level_pools_not_bound_by_capacity() -> None:
    t = PoolTree()
    t.set_capacity(Resources(cpu=10))
    t.create("big", pool_config("big", cpu=(1000, 5000, 1)))
    assert t.get("big").limit[0] == to_units(5000)


def test_delete_rules(tree: PoolTree) -> None:
    with pytest.raises(FailedPrecondition, match="child pool"):
        tree.delete("a")
    with pytest.raises(InvalidArgument):
        tree.delete("root")
    tracker = TaskTracker(tree)
    tracker.enqueue("b", [rm_task(1)])
    with pytest.raises(FailedPrecondition, match="still has work"):
        tree.delete("b")
    with pytest.raises(FailedPrecondition, match="holds tasks"):
        tree.create("c", pool_config("c", "b"))
    tracker.finish(next(tracker.records()).task_id)
    # Allocation alone (a running task, no demand) also keeps a pool alive.
    running = tracker.recover("b", rm_task(1, inst=7), TaskState.RUNNING)
    assert tree.get("b").demand_resources().is_zero()
    with pytest.raises(FailedPrecondition, match="still has work"):
        tree.delete("b")
    tracker.finish(running.task_id)
    tree.delete("b")
    tree.delete("a")
    assert len(tree) == 1


def test_children_whose_thirds_round_up_still_fit_their_parent() -> None:
    # Validation compares configs as written, with Peloton's epsilon: each child rounds
    # to 0.042 cpu in the tree's fixed-point amounts, yet the three fit 0.125 as in Peloton.
    t = PoolTree()
    t.create("p", pool_config("p", cpu=(0.125, 1, 1)))
    for name in ("a", "b", "c"):
        t.create(name, pool_config(name, "p", cpu=(0.0416667, 1, 1)))
    assert [t.get(n).reservation[0] for n in ("a", "b", "c")] == [42, 42, 42]
    with pytest.raises(InvalidArgument, match="would sum to"):
        t.create("d", pool_config("d", "p", cpu=(0.01, 1, 1)))
