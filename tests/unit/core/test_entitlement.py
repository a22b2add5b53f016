"""Hierarchical max-min entitlement and the slack split."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core.model.resources import ResourceKind, Resources, to_units
from peloton.core.model.respool import ResourcePoolConfig
from peloton.core.respool.entitlement import compute_entitlements
from peloton.core.respool.node import PoolNode
from peloton.core.respool.tree import PoolTree
from tests.unit.core.factories import pool_config, units


def _demand(node: PoolNode, cpu: float = 0, mem: float = 0, *, revocable: bool = False) -> None:
    node.add_demand(Resources(cpu, mem), revocable, 1)


def _alloc(node: PoolNode, cpu: float = 0, mem: float = 0, *, revocable: bool = False) -> None:
    node.add_allocation(Resources(cpu, mem), revocable=revocable, preemptible=True,
                        controller=False, sign=1)


def _docs_tree(demands: tuple[float, float, float]) -> tuple[PoolTree, list[float]]:
    tree = PoolTree()
    for i, d in enumerate(demands):
        node = tree.create(f"rp{i}", pool_config(f"rp{i}", cpu=(20, 100, 1)))
        _demand(node, d)
    table = compute_entitlements(tree, Resources(cpu=100))
    return tree, [table.get(f"rp{i}").total.cpu for i in range(3)]


def test_docs_example() -> None:
    assert _docs_tree((10, 80, 80))[1] == [10, 45, 45]
    # A third each: whole milli-cores, within one of 33.333..., summing to exactly 100.
    thirds = _docs_tree((50, 80, 80))[1]
    assert sorted(thirds) == [33.333, 33.333, 33.334]
    assert sum(to_units(x) for x in thirds) == to_units(100)


def test_spare_capacity_by_share_up_to_limit_and_redistributed() -> None:
    tree = PoolTree()
    tree.create("a", pool_config("a", cpu=(0, 10, 1)))
    tree.create("b", pool_config("b", cpu=(0, 100, 1)))
    table = compute_entitlements(tree, Resources(cpu=100))
    # No demand at all: spare goes by share, and what a's limit cuts goes to b.
    assert table.get("a").total.cpu == (10)
    assert table.get("b").total.cpu == (90)


def test_static_reservation_held_without_demand() -> None:
    tree = PoolTree()
    tree.create("s", pool_config("s", cpu=(30, 30, 1), static=True))
    e = tree.create("e", pool_config("e", cpu=(30, 100, 1)))
    _demand(e, 100)
    table = compute_entitlements(tree, Resources(cpu=100))
    assert table.get("s").total.cpu == (30)
    assert table.get("e").total.cpu == (70)


def test_reservations_scaled_when_cluster_is_small() -> None:
    tree = PoolTree()
    for name, res in (("a", 60.0), ("b", 20.0)):
        _demand(tree.create(name, pool_config(name, cpu=(res, 100, 1))), 100)
    table = compute_entitlements(tree, Resources(cpu=40))
    assert table.get("a").total.cpu == (30)
    assert table.get("b").total.cpu == (10)


def test_nested_pools() -> None:
    tree = PoolTree()
    tree.create("org", pool_config("org", cpu=(60, 100, 1)))
    tree.create("other", pool_config("other", cpu=(40, 100, 1)))
    x = tree.create("x", pool_config("x", "org", cpu=(30, 100, 1)))
    y = tree.create("y", pool_config("y", "org", cpu=(30, 100, 1)))
    _demand(x, 90)
    _demand(y, 5)
    table = compute_entitlements(tree, Resources(cpu=100))
    # org asks 95, other nothing: org gets 95 + 2.5 spare (limit 100), other 2.5.
    assert table.get("org").total.cpu == (97.5)
    assert table.get("other").total.cpu == (2.5)
    # Inside org: demands 90 and 5 are met, the spare 2.5 is split by share.
    assert table.get("x").total.cpu == (91.25)
    assert table.get("y").total.cpu == (6.25)


def test_apply_copies_to_nodes() -> None:
    tree, _ = _docs_tree((10, 80, 80))
    table = compute_entitlements(tree, Resources(cpu=100), Resources(cpu=7))
    table.apply(tree)
    assert tree.get("rp1").entitlement == units(45)
    assert tree.root.limit == units(100)
    assert set(table) == {"root", "rp0", "rp1", "rp2"} and len(table) == 4


def test_slack_split() -> None:
    tree = PoolTree()
    p = tree.create("p", pool_config("p", cpu=(10, 100, 1), mem=(1000, 2000, 1)))
    q = tree.create("q", pool_config("q", cpu=(10, 100, 1), mem=(1000, 2000, 1)))
    _demand(p, 5, 500)                      # regular work
    _demand(p, 4, 400, revocable=True)      # revocable: mem limited by slack limit 200
    _alloc(q, 2, 100, revocable=True)       # q keeps its revocable cpu allocation
    table = compute_entitlements(tree, Resources(cpu=100, mem_mb=4000), Resources(cpu=10))
    ep, eq = table.get("p"), table.get("q")
    assert ep.slack.mem_mb == (200)
    assert ep.non_slack.mem_mb == (ep.total.mem_mb - 200)
    assert ep.non_slack.cpu == (ep.total.cpu)
    # Slack cpu: q keeps 2, p's revocable demand 4 is met, the last 4 split by share.
    assert eq.slack.cpu == (2 + 2)
    assert ep.slack.cpu == (4 + 2)


def test_slack_cpu_scaled_when_slack_shrinks() -> None:
    tree = PoolTree()
    p = tree.create("p", pool_config("p", cpu=(10, 100, 1)))
    _alloc(p, 8, revocable=True)
    table = compute_entitlements(tree, Resources(cpu=100), Resources(cpu=4))
    assert table.get("p").slack.cpu == (4)


def test_slack_spare_with_a_denormal_share_is_not_inflated() -> None:
    # Found by hypothesis in CI: left * 5e-324 / 5e-324 rounds to 2 * left.
    tree = PoolTree()
    g = tree.create("g", pool_config("g", cpu=(0, 0, 5e-324)))
    tree.create("l", pool_config("l", "g", cpu=(0, 0, 0)))
    table = compute_entitlements(tree, Resources(cpu=1, mem_mb=100), 1.5)
    assert table.get("g").slack.cpu <= 1.5
    assert table.get("root").slack.cpu == 1.5
    assert g.pool_id == "g"


# -- properties over random two-level trees ---------------------------------------------------

child = st.tuples(st.integers(0, 10), st.floats(0, 1), st.floats(0, 4), st.booleans(),
                  st.floats(0, 150))


@st.composite
def trees(draw: st.DrawFn) -> tuple[PoolTree, float]:
    capacity = draw(st.floats(1, 500))
    tree = PoolTree()
    groups = draw(st.lists(st.lists(child, min_size=0, max_size=4), min_size=1, max_size=4))
    for gi, leaves in enumerate(groups):
        res_g = draw(st.floats(0, 200))
        lim_g = res_g + draw(st.floats(0, 200))
        share_g = draw(st.floats(0, 4))
        top = tree.create(f"g{gi}", pool_config(f"g{gi}", cpu=(res_g, lim_g, share_g),
                                                static=draw(st.booleans())))
        if not leaves:
            _demand(top, draw(st.floats(0, 300)))
            continue
        weight = sum(r for r, *_ in leaves) or 1
        for li, (r, lf, share, static, demand) in enumerate(leaves):
            res = res_g * r / weight * 0.999
            lim = res + (lim_g - res) * lf
            node = tree.create(f"g{gi}l{li}", pool_config(f"l{li}", f"g{gi}",
                                                          cpu=(res, lim, share), static=static))
            _demand(node, demand)
    return tree, capacity


@settings(max_examples=150, deadline=None)
@given(trees())
def test_entitlement_properties(case: tuple[PoolTree, float]) -> None:
    """Invariants of one cycle, exact in fixed-point units (no tolerance anywhere)."""
    tree, capacity = case
    table = compute_entitlements(tree, Resources(cpu=capacity))
    ent = {pid: table.get(pid).total.units[0] for pid in table}
    assert ent["root"] == to_units(capacity)
    for parent in tree.nodes():
        kids = parent.children
        if not kids:
            continue
        budget = ent[parent.pool_id]
        got = [ent[c.pool_id] for c in kids]
        assert sum(got) <= budget                                       # never above the parent
        req = [min(c.limit[0], c.demand[0]) for c in kids]
        base = [c.reservation[0] if c.static[0] else min(r, c.reservation[0])
                for c, r in zip(kids, req, strict=True)]
        for c, g in zip(kids, got, strict=True):
            assert 0 <= g <= c.limit[0]                                 # never above the limit
        if sum(base) <= budget:                                         # capacity allows
            for b, g in zip(base, got, strict=True):
                assert g >= b                                           # reservation honoured
        unmet = [i for i, (g, r) in enumerate(zip(got, req, strict=True)) if g < r]
        if unmet and sum(base) <= budget:
            assert sum(got) == budget                                   # work-conserving, exactly
            # Share-proportional up to the one unit rounding may move each part.
            shared = [i for i in unmet if kids[i].share[0] > 1e-3]
            if shared:
                low = max((got[i] - base[i] - 1) / kids[i].share[0] for i in shared)
                high = min((got[i] - base[i] + 1) / kids[i].share[0] for i in shared)
                assert low <= high * (1 + 1e-9) + 1e-9


def test_slack_capacity_as_a_number() -> None:
    tree = PoolTree()
    p = tree.create("p", pool_config("p", cpu=(10, 100, 1)))
    _demand(p, 3, revocable=True)
    assert compute_entitlements(tree, Resources(cpu=10), 5.0).get("p").slack.cpu == 5


@settings(max_examples=80, deadline=None)
@given(trees(), st.floats(0, 100), st.lists(st.floats(0, 20), min_size=1, max_size=20))
def test_slack_split_properties(case: tuple[PoolTree, float], slack: float,
                                revocable: list[float]) -> None:
    tree, capacity = case
    for leaf, cpu in zip(tree.leaves(), revocable, strict=False):
        _demand(leaf, cpu, cpu * 10, revocable=True)
    table = compute_entitlements(tree, Resources(cpu=capacity, mem_mb=capacity * 100), slack)
    for parent in tree.nodes():
        if not parent.children:
            continue
        p_slack = table.get(parent.pool_id).slack.units[0]
        kids = [table.get(c.pool_id) for c in parent.children]
        assert sum(k.slack.units[0] for k in kids) <= p_slack         # exact
        for c, k in zip(parent.children, kids, strict=True):
            assert k.non_slack + k.slack.replace(ResourceKind.CPU, 0) == k.total
            assert k.slack.units[1] <= c.slack_limit[1]
            assert k.non_slack.cpu == k.total.cpu


# -- the per-parent view of the children's configs, kept between cycles ----------------------

def _cycle(tree: PoolTree) -> dict[str, tuple[Resources, Resources, Resources]]:
    table = compute_entitlements(tree, Resources(cpu=100), Resources(cpu=10))
    return {pid: (e.total, e.non_slack, e.slack) for pid in table for e in [table.get(pid)]}


def _fresh(configs: dict[str, ResourcePoolConfig], demands: dict[str, float]) -> PoolTree:
    tree = PoolTree()
    for pool_id, config in configs.items():
        _demand(tree.create(pool_id, config), demands.get(pool_id, 0))
    return tree


def test_every_config_change_reaches_the_next_cycle() -> None:
    """A parent keeps its children's configs, transposed, from one cycle to the next; after
    any change (share, reservation and type, limit, a child added or removed) the next
    cycle must equal the cycle of a tree built afresh with the new configs."""
    configs = {name: pool_config(name, cpu=(10, 60, 1)) for name in ("a", "b", "c")}
    demands = {"a": 50.0, "b": 50.0, "c": 50.0}  # 150 asked of 100: shares decide
    tree = _fresh(configs, demands)
    before = _cycle(tree)
    changes: list[tuple[str, ResourcePoolConfig | None]] = [
        ("a", pool_config("a", cpu=(10, 60, 3))),
        ("b", pool_config("b", cpu=(40, 60, 1), static=True)),
        ("c", pool_config("c", cpu=(10, 12, 1))),
        ("d", pool_config("d", cpu=(5, 60, 2))),
        ("d", None),
    ]
    for pool_id, config in changes:
        if config is None:
            tree.get(pool_id).add_demand(Resources(cpu=demands.pop(pool_id)), False, -1)
            tree.delete(pool_id)
            del configs[pool_id]
        elif pool_id in configs:
            tree.update(pool_id, config)
            configs[pool_id] = config
        else:
            _demand(tree.create(pool_id, config), 30)
            configs[pool_id], demands[pool_id] = config, 30.0
        now = _cycle(tree)
        assert now != before, f"changing {pool_id} should change some entitlement"
        assert now == _cycle(_fresh(configs, demands)), f"stale after changing {pool_id}"
        before = now
