"""Preemption: bring pools that stay over their entitlement back within it.

Each cycle the core `OverAllocationCounter` looks at every leaf; a pool
over its (non-slack or slack) entitlement for `sustained` consecutive
cycles is handed to the core planner (`select_victims`), which picks
preemptible tasks cheapest first.  Victims that have not started (READY,
PLACING) go back to PENDING here at once, freeing their allocation.
Running victims are queued for the job manager, which takes them with
`take_victims`: each is handed out once and moves RUNNING -> PREEMPTING,
where it keeps its allocation until its run ends (or, if it never does,
until the preempting timeout puts it back to RUNNING, so a later cycle
may pick it again).

Not thread-safe: the daemon holds its lock around every call.
"""

from __future__ import annotations

import logging
from collections import deque

from peloton.core.model.ids import TaskId
from peloton.core.model.sched import Victim, VictimReason
from peloton.core.partitions import PartitionSet
from peloton.core.preemption import OverAllocationCounter, VictimAction, select_victims
from peloton.core.respool.records import TaskRecord
from peloton.core.states import TaskState
from peloton.resmgr.taskbook import TaskBook

log = logging.getLogger(__name__)


def _task_id(rec: TaskRecord) -> TaskId:
    return rec.task_id


class Preemptor:
    """Sustained over-allocation -> victims; see the module docstring."""

    def __init__(self, book: TaskBook, sustained_cycles: int) -> None:
        self.book = book
        self.counter = OverAllocationCounter(sustained_cycles)
        self._victims: deque[TaskRecord] = deque()
        self._queued: set[TaskId] = set()

    @property
    def waiting(self) -> int:
        """Running victims not yet taken by the job manager."""
        return len(self._victims)

    def cycle(self) -> tuple[int, int]:
        """One preemption cycle; returns (tasks requeued, running tasks queued as victims)."""
        book = self.book
        requeued = revoked = 0
        for over in self.counter.observe(book.tracker.tree.leaves()):
            # In task id order: the planner's ranking is a stable sort, so tasks it ranks
            # alike (same state, priority and start) are picked in an order that does not
            # depend on where their records happen to live in memory (a set's order).
            candidates = sorted((r for r in book.tracker.active_tasks(over.pool_id)
                                 if r.task_id not in self._queued), key=_task_id)
            victims = select_victims(over, candidates)
            if victims:
                log.info("preempting %d task(s) in pool %s (over by %s / slack %s)",
                         len(victims), over.pool_id, over.non_slack_excess, over.slack_excess)
            for rec, action in victims:
                if action is VictimAction.REQUEUE:
                    book.requeue(rec, "preempted before it started: its pool was over its "
                                      "entitlement")
                    requeued += 1
                else:
                    self._victims.append(rec)
                    self._queued.add(rec.task_id)
                    revoked += 1
        return requeued, revoked

    def take(self, limit: int, now: float,
             partitions: PartitionSet | None = None) -> list[Victim]:
        """Up to `limit` running victims of jobs in `partitions` (None: of any job), each
        once; they move RUNNING -> PREEMPTING.  Other members' victims keep their place:
        only a job's owner can stop its run, so one handed to another member would be
        dropped there and its pool stay over entitlement until the preempting timeout."""
        book = self.book
        out: list[Victim] = []
        others: list[TaskRecord] = []
        while self._victims and len(out) < limit:
            rec = self._victims.popleft()
            if partitions is not None and not partitions.covers(rec.task_id.job_id):
                others.append(rec)
                continue
            self._queued.discard(rec.task_id)
            if book.tracker.get(rec.task_id) is not rec or rec.state is not TaskState.RUNNING:
                continue  # it ended, or was killed or replaced, while it waited
            book.tracker.transition(rec.task_id, TaskState.PREEMPTING)
            book.timeouts.start(rec.task_id, TaskState.PREEMPTING, now)
            out.append(Victim(rec.task_id, rec.task.run_id, VictimReason.PREEMPTED,
                              book.hosts.get(rec.task_id, "")))
        self._victims.extendleft(reversed(others))
        return out
