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
is on, else controller, else revocable) and the scan goes on; any other
failure stops that queue (head-of-line blocking keeps FIFO fair).  Each
admission costs O(gang size + tree depth): no scan over other tasks.
"""

from __future__ import annotations

from enum import StrEnum

from peloton.core.respool.node import PoolNode
from peloton.core.respool.queues import ADMISSION_ORDER, GangQueue, QueueKind
from peloton.core.respool.records import Gang
from peloton.core.states import TaskState


class Admitter(StrEnum):
    """The admission check that refused a gang (shown as a task's pending reason)."""

    ENTITLEMENT = "entitlement"
    CONTROLLER_LIMIT = "controller limit"
    RESERVATION = "reservation"


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


def refusal(node: PoolNode, gang: Gang, preemption_enabled: bool) -> Admitter | None:
    """The first admitter that refuses `gang` in `node`, or None if it may be admitted."""
    c, m, d, g = gang.need.units
    if gang.revocable:
        if not _fits(node.alloc_slack, None, c, m, d, g, node.slack_entitlement):
            return Admitter.ENTITLEMENT
        return None  # revocable gangs are never controller or non-preemptible gangs
    if not _fits(node.alloc_total, node.alloc_slack, c, m, d, g, node.non_slack_entitlement):
        return Admitter.ENTITLEMENT
    limit = node.controller_limit
    if gang.controller and limit is not None and not _fits(
            node.alloc_controller, None, c, m, d, g, limit):
        return Admitter.CONTROLLER_LIMIT
    if preemption_enabled and not gang.preemptible and not _fits(
            node.alloc_np, None, c, m, d, g, node.reservation):
        return Admitter.RESERVATION
    return None


def side_queue(gang: Gang, preemption_enabled: bool) -> QueueKind | None:
    """Where a pending gang that could not be admitted waits, or None to block pending."""
    if not gang.preemptible and preemption_enabled:
        return QueueKind.NON_PREEMPTIBLE
    if gang.controller:
        return QueueKind.CONTROLLER
    if gang.revocable:
        return QueueKind.REVOCABLE
    return None


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


def admit_gangs(node: PoolNode, limit: int, *, preemption_enabled: bool) -> list[Gang]:
    """Admit up to `limit` gangs from leaf `node`'s queues; return them in admission order.

    Admitted tasks move PENDING -> READY, join `node.active`, leave demand
    and enter allocation (in the node and every ancestor).
    """
    queues = node.queues
    admitted: list[Gang] = []
    if queues is None or limit <= 0:
        return admitted
    for kind in ADMISSION_ORDER:
        queue = queues[kind]
        while len(admitted) < limit:
            gang = _head(queue)
            if gang is None:
                break
            if refusal(node, gang, preemption_enabled) is None:
                queue.pop()
                _admit(node, gang)
                admitted.append(gang)
                continue
            target = side_queue(gang, preemption_enabled) if kind is QueueKind.PENDING else None
            if target is None:
                break  # head-of-line: this queue waits for capacity
            queues[target].push(queue.pop())
    return admitted


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
