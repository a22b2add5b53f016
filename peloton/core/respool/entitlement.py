"""Hierarchical max-min fair entitlement, plus the slack (revocable) split.

One cycle walks the pool tree from the cluster capacity down.  For each
parent and each resource kind, its entitlement E is shared among its
children in three phases (Peloton's `non_revocable.go`, made exact):

1. **Reservation.**  Each child's request is
   `req = min(limit, non-slack allocation + demand + min(slack limit, slack
   allocation + slack demand))`.  A STATIC child is assigned its whole
   reservation, an ELASTIC one `min(req, reservation)`.  If the cluster is
   smaller than the reservations, every assignment is scaled down by the
   same factor (Peloton would hand out more than it has).
2. **Demand.**  What is left is water-filled by share over each child's
   unmet request (`req - reservation`), exactly (no geometric rounds), so
   capacity a child cannot use is redistributed to its siblings.
3. **Spare.**  Anything still left goes to the children by share up to
   their limits, again water-filled so a child that hits its limit passes
   the rest on (Peloton drops it).

The slack split (Peloton's `revocable.go`) then divides each child's E into
a non-slack part for regular tasks and a slack part for revocable ones:
revocable tasks get their memory, disk and gpu from E, only what the
non-revocable request leaves and at most the slack limit, and their cpu
from the cluster's slack cpu, water-filled by cpu share over revocable cpu
demand after each child keeps its current revocable cpu allocation.  When
slack cpu shrinks below what is already allocated, those allocations are
scaled down too, so the preemptor can reclaim them.

Every amount is an integer in the fixed-point units of `Resources`, so an
entitlement table adds up exactly: per kind, the children's totals never
exceed their parent's, and what a phase hands out is exactly what it had
(up to the children's caps).  Rounding happens in one place, where a real
fraction appears: `water_fill` and `apportion` give whole units, at most
one unit away from the real fair share, by largest remainder.

The computation reads the tree and returns an `EntitlementTable`; nothing
is changed until the daemon calls `EntitlementTable.apply(tree)`.  The one
thing it keeps between cycles is each parent's per-kind view of its
children's configs (`PoolNode.entitlement_columns`), reused only while every
child still holds the same immutable `kind_config` tuple, so it cannot go
stale; it is a derived copy, not state a result depends on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import add, is_, sub

from peloton.core.model.resources import Resources
from peloton.core.respool.node import ChildColumns, PoolNode, frozen
from peloton.core.respool.tree import PoolTree
from peloton.core.respool.waterfill import MIN_WEIGHT, apportion, water_fill

_CPU = 0


#: One pool's (total, non-slack, slack) entitlement, each in canonical kind order and in
#: fixed-point units.
Row = tuple[Sequence[int], Sequence[int], Sequence[int]]


@dataclass(frozen=True, slots=True)
class PoolEntitlement:
    """What one pool may use: in total, for regular tasks, and for revocable tasks."""

    total: Resources
    non_slack: Resources
    slack: Resources


class EntitlementTable:
    """The result of one entitlement cycle, keyed by pool id (the root included)."""

    __slots__ = ("_rows", "capacity", "slack_capacity")

    def __init__(self, rows: dict[str, Row], capacity: Resources,
                 slack_capacity: Resources) -> None:
        self._rows = rows
        self.capacity = capacity
        self.slack_capacity = slack_capacity

    def get(self, pool_id: str) -> PoolEntitlement:
        """The entitlement of one pool (KeyError if the pool was not in the tree)."""
        total, non_slack, slack = self._rows[pool_id]
        return PoolEntitlement(frozen(total), frozen(non_slack), frozen(slack))

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def apply(self, tree: PoolTree) -> bool:
        """Copy the table onto the tree's nodes, where admission reads it; whether any
        pool's entitlement changed (admission only has new room to look at if one did).

        Pools created after the cycle keep a zero entitlement until the next one.
        """
        tree.set_capacity(self.capacity)
        changed = False
        for pool_id, (total, non_slack, slack) in self._rows.items():
            node = tree.by_id.get(pool_id)
            if node is not None:
                new = (list(total), list(non_slack), list(slack))
                if not changed and new != (node.entitlement, node.non_slack_entitlement,
                                           node.slack_entitlement):
                    changed = True
                node.entitlement, node.non_slack_entitlement, node.slack_entitlement = new
        return changed


def compute_entitlements(tree: PoolTree, capacity: Resources,
                         slack_capacity: Resources | float = 0.0) -> EntitlementTable:
    """Run one cycle over `tree` for a cluster of `capacity` (plus revocable `slack_capacity`).

    `slack_capacity` is the revocable cpu (a number, or a Resources of which
    only cpu counts: slack is cpu only, as in Peloton).  Cost is O(pools log
    fan-out) per kind; it reads each node's demand and allocation, which
    admission keeps current, and never looks at tasks.  The only thing it
    writes is each parent's `entitlement_columns` (see `_config_columns`).
    """
    if not isinstance(slack_capacity, Resources):
        slack_capacity = Resources(cpu=float(slack_capacity))
    rows: dict[str, Row] = {}
    root = tree.root
    total = capacity.units
    rows[root.pool_id] = (total, total, (slack_capacity.units[0], 0, 0, 0))
    stack = [root]
    while stack:
        parent = stack.pop()
        children = parent.children
        p_total, _, p_slack = rows[parent.pool_id]
        for child, row in zip(children, _split(parent, p_total, p_slack[0]), strict=True):
            rows[child.pool_id] = row
            if child.children:
                stack.append(child)
    return EntitlementTable(rows, capacity, slack_capacity)


def _config_columns(parent: PoolNode) -> list[ChildColumns]:
    """The children's configs of `parent` as one column tuple per kind.

    Configs change far less often than demand, so the transposition is kept on
    the parent and reused while every child still has the very kind_config
    tuple it was built from (a config change or a child added or removed
    gives a new tuple or a new list): identity, not equality, so that a
    share changed from 1 to 1.0 is not missed.
    """
    configs = tuple([c.kind_config for c in parent.children])
    cached = parent.entitlement_columns
    if (cached is not None and len(cached[0]) == len(configs)
            and all(map(is_, cached[0], configs))):
        return cached[1]
    columns: list[ChildColumns] = []
    for per_kind in zip(*configs, strict=True):
        reservations, limits, shares, statics, slack_limits = zip(*per_kind, strict=True)
        columns.append((reservations, limits, shares, statics, slack_limits,
                        all(w > MIN_WEIGHT for w in shares)))
    parent.entitlement_columns = (configs, columns)
    return columns


def _split(parent: PoolNode, total: Sequence[int], slack_cpu: int) -> list[Row]:
    """Phases 1-3 for every kind, then the slack split: a row per child of `parent`.

    This runs once per interior pool each cycle and is nearly the whole cost
    of a cycle, so phase 1 reads each child's vectors once per kind and keeps
    what the slack split needs (the non-slack request and the capped slack
    want), and water-filling is skipped where every claim fits, which
    `water_fill` would answer with the claims themselves (most (parent, kind)
    pairs of a real tree).  Every amount is an integer, so none of this can
    change a result; the float arithmetic all happens in `water_fill`, on the
    same inputs as before.
    """
    children = parent.children
    if not children:
        return []
    columns = _config_columns(parent)
    cols: list[list[int]] = []
    slack_parts: list[list[int]] = []
    for k, (reservations, limits, shares, statics, slack_limits, weighted) in enumerate(columns):
        base: list[int] = []
        fulls: list[int] = []  # what each child gets if every unmet request is met
        non_slack: list[int] = []
        slack_wants: list[int] = []
        for c, res, limit, static, slack_limit in zip(children, reservations, limits, statics,
                                                     slack_limits, strict=True):
            slack = c.alloc_slack[k]
            ns = c.alloc_total[k] - slack + c.demand[k]
            sw = slack + c.slack_demand[k]
            if sw > slack_limit:
                sw = slack_limit
            non_slack.append(ns)
            slack_wants.append(sw)
            # The request: min(limit, non-slack allocation + demand + min(slack limit,
            # slack allocation + slack demand)).
            req = ns + sw
            if req > limit:
                req = limit
            if req > res:
                base.append(res)
                fulls.append(req)
            else:
                got = res if static else req
                base.append(got)
                fulls.append(got)
        budget = total[k]
        assigned = sum(base)
        if assigned > budget:
            # Guarantees exceed the cluster: everyone loses the same fraction.
            base = apportion(budget, base)
        elif assigned < budget:
            base = _fill_demand_and_spare(budget - assigned, base, fulls,
                                          sum(fulls) - assigned, limits, shares, weighted)
        cols.append(base)
        if k:
            # Revocable memory, disk and gpu: what the non-slack request leaves of the
            # total, at most the capped slack want.
            slack_parts.append([(sw if sw < room else room) if (room := tot - ns) > 0 else 0
                                for tot, ns, sw in zip(base, non_slack, slack_wants,
                                                       strict=True)])
    slack_cpus = _split_slack_cpu(slack_cpu, children, columns[_CPU][2])
    mem, disk, gpu = slack_parts
    non_slack_totals = zip(cols[0], map(sub, cols[1], mem), map(sub, cols[2], disk),
                           map(sub, cols[3], gpu), strict=True)
    return list(zip(zip(*cols, strict=True), non_slack_totals,
                    zip(slack_cpus, mem, disk, gpu, strict=True), strict=True))


def _fill_demand_and_spare(left: int, base: list[int], fulls: list[int], wanted: int,
                           limits: Sequence[int], shares: Sequence[float],
                           weighted: bool) -> list[int]:
    """Phases 2 and 3 for one kind: water-fill `left` (> 0) over the unmet requests
    (`fulls` - `base`, `wanted` in all), then over the room below each child's limit;
    `base` is phase 1's assignment, `weighted` whether every share is above
    MIN_WEIGHT."""
    if wanted:
        if wanted <= left:
            # Every unmet request fits: water_fill would hand each one its want.
            base = fulls
            left -= wanted
        else:
            fill = water_fill(left, list(map(sub, fulls, base)), shares)
            base = list(map(add, base, fill))
            left -= sum(fill)
        if left <= 0:
            return base
    room = list(map(sub, limits, base))
    if min(room) >= 0 and sum(room) <= left:
        # Every child's room fits: water_fill would fill each positively weighted child
        # up to its limit and give the zero-weighted nothing.
        if weighted:
            return list(limits)
        return [lim if w > MIN_WEIGHT else b for b, lim, w in zip(base, limits, shares,
                                                                   strict=True)]
    spare = water_fill(left, room, shares, serve_zero_weights=False)
    return list(map(add, base, spare))


def _split_slack_cpu(slack_cpu: int, children: list[PoolNode],
                     shares: Sequence[float]) -> list[int]:
    """Each child's slack cpu: its current revocable cpu allocation (scaled down if the
    slack shrank below it), then the rest water-filled by cpu `shares` over revocable
    cpu demand, then any spare by share.

    `shares` is the cpu column of `_config_columns`: kind_config is packed from
    `PoolNode.share` whenever either changes, so it holds the same floats.
    """
    kept = [c.alloc_slack[_CPU] for c in children]
    held = sum(kept)
    left = 0
    if held > slack_cpu:
        kept = apportion(slack_cpu, kept)
    else:
        left = slack_cpu - held
    if left > 0:
        fill = water_fill(left, [c.slack_demand[_CPU] for c in children], shares)
        kept = list(map(add, kept, fill))
        left -= sum(fill)
        if left > 0:
            # Spare slack by share, through water_fill so that a denormal share counts as 0;
            # nobody can take more than what is left, so that is everyone's cap.
            spare = water_fill(left, [left] * len(kept), shares, serve_zero_weights=False)
            kept = list(map(add, kept, spare))
    return kept
