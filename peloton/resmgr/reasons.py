"""Why a queued task is not running yet, in words a user can act on.

A PENDING task waits for admission: the text names the admitter that
refuses its gang (Peloton's three: entitlement, controller limit,
reservation) and the first resource kind that does not fit, with numbers
rounded for people (core/words.py), its place in the pool's queue, and the
backfill state (admission.py): whether the gang holds a reservation, or
waits because room is kept for an older gang.  E.g.

    waiting for admission in pool /batch (2nd of 5 queued): the pool is at its
    entitlement: needs 2 cpu, 9 of its 10 cpu in use

A gang the pool could not admit even if it held nothing says so, with the
pool's limit and the cluster's capacity.  An admitted task waits for
placement; once placement failed, the last placement report is appended
("0 of 900 hosts fit: 900 insufficient cpu").
"""

from __future__ import annotations

from collections.abc import Sequence

from peloton.core import words
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import KINDS, Resources, from_units
from peloton.core.respool.admission import Admitter, fits_empty, fits_some_host, refusal
from peloton.core.respool.node import PoolNode
from peloton.core.respool.queues import QueueKind
from peloton.core.respool.records import Gang, TaskRecord
from peloton.core.states import TaskState
from peloton.resmgr.taskbook import TaskBook

S = TaskState


def _over(used: list[int], need: list[int], bound: list[int], what: str) -> str:
    """'needs 2 cpu, 9 of its 10 cpu <what> in use' for the first kind over its bound.

    Vectors are fixed-point units, so the sums are exact; words.py rounds them for people.
    """
    for i, kind in enumerate(KINDS):
        if used[i] + need[i] > bound[i]:
            return (f"needs {words.amount(kind, from_units(need[i]))}, "
                    f"{words.value(kind, from_units(used[i]))} of its "
                    f"{words.amount(kind, from_units(bound[i]))} {what} in use")
    return "no kind over its bound"


def _ceiling(node: PoolNode, need: list[int], bound: list[int]) -> str:
    """Why a gang could not be admitted even by an empty pool: its bound, limit, the cluster."""
    root = node.ancestors_and_self()[-1]
    limit = node.effective_limit()
    for i, kind in enumerate(KINDS):
        if need[i] > bound[i]:
            return (f"needs {words.amount(kind, from_units(need[i]))}, more than the pool may "
                    f"use now ({words.amount(kind, from_units(bound[i]))}; its limit is "
                    f"{words.amount(kind, limit.get(kind))}, the cluster has "
                    f"{words.amount(kind, from_units(root.limit[i]))}); it waits until the pool "
                    "may use "
                    "more")
    return "does not fit the pool even when it is empty"


def _refused(node: PoolNode, gang: Gang, why: Admitter, preemption_enabled: bool) -> str:
    need = list(gang.need.units)
    empty = fits_empty(node, gang, preemption_enabled)
    if why is Admitter.ENTITLEMENT:
        if gang.revocable:
            if not empty:
                return "slack entitlement: " + _ceiling(node, need, node.slack_entitlement)
            return ("the pool is at its slack entitlement: "
                    + _over(node.alloc_slack, need, node.slack_entitlement, "slack"))
        used = [t - s for t, s in zip(node.alloc_total, node.alloc_slack, strict=True)]
        if not empty:
            return _ceiling(node, need, node.non_slack_entitlement)
        return "the pool is at its entitlement: " + _over(used, need, node.non_slack_entitlement,
                                                          "entitled")
    if why is Admitter.CONTROLLER_LIMIT:
        assert node.controller_limit is not None
        return ("the pool is at its controller limit: "
                + _over(node.alloc_controller, need, node.controller_limit, "allowed"))
    return ("non-preemptible tasks run only within the pool's reservation: "
            + _over(node.alloc_np, need, node.reservation, "reserved"))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


class _Positions:
    """Queue positions of gangs, computed once per pool and call."""

    def __init__(self) -> None:
        self._by_pool: dict[str, tuple[dict[int, int], int]] = {}

    def of(self, node: PoolNode, gang: Gang) -> str:
        known = self._by_pool.get(node.pool_id)
        if known is None:
            order: dict[int, int] = {}
            total = 0
            if node.queues is not None:
                for _, queued in node.queues.gangs():
                    total += 1
                    order[id(queued)] = total
            known = self._by_pool[node.pool_id] = (order, total)
        order, total = known
        place = order.get(id(gang))
        return f"{_ordinal(place)} of {total:,} queued" if place else f"{total:,} queued"


def _held(node: PoolNode) -> dict[QueueKind, Gang]:
    return dict(node.queues.reserved) if node.queues is not None else {}


def admission_reason(node: PoolNode, gang: Gang, preemption_enabled: bool,
                     positions: _Positions | None = None,
                     host_room: Sequence[Resources] = ()) -> str:
    """Why `gang` is still queued in leaf `node` (`host_room`: the UP hosts' capacities)."""
    where = (positions or _Positions()).of(node, gang)
    head = f"waiting for admission in pool {node.path} ({where})"
    why = refusal(node, gang, preemption_enabled)
    # Within what the pool could ever give but bigger than every host: that is why it waits
    # (refused now or not); beyond the pool, the pool's limit is the first reason.
    if not fits_some_host(gang, host_room) and fits_empty(node, gang, preemption_enabled):
        return (f"{head}: no UP host could ever hold it, so it is not admitted (it would hold "
                "its pool's room without running) until a host that can joins")
    held = _held(node)
    holds = any(g is gang for g in held.values())
    if why is not None:
        text = f"{head}: {_refused(node, gang, why, preemption_enabled)}"
        if holds:
            text += ("; it has waited longest and holds a reservation: work behind it starts "
                     "only if it fits beside it")
        return text
    for other in held.values():
        if other is not gang and refusal(node, gang, preemption_enabled, other) is not None:
            first = other.tasks[0].task_id if other.tasks else "?"
            return (f"{head}: it fits, but room is kept for an older gang that has waited "
                    f"longer ({words.plural(len(other.tasks), 'task')}, {first}, needs "
                    f"{words.resources(other.need)})")
    return f"{head}: it fits; it is admitted at the next pass"


def _reason(book: TaskBook, rec: TaskRecord, positions: _Positions) -> str | None:
    state = rec.state
    if state is S.PENDING:
        if rec.gang is None:
            return f"waiting for admission in pool {rec.pool.path}"
        return admission_reason(rec.pool, rec.gang, book.config.preemption_enabled, positions,
                                book.tracker.host_room)
    if state is S.READY:
        return "admitted, waiting for placement"
    if state is S.PLACING:
        return "being placed"
    if state in (S.PLACED, S.LAUNCHING):
        return f"placed on {book.hosts.get(rec.task_id, '?')}, waiting for launch"
    if state is S.LAUNCHED:
        return f"launched on {book.hosts.get(rec.task_id, '?')}, waiting for it to start"
    return None


def pending_reasons(book: TaskBook, task_ids: Sequence[TaskId]) -> dict[TaskId, str]:
    """Reasons for the tracked tasks among `task_ids` that have not started; others are left out."""
    out: dict[TaskId, str] = {}
    positions = _Positions()
    for task_id in task_ids:
        rec = book.tracker.get(task_id)
        if rec is None:
            continue
        text = _reason(book, rec, positions)
        if text is None:
            continue
        last = book.reasons.get(task_id)
        if last and rec.state in (S.PENDING, S.READY):
            text += f"; last placement attempt: {last}"
        out[task_id] = text
    return out
