"""What binds a queued task now: one table of rules, first match wins.

The facts come from the snapshot alone (`Facts.of`): the task's pool, what its
gang needs, its place in the pool's queue, and which hosts could take it (free
resources after the tasks running there, maintenance, its HOST constraint).  The
rules are tried in the order of `RULES`, the order in which the scheduler itself
would refuse the task: placement first for a task already admitted, then the
pool's limit (nothing but a config change helps), the gang, preemption owed to
the pool, the reservation, the entitlement share, and finally the hosts.  A test
walks the whole table (tests/unit/core/test_forecast_binding.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from peloton.core import words
from peloton.core.forecast.model import Binding, BindingKind, LiveHost, QueuedTask, Snapshot
from peloton.core.model.constraints import LabelKind, Verdict, evaluate
from peloton.core.model.resources import KINDS, ResourceKind, Resources

K = BindingKind


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything the rules read about one queued task."""

    task: QueuedTask
    need: Resources
    allocation: Resources
    entitlement: Resources
    reservation: Resources
    limit: Resources
    share: float
    position: int
    queue_length: int
    #: Free resources over the hosts that take work, and the most any one of them has.
    cluster_free: Resources
    hosts_fit: int
    hosts_total: int
    rejections: tuple[tuple[str, int], ...]
    #: Some other pool uses more than its reservation (preemption could give some back).
    others_over_reservation: bool
    preemption: bool

    @staticmethod
    def of(snapshot: Snapshot, task: QueuedTask) -> Facts:
        """The facts for `task` (one of `snapshot.queued`)."""
        pool = snapshot.pool(task.pool)
        config = pool.config
        reservation = Resources.of({rc.kind: rc.reservation for rc in config.resources})
        # An unconfigured kind has limit 0, as the resource manager reads it.
        limit = Resources.of({k: config.resource(k).limit for k in KINDS})
        waiting = [q for q in snapshot.queued if q.pool == task.pool and not q.admitted]
        position = next((i + 1 for i, q in enumerate(waiting)
                         if (q.job_id, q.instance) == (task.job_id, task.instance)), 0)
        used: dict[str, Resources] = {}
        for run in snapshot.running:
            used[run.hostname] = used.get(run.hostname, Resources()) + run.resources
        fit, total, reasons, free = _hosts(snapshot.hosts, used, task)
        over = any(_over_reservation(snapshot, p.path) for p in snapshot.pools
                   if p.path != task.pool and not task.pool.startswith(p.path + "/"))
        return Facts(task=task, need=task.resources.scale(max(task.gang, 1)),
                     allocation=pool.allocation, entitlement=pool.entitlement,
                     reservation=reservation, limit=limit,
                     share=config.resource(ResourceKind.CPU).share, position=position,
                     queue_length=len(waiting), cluster_free=free, hosts_fit=fit,
                     hosts_total=total, rejections=reasons, others_over_reservation=over,
                     preemption=snapshot.preemption)


def _over_reservation(snapshot: Snapshot, path: str) -> bool:
    pool = snapshot.pool(path)
    reservation = Resources.of({rc.kind: rc.reservation for rc in pool.config.resources})
    return pool.allocation.exceeds(reservation)


def _hosts(hosts: tuple[LiveHost, ...], used: dict[str, Resources],
           task: QueuedTask) -> tuple[int, int, tuple[tuple[str, int], ...], Resources]:
    """(hosts that fit, hosts considered, rejections with counts, free over usable hosts)."""
    counts: dict[str, int] = {}
    fit = 0
    free_total = Resources()
    for host in hosts:
        free = host.capacity.minus_clamped(used.get(host.hostname, Resources()))
        reason = _rejection(host, free, task)
        if not host.maintenance:
            free_total = free_total + free
        if reason is None:
            fit += 1
        else:
            counts[reason] = counts.get(reason, 0) + 1
    ordered = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return fit, len(hosts), ordered, free_total


def _rejection(host: LiveHost, free: Resources, task: QueuedTask) -> str | None:
    """Why `host` cannot take `task` now (cheap checks first), or None if it can."""
    if host.maintenance:
        return "in maintenance"
    if task.constraint is not None:
        labels = host.labels
        verdict = evaluate(task.constraint, LabelKind.HOST,
                           lambda lb: sum(1 for h in labels if h == lb))
        if verdict is Verdict.MISMATCH:
            return words.unmet(task.constraint)
    for kind in KINDS:
        if task.resources.get(kind) > free.get(kind) + 1e-9:
            return f"insufficient {kind.value}"
    return None


