"""One placement round as a pure function: gangs + leased hosts -> placements, failures, reservations.

The core `Placer` does the matching (filters, rankers, gangs all or
nothing, a reason report per unplaced task).  This module only translates
between the ports' values and the placer's:

* revocable gangs are placed first (as Peloton does): they can only use
  slack cpu, while regular work could take the memory they also need;
* each task's run goes to the placer, which draws the task's dynamic ports
  by it (a retry gets other ports than the run before it);
* each placed task becomes a `PlacedTask` in its host's `Placement` (one
  per host, so the job manager launches per host) and a `HostReservation`
  carrying its resources, ports and labels, so the host manager keeps the
  room and "at most N per host" counts the run before it is launched;
* each unplaced task becomes a `PlacementFailure` with the placer's report
  ("0 of 900 hosts fit: 880 insufficient cpu, 20 gpu host kept for gpu tasks").

Cost: one host index build, O(hosts log hosts), plus O(log hosts) per
task; nothing here scans the hosts per task.  With a placer kept between
rounds, only the hosts whose offer changed are rebuilt (a comparison per
leased host otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from peloton.core.model.host import HostOffer
from peloton.core.model.ids import TaskId
from peloton.core.model.sched import (
    HostReservation,
    PlacedTask,
    Placement,
    PlacementFailure,
    PlacementGang,
)
from peloton.core.placement.request import TaskRequest
from peloton.core.placement.stack import PlacementConfig, Placer


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one round decided."""

    placements: tuple[Placement, ...]
    failures: tuple[PlacementFailure, ...]
    reservations: tuple[HostReservation, ...]

    @property
    def placed(self) -> int:
        """Tasks placed."""
        return len(self.reservations)


def _revocable(gang: PlacementGang) -> bool:
    return any(t.needs.revocable for t in gang.gang.tasks)


def place_round(gangs: Sequence[PlacementGang], offers: Sequence[HostOffer],
                config: PlacementConfig = PlacementConfig(),
                placer: Placer | None = None) -> RoundResult:
    """Place `gangs` on the leased `offers`.

    With `placer` (one the engine keeps between rounds) its index is synced to `offers`
    (only hosts whose offer changed are rebuilt) instead of built anew.
    """
    runs: dict[TaskId, tuple[TaskRequest, int]] = {}
    run_of: dict[TaskId, int] = {}
    for g in gangs:
        for req, run in zip(g.gang.tasks, g.run_ids, strict=True):
            runs[req.task_id] = (req, run)
            run_of[req.task_id] = run
    ordered = sorted(gangs, key=lambda g: not _revocable(g))  # stable: FIFO within each class
    if placer is None:
        placer = Placer(offers, config)
    else:
        placer.sync(offers)
    plan = placer.place([g.gang for g in ordered], run_of)
    by_host: dict[str, tuple[str, list[PlacedTask]]] = {}
    reservations: list[HostReservation] = []
    for tp in plan.placed:
        req, run = runs[tp.task_id]
        entry = by_host.get(tp.hostname)
        if entry is None:
            entry = by_host[tp.hostname] = (tp.agent_id, [])
        entry[1].append(PlacedTask(tp.task_id, run, tp.ports))
        needs = req.needs
        reservations.append(HostReservation(tp.hostname, tp.task_id, run, needs.resources,
                                            tp.ports, needs.revocable, req.labels))
    placements = tuple(Placement(host, agent, tuple(tasks))
                       for host, (agent, tasks) in by_host.items())
    failures = tuple(PlacementFailure(u.task_id, runs[u.task_id][1], str(u.report))
                     for u in plan.unplaced)
    return RoundResult(placements, failures, tuple(reservations))


def fail_all(gangs: Sequence[PlacementGang], reason: str) -> list[PlacementFailure]:
    """Every task of `gangs` as failed with one reason (the round could not run)."""
    return [PlacementFailure(req.task_id, run, reason)
            for g in gangs for req, run in zip(g.gang.tasks, g.run_ids, strict=True)]
