"""Why a queued task is not running yet, in words a user can act on.

A PENDING task waits for admission: the text names the admitter that
refuses its gang (Peloton's three: entitlement, controller limit,
reservation) and the first resource kind that does not fit, with the
numbers, e.g.

    pool /batch is at its entitlement: cpu 2 needed, 9 of 10 entitled in use

An admitted task waits for placement; once placement failed, the last
placement report is appended ("0 of 900 hosts fit: 900 insufficient cpu").
"""

from __future__ import annotations

from collections.abc import Sequence

from peloton.core.model.ids import TaskId
from peloton.core.model.resources import KINDS, from_units
from peloton.core.respool.admission import Admitter, refusal
from peloton.core.respool.node import PoolNode
from peloton.core.respool.records import Gang, TaskRecord
from peloton.core.states import TaskState
from peloton.resmgr.taskbook import TaskBook

S = TaskState


def _over(used: list[int], need: list[int], bound: list[int]) -> str:
    """'cpu 2 needed, 9 of 10 <unit>' for the first kind where used + need > bound.

    Vectors are fixed-point units, so the numbers printed are exact sums,
    shown in the user's units with at most three decimals (0.3, not
    0.30000000000000004).
    """
    for i, kind in enumerate(KINDS):
        if used[i] + need[i] > bound[i]:
            return (f"{kind.value} {from_units(need[i]):g} needed, {from_units(used[i]):g} of "
                    f"{from_units(bound[i]):g}")
    return "no kind over its bound"


def admission_reason(node: PoolNode, gang: Gang, preemption_enabled: bool) -> str:
    """Why `gang` is still queued in leaf `node`."""
    need = list(gang.need.units)
    why = refusal(node, gang, preemption_enabled)
    if why is None:
        return f"queued in pool {node.path}, waiting for admission behind earlier work"
    if why is Admitter.ENTITLEMENT:
        if gang.revocable:
            detail = _over(node.alloc_slack, need, node.slack_entitlement)
            return f"pool {node.path} is at its slack entitlement: {detail} entitled in use"
        used = [t - s for t, s in zip(node.alloc_total, node.alloc_slack, strict=True)]
        detail = _over(used, need, node.non_slack_entitlement)
        return f"pool {node.path} is at its entitlement: {detail} entitled in use"
    if why is Admitter.CONTROLLER_LIMIT:
        assert node.controller_limit is not None
        detail = _over(node.alloc_controller, need, node.controller_limit)
        return f"pool {node.path} is at its controller limit: {detail} allowed in use"
    detail = _over(node.alloc_np, need, node.reservation)
    return (f"pool {node.path}: non-preemptible tasks run only within the reservation: "
            f"{detail} reserved in use")


def _reason(book: TaskBook, rec: TaskRecord) -> str | None:
    state = rec.state
    if state is S.PENDING:
        if rec.gang is None:
            return f"queued in pool {rec.pool.path}"
        return admission_reason(rec.pool, rec.gang, book.config.preemption_enabled)
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
    for task_id in task_ids:
        rec = book.tracker.get(task_id)
        if rec is None:
            continue
        text = _reason(book, rec)
        if text is None:
            continue
        last = book.reasons.get(task_id)
        if last and rec.state in (S.PENDING, S.READY):
            text += f"; last placement attempt: {last}"
        out[task_id] = text
    return out
