"""Preemption planning: which tasks to evict so pools come back within their entitlement.

Two steps, as Peloton's resource manager does it (`pkg/resmgr/preemption`):

1. `OverAllocationCounter.observe` is called once per preemption cycle with
   the leaf pools.  A pool is *over* when its non-slack allocation exceeds
   its non-slack entitlement, or its slack allocation its slack
   entitlement, in any kind.  Only a pool that stays over for
   `sustained_cycles` consecutive cycles is reported (then its count starts
   again), so a short spike never kills work.
2. `select_victims` ranks a pool's active tasks — READY before PLACING
   before RUNNING (cheapest to undo first), then lower priority first, then
   the most recently started first — and picks greedily: revocable tasks
   to cover the slack excess, preemptible regular tasks to cover the
   non-slack excess, skipping any task that would not reduce what is still
   needed.  Non-preemptible tasks are never victims.

The daemon applies the plan: READY/PLACING victims go back to PENDING
(`TaskTracker.transition`), RUNNING victims go to PREEMPTING and are handed
to the job manager to kill or restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar

from peloton.core.model.resources import Resources
from peloton.core.respool.node import PoolNode, frozen
from peloton.core.states import TaskState

#: Victim order by state: undoing a READY task costs nothing, a RUNNING one loses work.
STATE_RANK: dict[TaskState, int] = {TaskState.READY: 0, TaskState.PLACING: 1,
                                    TaskState.RUNNING: 2}


class PreemptibleTask(Protocol):
    """What the planner reads of a task (`TaskRecord` satisfies it)."""

    @property
    def state(self) -> TaskState:
        """Resource-manager state."""

    @property
    def priority(self) -> int:
        """Job priority."""

    @property
    def start_time(self) -> float:
        """When it started RUNNING."""

    @property
    def resources(self) -> Resources:
        """What it holds."""

    @property
    def preemptible(self) -> bool:
        """May be preempted."""

    @property
    def revocable(self) -> bool:
        """Runs on slack."""


T = TypeVar("T", bound=PreemptibleTask)


class VictimAction(StrEnum):
    """What the daemon does with a victim."""

    #: Not started yet: back to PENDING, queued again.
    REQUEUE = "REQUEUE"
    #: Running: PREEMPTING, then the job manager kills (or restarts) it.
    REVOKE = "REVOKE"


@dataclass(frozen=True, slots=True)
class OverAllocation:
    """A pool that stayed over its entitlement long enough, and by how much."""

    pool_id: str
    non_slack_excess: Resources
    slack_excess: Resources


class OverAllocationCounter:
    """Consecutive over-allocated cycles per pool.

    Invariant: a pool id is in `counts` only while its latest observation
    was over and it has not yet been reported for this streak.
    """

    def __init__(self, sustained_cycles: int = 5) -> None:
        if sustained_cycles < 1:
            raise ValueError("sustained_cycles must be >= 1")
        self.sustained_cycles = sustained_cycles
        self.counts: dict[str, int] = {}

    def resume(self, counts: dict[str, int]) -> None:
        """Take over another counter's streaks (a simulation resuming a live resource
        manager: the forecast)."""
        self.counts = dict(counts)

    def observe(self, pools: Iterable[PoolNode]) -> list[OverAllocation]:
        """Record one cycle; return the pools that have now been over long enough."""
        out: list[OverAllocation] = []
        seen: set[str] = set()
        for node in pools:
            non_slack = frozen([t - s for t, s in zip(node.alloc_total, node.alloc_slack,
                                                      strict=True)])
            non_slack_excess = excess_of(non_slack, frozen(node.non_slack_entitlement))
            slack_excess = excess_of(frozen(node.alloc_slack), frozen(node.slack_entitlement))
            if non_slack_excess.is_zero() and slack_excess.is_zero():
                continue
            seen.add(node.pool_id)
            count = self.counts.get(node.pool_id, 0) + 1
            if count >= self.sustained_cycles:
                out.append(OverAllocation(node.pool_id, non_slack_excess, slack_excess))
                self.counts.pop(node.pool_id, None)
            else:
                self.counts[node.pool_id] = count
        for pool_id in list(self.counts):
            if pool_id not in seen:
                del self.counts[pool_id]
        return out


def rank_victims(tasks: Iterable[T]) -> list[T]:
    """Candidates in eviction order: state, then priority ascending, then newest start first.

    Only READY, PLACING and RUNNING tasks are candidates; READY tasks have
    not started, so their start times do not order them.
    """
    cands = [t for t in tasks if t.state in STATE_RANK and t.preemptible]
    return sorted(cands, key=lambda t: (STATE_RANK[t.state], t.priority,
                                        0.0 if t.state is TaskState.READY else -t.start_time))


def _greedy(excess: Resources, ranked: Sequence[T]) -> list[T]:
    picked: list[T] = []
    need = excess
    for task in ranked:
        if need.is_zero():
            break
        after = need.minus_clamped(task.resources)
        if after.approx_eq(need):
            continue  # frees nothing that is still needed
        picked.append(task)
        need = after
    return picked


def select_victims(over: OverAllocation, tasks: Iterable[T]) -> list[tuple[T, VictimAction]]:
    """The tasks to evict from one over-allocated pool, with what to do with each."""
    ranked = rank_victims(tasks)
    revocable = [t for t in ranked if t.revocable]
    regular = [t for t in ranked if not t.revocable]
    victims = _greedy(over.slack_excess, revocable) + _greedy(over.non_slack_excess, regular)
    return [(t, VictimAction.REVOKE if t.state is TaskState.RUNNING else VictimAction.REQUEUE)
            for t in victims]


def excess_of(alloc: Resources, entitlement: Resources) -> Resources:
    """What must be freed to bring `alloc` within `entitlement` (zero where it is within)."""
    return alloc.minus_clamped(entitlement)
