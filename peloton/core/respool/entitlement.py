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
is changed until the daemon calls `EntitlementTable.apply(tree)`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from peloton.core.model.resources import Resources
from peloton.core.respool.node import PoolNode, frozen
from peloton.core.respool.tree import PoolTree
from peloton.core.respool.waterfill import apportion, water_fill

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
    admission keeps current, and never looks at tasks.
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
        totals = _split_total(p_total, children)
        for child, row in zip(children, _split_slack(p_slack[0], children, totals),
                              strict=True):
            rows[child.pool_id] = row
            if child.children:
                stack.append(child)
    return EntitlementTable(rows, capacity, slack_capacity)


def _split_total(total: Sequence[int], children: list[PoolNode]) -> list[tuple[int, ...]]:
    """Phases 1-3 for every kind: each child's total entitlement.

    Phase 1 is one loop per kind over the children, reading each child's
    packed config tuple once: it runs for every pool and kind each cycle and
    dominates the cycle's cost.  A child's request is
    min(limit, non-slack allocation + demand + min(slack limit, slack
    allocation + slack demand)).
    """
    cols: list[list[int]] = []
    for k in range(4):
        base: list[int] = []
        wants: list[int] = []
        assigned = 0
        unmet = False
        for c in children:
            res, limit, _, static, slack_limit = c.kind_config[k]
            slack = c.alloc_slack[k]
            slack_want = slack + c.slack_demand[k]
            req = (c.alloc_total[k] - slack + c.demand[k]
                   + (slack_want if slack_want < slack_limit else slack_limit))
            if req > limit:
                req = limit
            if req > res:
                base.append(res)
                wants.append(req - res)
                assigned += res
                unmet = True
            else:
                got = res if static else req
                base.append(got)
                wants.append(0)
                assigned += got
        budget = total[k]
        if assigned > budget:
            # Guarantees exceed the cluster: everyone loses the same fraction.
            cols.append(apportion(budget, base))
            continue
        left = budget - assigned
        if left > 0:
            shares = [c.kind_config[k][2] for c in children]
            if unmet:
                fill = water_fill(left, wants, shares)
                base = [b + f for b, f in zip(base, fill, strict=True)]
                left -= sum(fill)
            if left > 0:
                room = [c.kind_config[k][1] - b for c, b in zip(children, base, strict=True)]
                spare = water_fill(left, room, shares, serve_zero_weights=False)
                base = [b + x for b, x in zip(base, spare, strict=True)]
        cols.append(base)
    return list(zip(*cols, strict=True))


def _split_slack(slack_cpu: int, children: list[PoolNode],
                 totals: list[tuple[int, ...]]) -> list[Row]:
    """Divide each child's total into non-slack and slack parts; share the slack cpu."""
    parts: list[tuple[int, int, int]] = []
    for c, tot in zip(children, totals, strict=True):
        sa, sd, sl, at, dm = c.alloc_slack, c.slack_demand, c.slack_limit, c.alloc_total, c.demand
        got = [0, 0, 0]
        for k in (1, 2, 3):
            want = sa[k] + sd[k]
            if want > sl[k]:
                want = sl[k]
            room = tot[k] - (at[k] - sa[k] + dm[k])
            if room > 0:
                got[k - 1] = want if want < room else room
        parts.append((got[0], got[1], got[2]))
    kept = [c.alloc_slack[_CPU] for c in children]
    held = sum(kept)
    left = 0
    if held > slack_cpu:
        kept = apportion(slack_cpu, kept)
    else:
        left = slack_cpu - held
    if left > 0:
        shares = [c.share[_CPU] for c in children]
        fill = water_fill(left, [c.slack_demand[_CPU] for c in children], shares)
        kept = [x + f for x, f in zip(kept, fill, strict=True)]
        left -= sum(fill)
        if left > 0:
            # Spare slack by share, through water_fill so that a denormal share counts as 0;
            # nobody can take more than what is left, so that is everyone's cap.
            spare = water_fill(left, [left] * len(children), shares,
                               serve_zero_weights=False)
            kept = [x + f for x, f in zip(kept, spare, strict=True)]
    return [(tot, (tot[0], tot[1] - m, tot[2] - d, tot[3] - g), (cpu, m, d, g))
            for tot, (m, d, g), cpu in zip(totals, parts, kept, strict=True)]
