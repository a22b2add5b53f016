"""Pool CRUD through the resource manager: validation, persistence, restart, delete rules."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from peloton.core.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.model.respool import ResourcePool
from peloton.resmgr.app import ResourceManager
from peloton.storage import Store, StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import (
    FakeClock,
    make_pool,
    make_rm,
    pool_config,
    singles,
    tasks,
)


def test_fresh_store_has_only_the_root(rm: ResourceManager) -> None:
    views = rm.pools.all()
    assert [(v.pool_id, v.path) for v in views] == [(ROOT_POOL_ID, "/")]
    assert rm.pool_id_for_path("/") == ROOT_POOL_ID


def test_create_lookup_and_tree_shape(rm: ResourceManager) -> None:
    org = make_pool(rm, "org", cpu=(8, 16))
    batch = make_pool(rm, "batch", org, cpu=(4, 16))
    assert rm.pool_id_for_path("/org/batch") == batch
    assert rm.pools.get(org).children == (batch,)
    assert [v.path for v in rm.pools.all()] == ["/", "/org", "/org/batch"]
    rm.validate_pool(batch)
    with pytest.raises(InvalidArgument) as exc:
        rm.validate_pool(org)
    assert exc.value.field == "respoolID" and "non leaf" in exc.value.message
    with pytest.raises(InvalidArgument):
        rm.validate_pool(ROOT_POOL_ID)
    with pytest.raises(NotFound):
        rm.validate_pool("nope")
    with pytest.raises(NotFound):
        rm.pool_id_for_path("/org/nope")


def test_pools_survive_a_restart_over_the_same_file(store: Store, db_path: Path,
                                                   hostmgr: FakeHostManager,
                                                   clock: FakeClock) -> None:
    rm = make_rm(store, hostmgr, clock)
    org = make_pool(rm, "org", cpu=(8, 16))
    batch = make_pool(rm, "batch", org, cpu=(4, 16))
    gone = make_pool(rm, "gone", org, cpu=(0, 8))
    rm.pools.update(batch, pool_config("batch", org, cpu=(6, 12)))
    rm.pools.delete("/org/gone")
    store.close()
    again = open_store(f"sqlite:///{db_path}", StoreOptions(bootstrap=True))
    try:
        rm2 = make_rm(again, hostmgr, clock)
        assert [v.path for v in rm2.pools.all()] == ["/", "/org", "/org/batch"]
        view = rm2.pools.get(batch)
        assert view.config.resource(view.config.resources[0].kind).limit == 12
        assert rm2.pool_id_for_path("/org/batch") == batch
        with pytest.raises(NotFound):
            rm2.pools.get(gone)
    finally:
        again.close()


@pytest.mark.parametrize(("name", "parent_cpu", "cpu", "field", "words"), [
    ("limit below reservation", None, (8, 4), "resources.limit", "below its reservation"),
    ("child limit above parent", (8, 8), (0, 9), "resources.limit", "exceeds parent"),
    ("children reserve too much", (8, 16), (9, 9), "resources.reservation", "would sum"),
])
def test_bad_configs_name_the_rule_and_change_nothing(rm: ResourceManager, store: Store,
                                                      name: str,
                                                      parent_cpu: tuple[float, float] | None,
                                                      cpu: tuple[float, float], field: str,
                                                      words: str) -> None:
    parent = make_pool(rm, "p", cpu=parent_cpu) if parent_cpu else ROOT_POOL_ID
    before = sorted(p.pool_id for p in store.get_resource_pools())
    with pytest.raises(InvalidArgument) as exc:
        make_pool(rm, "child", parent, cpu=cpu)
    assert exc.value.field == field, name
    assert words in exc.value.message
    assert sorted(p.pool_id for p in store.get_resource_pools()) == before
    assert len(rm.pools.all()) == (2 if parent_cpu else 1)


def test_sibling_names_unknown_parent_and_parent_change(rm: ResourceManager) -> None:
    a = make_pool(rm, "a", cpu=(0, 8))
    with pytest.raises(InvalidArgument) as exc:
        make_pool(rm, "a", cpu=(0, 8))
    assert exc.value.field == "name"
    with pytest.raises(InvalidArgument) as exc:
        make_pool(rm, "x", "no-such-parent")
    assert exc.value.field == "parent_id"
    b = make_pool(rm, "b", cpu=(0, 8))
    with pytest.raises(InvalidArgument) as exc:
        rm.pools.update(a, pool_config("a", b, cpu=(0, 8)))
    assert exc.value.field == "parent_id"
    with pytest.raises(NotFound):
        rm.pools.update("missing", pool_config("a"))


def test_delete_only_an_idle_leaf(rm: ResourceManager, store: Store) -> None:
    org = make_pool(rm, "org", cpu=(8, 16))
    leaf = make_pool(rm, "leaf", org, cpu=(0, 16))
    with pytest.raises(FailedPrecondition) as exc:
        rm.pools.delete("/org")
    assert exc.value.field == "children"
    assert not rm.enqueue_gangs(leaf, singles(tasks(1)))
    with pytest.raises(FailedPrecondition) as exc:
        rm.pools.delete("/org/leaf")
    assert exc.value.field == "usage" and "busy" in exc.value.message
    with pytest.raises(InvalidArgument):
        rm.pools.delete("/")
    with pytest.raises(NotFound):
        rm.pools.delete("/nope")
    assert {p.pool_id for p in store.get_resource_pools()} == {org, leaf}


def test_a_pool_with_tasks_gets_no_children(rm: ResourceManager) -> None:
    leaf = make_pool(rm, "leaf", cpu=(0, 16))
    assert not rm.enqueue_gangs(leaf, singles(tasks(1)))
    with pytest.raises(FailedPrecondition):
        make_pool(rm, "sub", leaf, cpu=(0, 1))


def test_entitlement_is_recomputed_at_once_on_a_pool_change(rm: ResourceManager) -> None:
    a = make_pool(rm, "a", cpu=(0, 10))
    assert rm.pools.get(a).entitlement.cpu == pytest.approx(10)
    rm.pools.update(a, pool_config("a", cpu=(0, 6)))
    assert rm.pools.get(a).entitlement.cpu == pytest.approx(6)
    b = make_pool(rm, "b", cpu=(0, 16))  # 16-cpu cluster: spare capacity is shared by share
    assert rm.pools.get(a).entitlement.cpu + rm.pools.get(b).entitlement.cpu == pytest.approx(16)


class FailingStore:
    """Delegates to a real store but fails the named writes."""

    def __init__(self, store: Store, failing: set[str]) -> None:
        self._store = store
        self.failing = failing

    def __getattr__(self, name: str) -> Any:
        if name in self.failing:
            def fail(*args: Any) -> None:
                raise Unavailable("database down")
            return fail
        return getattr(self._store, name)


def test_a_failed_write_leaves_the_tree_as_it_was(store: Store, hostmgr: FakeHostManager,
                                                 clock: FakeClock) -> None:
    failing = FailingStore(store, set())
    rm = make_rm(failing, hostmgr, clock)
    a = make_pool(rm, "a", cpu=(0, 8))
    failing.failing = {"create_resource_pool", "update_resource_pool", "delete_resource_pool"}
    with pytest.raises(Unavailable):
        make_pool(rm, "b", cpu=(0, 8))
    with pytest.raises(Unavailable):
        rm.pools.update(a, pool_config("a", cpu=(0, 4)))
    with pytest.raises(Unavailable):
        rm.pools.delete("/a")
    assert [v.path for v in rm.pools.all()] == ["/", "/a"]
    view = rm.pools.get(a)
    assert view.entitlement.cpu == pytest.approx(8)
    assert store.get_resource_pools() == [ResourcePool(a, dataclasses.replace(view.config))]


def test_calls_before_start_are_unavailable(store: Store, hostmgr: FakeHostManager) -> None:
    rm = ResourceManager(store, hostmgr)
    with pytest.raises(Unavailable):
        rm.validate_pool("x")
    with pytest.raises(Unavailable):
        rm.dequeue_gangs(10, 0)


def test_validate_pool_refuses_a_need_beyond_the_limits_on_its_path(rm: ResourceManager) -> None:
    from peloton.core.model.resources import Resources

    org = make_pool(rm, "org", cpu=(2, 4))
    leaf = make_pool(rm, "leaf", org, cpu=(1, 4))
    rm.validate_pool(leaf, Resources(cpu=4))
    with pytest.raises(InvalidArgument) as exc:
        rm.validate_pool(leaf, Resources(cpu=500))
    assert exc.value.field == "resources.cpu"
    assert "500 cpu" in exc.value.message and "/org/leaf" in exc.value.message
    assert "4 cpu, its limit" in exc.value.message


def test_pool_status_shows_entitlement_demand_queue_and_limits_above_capacity(
        store: Store, hostmgr: FakeHostManager, clock: FakeClock) -> None:
    from peloton.api.gen.pelotonpy.ext import capacity_pb2
    from peloton.resmgr.servicers import PoolStatusServicer

    rm = make_rm(store, hostmgr, clock)  # four 4-cpu hosts: 16 cpus
    pool = make_pool(rm, "big", cpu=(2, 100))
    # 14 cpu admitted; a 7-cpu task no 4-cpu host could hold stays queued (demand 7).
    rm.enqueue_gangs(pool, singles(tasks(4, 3.5) + tasks(1, 7.0)))
    rm.refresh_capacity()
    rm.loops.admit_once()
    status = PoolStatusServicer(lambda: rm.pools, lambda: (rm.capacity, rm.slack_cpu)) \
        .ListPoolStatus(capacity_pb2.ListPoolStatusRequest(), None)
    assert status.cluster_capacity.cpu == 16
    big = next(p for p in status.pools if p.path == "/big")
    assert big.leaf and big.limit.cpu == 100 and list(big.limit_above_capacity)[:1] == ["cpu"]
    assert big.allocation.cpu == 14 and big.demand.cpu == 7
    assert (big.queued_gangs, big.queued_tasks) == (1, 1)
    root = next(p for p in status.pools if p.path == "/")
    assert root.limit.cpu == 16 and not root.limit_above_capacity
