"""Admission control: which queued gangs of a leaf pool may start now.

Three admitters must all agree (Peloton's `admission.go`), each comparing
per kind in fixed-point units (exact; Peloton's epsilon is below one unit):

* **entitlement** — a regular gang fits if non-slack allocation + gang <=
  non-slack entitlement; a revocable gang if slack allocation + gang <=
  slack entitlement;
* **controller limit** — a controller gang fits if controller allocation +
  gang <= the pool's controller limit (when one is set);
* **reservation** — with preemption enabled, a non-preemptible regular gang
  fits only if non-preemptible allocation + gang <= reservation, so work
  that cannot be preempted never lives on borrowed (elastic) capacity.

`admit_gangs` visits the queues in `ADMISSION_ORDER`.  A pending gang that
fails is moved to the queue of its class (non-preemptible when preemption
is on, else controller, else revocable), as Peloton does.  Unlike Peloton,
any other refused gang does not stop its queue: admission **backfills**
past it, checking up to `BackfillPolicy.depth` refused gangs of distinct
shapes per queue and pass, so a gang that does not fit never holds back
smaller ones behind it (Peloton stopped at the first refusal: one 500-cpu
job blocked its pool).  A gang shaped like one refused already in the pass
is passed over without a check and does not count: the gangs of one job
share a shape, so a job of 1,001 tasks that can never fit once used up the
depth by itself and held back every later job of its pool.

Starvation protection is **aging into a reservation**: once a gang has
been refused for `BackfillPolicy.reserve_after` seconds, and it would fit
the pool if the pool held nothing, it *holds a reservation*: for the rest
of the pass (and every later pass until it is admitted) the gangs behind it
are admitted only if they fit next to it, as if it were admitted already.
Allocation then only shrinks towards room for it, so it runs as soon as
enough of the work in front of it ends.  A gang too big for the pool even
when empty never reserves (it would block the pool for nothing); it waits,
and says why.  One gang per queue holds the reservation at a time: the
first in service order that qualifies.  The resource manager's README
explains the choice.

A gang no host could ever hold (a task bigger than the largest host's capacity: a job
queued anyway, for hosts that may join later) is passed over like a refused gang and never
admitted, so it never holds allocation it cannot use: admitted, it failed placement, went
back to PENDING after each cycle of attempts and was admitted again at once, ahead of the
work behind it, which waited for ever.  `host_room` (the capacities of the UP hosts, none
known: every gang may be placeable) is the caller's.

Each admission costs O(gang size + tree depth); a pass also costs one
check per refused shape (at most `depth` per queue) and O(1) per refused
gang it passes over.  A pass stops walking a queue as soon as the rest of it
would only be passed over (`_rest_passed_over`, from the queue's count of gangs
by shape): a pool whose queue holds a big job's identical tasks, refused for
want of entitlement, costs a few checks per pass, not one step per queued task
(the walk once took a third of the CPU of 100,000 tasks queued on 10,000 hosts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import Resources
from peloton.core.respool.node import PoolNode
from peloton.core.respool.queues import ADMISSION_ORDER, GangQueue, QueueKind
from peloton.core.respool.records import Gang, Shape
from peloton.core.states import TaskState


class Admitter(StrEnum):
    """The admission check that refused a gang (shown as a task's pending reason)."""

    ENTITLEMENT = "entitlement"
    CONTROLLER_LIMIT = "controller limit"
    RESERVATION = "reservation"


@dataclass(frozen=True, slots=True)
class BackfillPolicy:
    """How far admission looks past refused gangs, and when a refused gang reserves room.

    `depth`: refused gangs of distinct shapes checked per queue and pass (gangs shaped like
    one refused already are passed over uncounted; 0 gives Peloton's strict head-of-line
    FIFO).  `reserve_after`: seconds a gang may be refused before it holds a
    reservation (0: at once, like Slurm's backfill; infinity: never, like Kubernetes'
    scheduling queue).
    """

    depth: int = 1000
    reserve_after: float = 30.0

    def __post_init__(self) -> None:
        if self.depth < 0:
            raise InvalidArgument("backfill depth must be >= 0", field="backfill_depth")
        if not self.reserve_after >= 0:
            raise InvalidArgument("reserve_after must be >= 0", field="backfill_reserve_after")


#: Strict FIFO: the first refused gang stops its queue (Peloton's behaviour).
STRICT_FIFO = BackfillPolicy(depth=0, reserve_after=float("inf"))


class _Books:
    """The allocation vectors admission compares, optionally with a reserved gang counted in."""

    __slots__ = ("controller", "np", "slack", "total")

    def __init__(self, node: PoolNode, held: Gang | None) -> None:
        self.total, self.slack = node.alloc_total, node.alloc_slack
        self.np, self.controller = node.alloc_np, node.alloc_controller
        if held is None:
            return
        add = list(held.need.units)

        def plus(v: list[int]) -> list[int]:
            return [a + b for a, b in zip(v, add, strict=True)]

        self.total = plus(self.total)
        if held.revocable:
            self.slack = plus(self.slack)
        if not held.preemptible:
            self.np = plus(self.np)
        if held.controller:
            self.controller = plus(self.controller)


_ZERO = [0, 0, 0, 0]


def _fits(alloc: list[int], extra: list[int] | None, need_cpu: int, need_mem: int,
          need_disk: int, need_gpu: int, bound: list[int]) -> bool:
    """alloc (- extra) + need <= bound in every kind (fixed-point units)."""
    if extra is None:
        return (alloc[0] + need_cpu <= bound[0]
                and alloc[1] + need_mem <= bound[1]
                and alloc[2] + need_disk <= bound[2]
                and alloc[3] + need_gpu <= bound[3])
    return (alloc[0] - extra[0] + need_cpu <= bound[0]
            and alloc[1] - extra[1] + need_mem <= bound[1]
            and alloc[2] - extra[2] + need_disk <= bound[2]
            and alloc[3] - extra[3] + need_gpu <= bound[3])


def refusal(node: PoolNode, gang: Gang, preemption_enabled: bool,
            held: Gang | None = None) -> Admitter | None:
    """The first admitter that refuses `gang` in `node`, or None if it may be admitted.

    With `held`, that gang's need counts as allocated already (it holds a reservation).
    """
    if held is None:
        return _refusal(node.alloc_total, node.alloc_slack, node.alloc_np,
                        node.alloc_controller, node, gang, preemption_enabled)
    books = _Books(node, held)
    return _refusal(books.total, books.slack, books.np, books.controller, node, gang,
                    preemption_enabled)


def fits_empty(node: PoolNode, gang: Gang, preemption_enabled: bool) -> bool:
    """Whether `gang` would be admitted if the pool held nothing (its bounds allow it at all)."""
    return _refusal(_ZERO, _ZERO, _ZERO, _ZERO, node, gang, preemption_enabled) is None


def _refusal(total: list[int], slack: list[int], np: list[int], controller: list[int],
             node: PoolNode, gang: Gang, preemption_enabled: bool) -> Admitter | None:
    return _shape_refusal(total, slack, np, controller, node,
                          (gang.need.units, gang.revocable, gang.preemptible, gang.controller),
                          preemption_enabled)


def _shape_refusal(total: list[int], slack: list[int], np: list[int], controller: list[int],
                   node: PoolNode, shape: Shape, preemption_enabled: bool) -> Admitter | None:
    (c, m, d, g), revocable, preemptible, is_controller = shape
    if revocable:
        if not _fits(slack, None, c, m, d, g, node.slack_entitlement):
            return Admitter.ENTITLEMENT
        return None  # revocable gangs are never controller or non-preemptible gangs
    if not _fits(total, slack, c, m, d, g, node.non_slack_entitlement):
        return Admitter.ENTITLEMENT
    limit = node.controller_limit
    if is_controller and limit is not None and not _fits(controller, None, c, m, d, g, limit):
        return Admitter.CONTROLLER_LIMIT
    if preemption_enabled and not preemptible and not _fits(
            np, None, c, m, d, g, node.reservation):
        return Admitter.RESERVATION
    return None


def fits_some_host(gang: Gang, host_room: Sequence[Resources]) -> bool:
    """Could every task of `gang` fit on some host of `host_room` (each a host's total
    capacity) if that host were empty?  True when no host is known (not judged)."""
    return not host_room or _placeable(gang, host_room, {})


def _placeable(gang: Gang, host_room: Sequence[Resources], memo: dict[Resources, bool]) -> bool:
    """`fits_some_host`, remembering each task size's answer for the pass."""
    for t in gang.tasks:
        need = t.task.resources
        fits = memo.get(need)
        if fits is None:
            fits = memo[need] = any(need.fits_in(room) for room in host_room)
        if not fits:
            return False
    return True


def side_queue(gang: Gang, preemption_enabled: bool) -> QueueKind | None:
    """Where a pending gang that could not be admitted waits, or None to stay pending."""
    return _side_queue(gang.revocable, gang.preemptible, gang.controller, preemption_enabled)


def _side_queue(revocable: bool, preemptible: bool, controller: bool,
                preemption_enabled: bool) -> QueueKind | None:
    if not preemptible and preemption_enabled:
        return QueueKind.NON_PREEMPTIBLE
    if controller:
        return QueueKind.CONTROLLER
    if revocable:
        return QueueKind.REVOCABLE
    return None


def _rest_passed_over(node: PoolNode, queue: GangQueue, kind: QueueKind, refused: set[Shape],
                      held: Gang | None, *, preemption_enabled: bool, now: float,
                      reserve_after: float, host_room: Sequence[Resources],
                      memo: dict[Resources, bool]) -> bool:
    """Would walking the rest of `queue` only pass each gang over?  If so, date the first
    refusal of those never refused (what the walk does to them) and return True.

    True when every gang left (the head included) is counted by the queue under a shape
    refused in this pass (queues.py: one PENDING task, need unchanged), so none is checked
    or admitted; none of those shapes moves to a side queue from here; each fits some
    host (so none is passed over as unplaceable, which could end the walk at the depth
    limit); the reserved gang is not among them; and, with no gang holding the
    reservation, none has been refused long enough to take it.  The walk would then
    change nothing but the dates, in any order.
    """
    runs = queue.runs
    if held is not None and held.queue is queue:
        return False
    counted = 0
    shapes = []
    for shape in refused:
        run = runs.get(shape)
        if run is None:
            continue
        _, revocable, preemptible, controller = shape
        if kind is QueueKind.PENDING and _side_queue(revocable, preemptible, controller,
                                                     preemption_enabled) is not None:
            return False
        counted += run.count
        shapes.append((shape, run))
    if counted != len(queue):
        return False
    for shape, run in shapes:
        if host_room:
            need = Resources.from_units(*shape[0])
            fits = memo.get(need)
            if fits is None:
                fits = memo[need] = any(need.fits_in(room) for room in host_room)
            if not fits:
                return False
        # Could one take the reservation?  The walk's own test, so rounding cannot tell
        # the two apart.
        if held is None and _shape_refusal(_ZERO, _ZERO, _ZERO, _ZERO, node, shape,
                                           preemption_enabled) is None \
                and now - run.earliest(now) >= reserve_after:
            return False
    for _, run in shapes:
        run.stamp(now)
    return True


def _head(queue: GangQueue) -> Gang | None:
    """The head gang after dropping tasks killed while queued (and gangs left empty)."""
    while True:
        gang = queue.peek()
        if gang is None:
            return None
        if all(t.state is TaskState.PENDING for t in gang.tasks):
            return gang
        live = gang.live()
        if live:
            gang.tasks = live
            return gang
        queue.pop()


def admit_gangs(node: PoolNode, limit: int, *, preemption_enabled: bool, now: float = 0.0,
                policy: BackfillPolicy = BackfillPolicy(),
                host_room: Sequence[Resources] = ()) -> list[Gang]:
    """Admit up to `limit` gangs from leaf `node`'s queues; return them in admission order.

    Admitted tasks move PENDING -> READY, join `node.active`, leave demand
    and enter allocation (in the node and every ancestor).  Refused gangs keep
    their place in their queue; `now` (seconds, any fixed origin) dates refusals
    for the aging rule.
    """
    queues = node.queues
    admitted: list[Gang] = []
    if queues is None or limit <= 0:
        return admitted
    room_memo: dict[Resources, bool] = {}  # a task's resources -> fits some host
    for kind in ADMISSION_ORDER:
        queue = queues[kind]
        held = queues.reserved.get(kind)
        if held is not None and (not held.live()
                                 or not fits_empty(node, held, preemption_enabled)):
            held = None  # every task of it was killed, or the pool shrank below it
        skipped: list[Gang] = []
        # Within a pass allocation only grows (and a reservation, once held, only adds to
        # it), so a gang shaped like one refused already is refused too: a pool full of
        # identical tasks costs one check per pass, not one per gang looked at.
        refused: set[Shape] = set()
        refused_with = held
        unplaceable: set[Shape] = set()
        depth_left = policy.depth
        # Whether anything but a pass-over happened since the last look at the rest of
        # the queue (`_rest_passed_over`): a run of pass-overs cannot change its answer.
        look = True
        while len(admitted) < limit:
            gang = queue.peek()
            if gang is None:
                break
            run = gang.run
            if run is None:
                # Not counted by shape, so it may hold killed tasks (a counted gang is one
                # PENDING task, queues.py): `_head` drops them, and empty gangs.
                gang = _head(queue)
                if gang is None:
                    break
                look = True
                shape = (gang.need.units, gang.revocable, gang.preemptible, gang.controller)
            else:
                shape = run.shape
            if held is not refused_with:
                refused.clear()
                refused_with = held
                look = True
            if refused and held is not gang and shape in refused:
                if look and _rest_passed_over(
                        node, queue, kind, refused, held, preemption_enabled=preemption_enabled,
                        now=now, reserve_after=policy.reserve_after, host_room=host_room,
                        memo=room_memo):
                    break
                look = False
            else:
                look = True
            if host_room and not _placeable(gang, host_room, room_memo):
                # Never admitted, never reserves: passed over, counted once per shape.
                if shape not in unplaceable:
                    unplaceable.add(shape)
                    if depth_left <= 0:
                        break
                    depth_left -= 1
                skipped.append(queue.pop())
                continue
            if (held is gang or shape not in refused) and refusal(
                    node, gang, preemption_enabled,
                    None if held is None or held is gang else held) is None:
                queue.pop()
                if held is gang:
                    held = None
                _admit(node, gang)
                admitted.append(gang)
                continue
            checked = held is gang or shape not in refused
            if held is not gang:
                refused.add(shape)
            target = side_queue(gang, preemption_enabled) if kind is QueueKind.PENDING else None
            if target is not None:
                queues[target].push(queue.pop())
                continue
            if gang.refused_since is None:
                gang.refused_since = now
            if (held is None and now - gang.refused_since >= policy.reserve_after
                    and fits_empty(node, gang, preemption_enabled)):
                held = gang
            if checked:
                if depth_left <= 0:
                    break
                depth_left -= 1
            skipped.append(queue.pop())
        for gang in reversed(skipped):
            queue.push_front(gang)
        if held is None:
            queues.reserved.pop(kind, None)
        else:
            queues.reserved[kind] = held
    return admitted


def reservation_due(node: PoolNode, preemption_enabled: bool,
                    policy: BackfillPolicy = BackfillPolicy()) -> float | None:
    """The earliest time a gang refused in leaf `node` comes to hold a reservation, or None
    if none can before something in the pool changes.

    Aging is the only way time alone changes what admission does: with nothing queued,
    freed or re-entitled since the last pass, a pass before this time admits and reserves
    nothing new, so a caller that steps admission itself may skip the passes before it (the
    simulator does).  Looks at the gangs a pass would (up to `policy.depth` + 1 distinct
    shapes per queue, in a queue where no gang holds the reservation) with the rule
    `admit_gangs` applies: refused long enough, and fitting the pool if it held nothing.
    """
    queues = node.queues
    if queues is None:
        return None
    due: float | None = None
    for kind in ADMISSION_ORDER:
        if kind in queues.reserved:
            continue
        shapes: set[tuple[object, ...]] = set()
        for gang in queues[kind]:
            shape = (gang.need.units, gang.revocable, gang.preemptible, gang.controller)
            if shape not in shapes:
                if len(shapes) > policy.depth:
                    break
                shapes.add(shape)
            if gang.refused_since is None:
                continue
            when = gang.refused_since + policy.reserve_after
            if (due is None or when < due) and fits_empty(node, gang, preemption_enabled):
                due = when
    return due


def _admit(node: PoolNode, gang: Gang) -> None:
    need = gang.need
    revocable = gang.revocable
    node.add_demand(need, revocable, -1)
    node.add_allocation(need, revocable=revocable, preemptible=gang.preemptible,
                        controller=gang.controller, sign=1)
    active = node.active
    ready = TaskState.READY
    for rec in gang.tasks:
        rec.state = ready
        rec.gang = None
        active.add(rec)