def _first_over(used: Resources, need: Resources, bound: Resources) -> str:
    """'needs 2 cpu, 9 of 10 cpu in use' for the first kind `used + need` exceeds `bound`."""
    for kind in KINDS:
        if used.get(kind) + need.get(kind) > bound.get(kind) + 1e-9:
            return (f"needs {words.amount(kind, need.get(kind))}, "
                    f"{words.value(kind, used.get(kind))} of "
                    f"{words.amount(kind, bound.get(kind))} in use")
    return "fits"


def _hosts_text(f: Facts) -> str:
    why = ", ".join(f"{n} {reason}" for reason, n in f.rejections)
    return f"{f.hosts_fit} of {f.hosts_total} hosts fit" + (f": {why}" if why else "")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def _queue_text(f: Facts) -> str:
    return f"{_ordinal(f.position)} of {f.queue_length} queued in {f.task.pool}" \
        if f.position else f"queued in {f.task.pool}"


def _fits(used: Resources, need: Resources, bound: Resources) -> bool:
    return (used + need).fits_in(bound.max(Resources()) + Resources(1e-9, 1e-9, 1e-9, 1e-9))


Rule = tuple[BindingKind, Callable[[Facts], bool], Callable[[Facts], str]]

#: The rules in the order they are tried (module docstring).
RULES: tuple[Rule, ...] = (
    (K.PLACEMENT, lambda f: f.task.admitted and f.hosts_fit < f.task.gang,
     lambda f: f"admitted, waiting for a host: {_hosts_text(f)}"),
    (K.POOL_LIMIT, lambda f: not _fits(f.allocation, f.need, f.limit),
     lambda f: f"pool {f.task.pool} is at its limit: "
               f"{_first_over(f.allocation, f.need, f.limit)}"),
    (K.GANG, lambda f: f.task.gang > 1 and not _fits(Resources(), f.need, f.cluster_free)
     and _fits(Resources(), f.task.resources, f.cluster_free),
     lambda f: f"its gang of {f.task.gang} tasks must start together: "
               f"{_first_over(Resources(), f.need, f.cluster_free)} free"),
    (K.PREEMPTION, lambda f: f.preemption and _fits(f.allocation, f.need, f.reservation)
     and not _fits(Resources(), f.need, f.cluster_free) and f.others_over_reservation,
     lambda f: f"pool {f.task.pool} is within its reservation but the cluster is full: it waits "
               "for tasks of pools over their reservation to be preempted"),
    (K.RESERVATION, lambda f: not _fits(f.allocation, f.need, f.entitlement)
     and f.entitlement.fits_in(f.reservation + Resources(1e-9, 1e-9, 1e-9, 1e-9)),
     lambda f: f"pool {f.task.pool} is entitled to its reservation only: "
               f"{_first_over(f.allocation, f.need, f.entitlement)}; {_queue_text(f)}"),
    (K.ENTITLEMENT, lambda f: not _fits(f.allocation, f.need, f.entitlement),
     lambda f: f"pool {f.task.pool} is at its entitlement (share {words.number(f.share)}): "
               f"{_first_over(f.allocation, f.need, f.entitlement)}; {_queue_text(f)}"),
    (K.PLACEMENT, lambda f: f.hosts_fit < f.task.gang,
     lambda f: f"no host has room: {_hosts_text(f)}"),
    (K.NONE, lambda f: True,
     lambda f: f"nothing binds now: it should start at the next scheduling pass "
               f"({_queue_text(f)})"),
)


def binding(snapshot: Snapshot, task: QueuedTask) -> Binding:
    """What binds `task` now (the first rule of `RULES` that holds)."""
    facts = Facts.of(snapshot, task)
    for kind, holds, text in RULES:
        if holds(facts):
            return Binding(kind=kind, summary=text(facts), queue_position=facts.position,
                           queue_length=facts.queue_length, hosts_fit=facts.hosts_fit,
                           hosts_total=facts.hosts_total, rejections=facts.rejections,
                           scheduler_reason=task.reason)
    raise AssertionError("the last rule always holds")  # pragma: no cover
