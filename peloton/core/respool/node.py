"""One node of the resource pool tree, with its derived limits and live accounting.

Vectors inside a node are plain `list[int]` of length 4 in the canonical
kind order (cpu, memory, disk, gpu), in the fixed-point units of
`Resources` (thousandths of a core, MB or gpu), not `Resources` values:
admission and entitlement touch them on every task transition and every
cycle, and building a value per touch would dominate both.  Integers make
every sum exact: a pool whose tasks all ended holds exactly zero.  Public
readers get `Resources` snapshots through the `*_resources` methods.

Invariants (kept by `add_demand` / `add_allocation`, which walk to the root):
  * an interior node's demand, slack demand and allocations equal the sum
    over its children, so the root holds cluster totals;
  * only leaves hold queues (`queues` is None on interior nodes until they
    become leaves again) and active tasks (`active`: the records holding
    allocation here, which the preemptor ranks);
  * every value is >= 0, exactly (subtractions mirror additions in integers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from peloton.core.model.resources import KINDS, Resources, to_units
from peloton.core.model.respool import ReservationType, ResourcePoolConfig

if TYPE_CHECKING:
    from peloton.core.respool.queues import LeafQueues
    from peloton.core.respool.records import TaskRecord

#: Default percent of the reservation revocable work may use (Peloton's _defaultSlackLimit).
DEFAULT_SLACK_LIMIT_PERCENT = 20.0

#: The root's reservation and limit before the first capacity is known: larger than any
#: cluster (10^15 cores), an integer so that unit arithmetic stays exact.
UNBOUNDED = 10 ** 18

Vec = list[int]

#: Per kind, (reservation, limit, share, static, slack limit) in canonical kind order.
KindConfig = tuple[tuple[int, int, float, bool, int], ...]

#: One kind across a parent's children, in child order: reservations, limits, shares,
#: statics, slack limits, and whether every share counts as a weight in water-filling.
ChildColumns = tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...], tuple[bool, ...],
                     tuple[int, ...], bool]


def vec(res: Resources) -> Vec:
    """A fresh mutable vector (fixed-point units) from a Resources value."""
    return list(res.units)


def frozen(v: Sequence[int]) -> Resources:
    """A Resources snapshot of a vector of fixed-point units."""
    return Resources.from_units(v[0], v[1], v[2], v[3])


def percent_of(units: int, percent: float) -> int:
    """`percent` of an amount in units, to the nearest whole unit."""
    return round(units * percent / 100.0)


class PoolNode:
    """A resource pool: config-derived limits, children, accounting and (leaf) queues.

    `reservation`, `limit`, `share`, `static`, `slack_limit` and
    `controller_limit` are derived from the config whenever it is set.  The
    root has no config of its own: its reservation and limit are the cluster
    capacity, set by `set_capacity` each entitlement cycle, and unbounded
    before the first cycle.
    """

    __slots__ = (
        "active",
        "alloc_controller",
        "alloc_np",
        "alloc_slack",
        "alloc_total",
        "children",
        "config",
        "controller_limit",
        "demand",
        "entitlement",
        "entitlement_columns",
        "kind_config",
        "limit",
        "non_slack_entitlement",
        "parent",
        "path",
        "pool_id",
        "queues",
        "reservation",
        "share",
        "slack_demand",
        "slack_entitlement",
        "slack_limit",
        "static",
    )

    def __init__(self, pool_id: str, config: ResourcePoolConfig,
                 parent: PoolNode | None) -> None:
        self.pool_id = pool_id
        self.parent = parent
        self.children: list[PoolNode] = []
        self.path = "/"
        self.config = config
        self.reservation: Vec = [0] * 4
        self.limit: Vec = [0] * 4
        #: Shares are weights, not amounts: they stay floats.
        self.share: list[float] = [1.0] * 4
        self.static: list[bool] = [False] * 4
        self.slack_limit: Vec = [0] * 4
        self.controller_limit: Vec | None = None
        self.demand: Vec = [0] * 4
        self.slack_demand: Vec = [0] * 4
        self.alloc_total: Vec = [0] * 4
        self.alloc_slack: Vec = [0] * 4
        self.alloc_np: Vec = [0] * 4
        self.alloc_controller: Vec = [0] * 4
        self.entitlement: Vec = [0] * 4
        self.non_slack_entitlement: Vec = [0] * 4
        self.slack_entitlement: Vec = [0] * 4
        self.queues: LeafQueues | None = None
        #: Leaf only: the tasks holding allocation here (admitted, not finished).
        self.active: set[TaskRecord] = set()
        #: Per kind (reservation, limit, share, static, slack limit): one lookup for the
        #: entitlement loop, which reads them for every pool and kind each cycle.  A new
        #: tuple whenever the config changes, never changed in place: entitlement keys its
        #: per-parent cache (`entitlement_columns`) on the identity of these tuples.
        self.kind_config: KindConfig = ()
        #: Owned by entitlement (`entitlement._config_columns`): the children's kind
        #: configs transposed per kind, with the kind_config tuples they came from.
        self.entitlement_columns: tuple[tuple[KindConfig, ...], list[ChildColumns]] | None = None
        if parent is None:
            self.reservation = [UNBOUNDED] * 4
            self.limit = [UNBOUNDED] * 4
            self._pack_kind_config()
        else:
            self.apply_config(config)

    # -- configuration ------------------------------------------------------
    def apply_config(self, config: ResourcePoolConfig) -> None:
        """Set the config and recompute every derived limit (config is already validated)."""
        self.config = config
        for i, kind in enumerate(KINDS):
            rc = config.resource(kind)
            self.reservation[i] = to_units(rc.reservation)
            self.limit[i] = to_units(rc.limit)
            self.share[i] = rc.share
            self.static[i] = rc.type is ReservationType.STATIC
        pct = (DEFAULT_SLACK_LIMIT_PERCENT if config.slack_limit_percent is None
               else config.slack_limit_percent)
        # Only memory, disk and gpu are limited for revocable work: its cpu comes
        # from slack capacity, so Peloton pins the cpu slack limit at zero.
        self.slack_limit = [0] + [percent_of(r, pct) for r in self.reservation[1:]]
        cpct = config.controller_limit_percent
        self.controller_limit = (None if cpct is None
                                 else [percent_of(r, cpct) for r in self.reservation])
        self.path = self.compute_path()
        self._pack_kind_config()

    def _pack_kind_config(self) -> None:
        self.kind_config = tuple(zip(self.reservation, self.limit, self.share, self.static,
                                     self.slack_limit, strict=True))

    def set_capacity(self, capacity: Resources) -> None:
        """Root only: the cluster capacity is the root's reservation and limit."""
        self.reservation = vec(capacity)
        self.limit = vec(capacity)
        self._pack_kind_config()

    def compute_path(self) -> str:
        """The path implied by the parent's path and this node's name."""
        if self.parent is None:
            return "/"
        base = self.parent.path
        return (base if base.endswith("/") else base + "/") + self.config.name

    # -- shape --------------------------------------------------------------
    @property
    def name(self) -> str:
        """The pool's own name (the last path element); "root" for the root."""
        return self.config.name

    @property
    def is_root(self) -> bool:
        """The root pool (path "/")."""
        return self.parent is None

    @property
    def is_leaf(self) -> bool:
        """Leaves are the only pools that accept tasks."""
        return not self.children

    def ancestors_and_self(self) -> list[PoolNode]:
        """This node and every ancestor up to the root."""
        out: list[PoolNode] = []
        node: PoolNode | None = self
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def effective_limit(self) -> Resources:
        """The most this pool may ever use: the smallest limit on its path below the root.

        (The root's limit is the cluster's capacity, which placement judges per host.)
        """
        out: list[int] | None = None
        node: PoolNode | None = self
        while node is not None and node.parent is not None:
            out = list(node.limit) if out is None else [
                min(a, b) for a, b in zip(out, node.limit, strict=True)]
            node = node.parent
        return frozen(out if out is not None else self.limit)

    # -- accounting (O(depth) per call) --------------------------------------
    def add_demand(self, need: Resources, revocable: bool, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) queued work here and in every ancestor."""
        c, m, d, g = need.units
        if sign < 0:
            c, m, d, g = -c, -m, -d, -g
        node: PoolNode | None = self
        while node is not None:
            v = node.slack_demand if revocable else node.demand
            v[0] += c
            v[1] += m
            v[2] += d
            v[3] += g
            node = node.parent

    def add_allocation(self, need: Resources, *, revocable: bool, preemptible: bool,
                       controller: bool, sign: int) -> None:
        """Add or remove admitted work in every allocation category it belongs to.

        A task counts in total; in slack if revocable; in non-preemptible if not
        preemptible; in controller if it is a controller task (Peloton's split).
        """
        c, m, d, g = need.units
        if sign < 0:
            c, m, d, g = -c, -m, -d, -g
        node: PoolNode | None = self
        while node is not None:
            v = node.alloc_total
            v[0] += c
            v[1] += m
            v[2] += d
            v[3] += g
            if revocable:
                v = node.alloc_slack
                v[0] += c
                v[1] += m
                v[2] += d
                v[3] += g
            if not preemptible:
                v = node.alloc_np
                v[0] += c
                v[1] += m
                v[2] += d
                v[3] += g
            if controller:
                v = node.alloc_controller
                v[0] += c
                v[1] += m
                v[2] += d
                v[3] += g
            node = node.parent

    # -- snapshots ------------------------------------------------------------
    def demand_resources(self) -> Resources:
        """Queued non-revocable work (this subtree)."""
        return frozen(self.demand)

    def slack_demand_resources(self) -> Resources:
        """Queued revocable work (this subtree)."""
        return frozen(self.slack_demand)

    def allocation_resources(self) -> Resources:
        """Everything admitted and not yet finished (this subtree)."""
        return frozen(self.alloc_total)

    def slack_allocation_resources(self) -> Resources:
        """Admitted revocable work."""
        return frozen(self.alloc_slack)

    def non_slack_allocation_resources(self) -> Resources:
        """Admitted non-revocable work."""
        return frozen([t - s for t, s in zip(self.alloc_total, self.alloc_slack, strict=True)])

    def entitlement_resources(self) -> Resources:
        """Total entitlement from the last cycle."""
        return frozen(self.entitlement)

    def has_work(self) -> bool:
        """Some demand or allocation remains (a pool in this state may not be deleted)."""
        return any(x for v in (self.demand, self.slack_demand, self.alloc_total) for x in v)

    def __repr__(self) -> str:
        return f"PoolNode({self.path!r}, id={self.pool_id!r})"
