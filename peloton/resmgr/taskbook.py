"""The resource manager's task flow: enqueue -> admit -> place -> launch -> run -> finish.

`TaskBook` drives the core `TaskTracker` (states, queues, demand and
allocation) and keeps what the daemon adds around it: the ready queue for
the placement engine, placements for the job manager, state timeouts, the
host of each placed run and the last placement failure of each task.

States (the rmtask table, core/lifecycle/task_transitions.py):

    PENDING --admit--> READY --dequeue--> PLACING --set_placements--> PLACED
       ^                 ^                   |                          |
       |                 +---- failed -------+ (same cycle, after a     | get_placements
       +------ failed at the end of a cycle -+  short retry delay)      v
                                                         RUNNING <-- LAUNCHING
                                                            |
                                                  terminal event: finished

Only runs of the task's current run id count: a placement, event or
recovery for another run is stale and ignored, which is what keeps a late
event from an old run away from its successor.  Not thread-safe: the
daemon holds its lock around every call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from peloton.core.errors import FailedPrecondition, InvalidArgument, PelotonError
from peloton.core.lifecycle.retry import cycle_ended
from peloton.core.lifecycle.task_transitions import ALLOCATED_STATES
from peloton.core.model.evolve import constructor
from peloton.core.model.ids import TaskId
from peloton.core.model.sched import (
    EnqueueFailure,
    Placement,
    PlacementFailure,
    PlacementGang,
)
from peloton.core.partitions import PartitionSet
from peloton.core.placement.request import GangRequest
from peloton.core.respool.admission import BackfillPolicy
from peloton.core.respool.records import RmTask, TaskRecord
from peloton.core.respool.tracker import TaskTracker
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState
from peloton.resmgr.config import ResourceManagerConfig
from peloton.resmgr.ready import PlacedQueue, ReadyEntry, ReadyQueue
from peloton.resmgr.timeouts import Timeouts

log = logging.getLogger(__name__)
S = TaskState
#: Build a dequeued gang without the frozen `__init__`s (one pair per gang, mostly one task).
_new_gang = constructor(PlacementGang)
_new_request = constructor(GangRequest)


class TaskBook:
    """Tasks known to the resource manager and the queues between the daemons."""

    def __init__(self, tree: PoolTree, config: ResourceManagerConfig) -> None:
        self.config = config
        self.tracker = TaskTracker(tree, preemption_enabled=config.preemption_enabled,
                                   backfill=BackfillPolicy(config.backfill_depth,
                                                           config.backfill_reserve_after))
        self.ready = ReadyQueue()
        self.placed = PlacedQueue()
        self.timeouts = Timeouts(config)
        #: Host of each placed or running run (what a preemption victim reports).
        self.hosts: dict[TaskId, str] = {}
        #: Why the last placement of a still-queued task failed.
        self.reasons: dict[TaskId, str] = {}
        #: Demand changed since the last entitlement cycle.
        self.demand_changed = False

    # -- job manager: enqueue, kill, recover ----------------------------------------------
    def enqueue(self, pool_id: str, gangs: Sequence[Sequence[RmTask]]) -> list[EnqueueFailure]:
        """Queue gangs in a leaf pool; returns the tasks refused (see ResourceManagerPort)."""
        try:
            node = self.tracker.tree.get(pool_id)
            if node.is_root or not node.is_leaf:
                raise FailedPrecondition(f"pool {node.path} is not a leaf pool; only leaf pools "
                                         "take tasks", field="respoolID")
        except PelotonError as exc:
            return [EnqueueFailure(t.task_id, exc.message) for gang in gangs for t in gang]
        failures: list[EnqueueFailure] = []
        for gang in gangs:
            fresh = []
            for task in gang:
                old = self.tracker.get(task.task_id)
                if old is None:
                    fresh.append(task)
                elif old.task.run_id < task.run_id:
                    self.finish(task.task_id, S.KILLED)  # a newer run replaces the old one
                    fresh.append(task)
                elif old.task.run_id > task.run_id:
                    failures.append(EnqueueFailure(task.task_id, f"run {task.run_id} is older "
                                                   f"than the tracked run {old.task.run_id}"))
                # the same run again: already queued or further along; nothing to do
            if not fresh:
                continue
            try:
                self.tracker.enqueue(pool_id, fresh)
            except PelotonError as exc:
                failures.extend(EnqueueFailure(t.task_id, exc.message) for t in fresh)
                continue
            self.demand_changed = True
        return failures

    def kill(self, task_ids: Sequence[TaskId]) -> int:
        """Forget tasks wherever they are; returns how many were tracked."""
        return sum(self.finish(t, S.KILLED) for t in task_ids)

    def recover(self, pool_id: str, task: RmTask, state: TaskState, hostname: str,
                now: float) -> None:
        """Track a run found placed, launched or running after a restart, with its allocation."""
        if state is S.STARTING:
            state = S.LAUNCHED  # the resource manager has no STARTING; both wait for RUNNING
        if state not in ALLOCATED_STATES or state in (S.READY, S.PLACING, S.PLACED):
            raise InvalidArgument(f"task {task.task_id}: cannot recover a run in state "
                                  f"{state.value}; enqueue it instead", field="state")
        old = self.tracker.get(task.task_id)
        if old is not None:
            if old.task.run_id >= task.run_id:
                return  # already known (idempotent), or a newer run is
            self.finish(task.task_id, S.KILLED)
        self.tracker.recover(pool_id, task, state, start_time=now)
        if hostname:
            self.hosts[task.task_id] = hostname
        if state in (S.LAUNCHING, S.PREEMPTING):
            self.timeouts.start(task.task_id, state, now)

    # -- admission ------------------------------------------------------------------------
    def admit(self, limit_per_pool: int, now: float = 0.0) -> int:
        """Admit what entitlement allows in every leaf; returns how many tasks became READY."""
        count = 0
        for gang in self.tracker.admit(limit_per_pool, now=now):
            self.ready.push(ReadyEntry(list(gang.tasks)))
            count += len(gang.tasks)
        if count:
            self.demand_changed = True
        return count

    # -- placement engine -------------------------------------------------------------------
    def dequeue(self, limit: int, now: float) -> list[PlacementGang]:
        """Take ready gangs of at most `limit` tasks in all (at least one gang); READY -> PLACING."""
        ready = self.ready
        ready.promote(now)
        # Looked up once per call, not per task (a call takes a thousand or so).
        owner, get, transition = ready.owner, self.tracker.get, self.tracker.transition
        start = self.timeouts.start
        out: list[PlacementGang] = []
        taken = 0
        while taken < limit:
            entry = ready.pop()
            if entry is None:
                break
            live = [r for r in entry.records if r.state is S.READY
                    and get(r.task_id) is r and owner.get(r.task_id) is entry]
            if not live:
                continue
            entry.records = live
            if taken and taken + len(live) > limit:
                ready.push_front(entry)
                break
            for rec in live:
                task_id = rec.task_id
                transition(task_id, S.PLACING)
                start(task_id, S.PLACING, now, rec.placement_attempts)
            out.append(_new_gang(_new_request(tuple([r.task.request for r in live])),
                                 tuple([r.task.run_id for r in live]), live[0].pool.pool_id))
            taken += len(live)
        return out

    def set_placements(self, placements: Sequence[Placement],
                       failures: Sequence[PlacementFailure], now: float) -> int:
        """Apply a placement round; returns how many runs became PLACED."""
        placed = 0
        placing, transition, settle = self._placing, self.tracker.transition, self.settle
        hosts = self.hosts
        for placement in placements:
            kept = [p for p in placement.tasks if placing(p.task_id, p.run_id)]
            for p in kept:
                task_id = p.task_id
                transition(task_id, S.PLACED)
                settle(task_id)
                hosts[task_id] = placement.hostname
            if kept:
                same = len(kept) == len(placement.tasks)
                self.placed.push(placement if same else Placement(
                    placement.hostname, placement.agent_id, tuple(kept)))
                placed += len(kept)
        groups: dict[int, tuple[ReadyEntry | None, list[TaskRecord]]] = {}
        for failure in failures:
            rec = self._placing(failure.task_id, failure.run_id)
            if rec is None:
                continue
            self.reasons[failure.task_id] = failure.reason
            entry = self.ready.owner.get(failure.task_id)
            groups.setdefault(id(entry), (entry, []))[1].append(rec)
        for _, recs in groups.values():
            self.unplaced(recs, now)
        return placed

    def unplaced(self, recs: list[TaskRecord], now: float) -> None:
        """Placement gave up on PLACING tasks of one gang: retry, or back to PENDING.

        A single task goes back to PENDING at the end of each cycle of attempts,
        freeing its allocation for others (Peloton's backoff).  A gang of several
        stays READY, so it is never split into separately admitted pieces.
        """
        attempts = max(r.placement_attempts for r in recs)
        per_cycle = self.config.placement_attempts_per_cycle
        for rec in recs:
            self.timeouts.clear(rec.task_id)
        if len(recs) == 1 and cycle_ended(attempts, per_cycle):
            self.requeue(recs[0], self.reasons.get(recs[0].task_id, ""))
            return
        for rec in recs:
            self.tracker.transition(rec.task_id, S.READY)
        cfg = self.config
        delay = min(cfg.retry_delay * 2.0 ** min(attempts - 1, 30), cfg.retry_delay_max)
        self.ready.push_later(ReadyEntry(recs), now + delay)

    def requeue(self, rec: TaskRecord, reason: str) -> None:
        """An admitted task that has not started goes back to PENDING (a preemption victim)."""
        self.timeouts.clear(rec.task_id)
        self.tracker.transition(rec.task_id, S.PENDING)
        self.ready.forget(rec.task_id)
        self.hosts.pop(rec.task_id, None)
        self.reasons[rec.task_id] = reason
        self.demand_changed = True

    # -- job manager: launch ----------------------------------------------------------------
    def get_placements(self, limit: int, now: float,
                       partitions: PartitionSet | None = None) -> list[Placement]:
        """Placed runs to launch, at most `limit`, of jobs in `partitions` (None: of any
        job); PLACED -> LAUNCHING."""
        out: list[Placement] = []
        taken = 0
        get, transition = self.tracker.get, self.tracker.transition
        start = self.timeouts.start
        while taken < limit and (placement := self.placed.pop(partitions)) is not None:
            tasks = [p for p in placement.tasks
                     if (rec := get(p.task_id)) is not None and rec.task.run_id == p.run_id
                     and rec.state is S.PLACED]
            if not tasks:
                continue
            if taken + len(tasks) > limit:
                rest = tasks[limit - taken:]
                tasks = tasks[:limit - taken]
                self.placed.push_front(Placement(placement.hostname, placement.agent_id,
                                                 tuple(rest)))
            for p in tasks:
                transition(p.task_id, S.LAUNCHING)
                start(p.task_id, S.LAUNCHING, now)
            out.append(Placement(placement.hostname, placement.agent_id, tuple(tasks)))
            taken += len(tasks)
        return out

    # -- helpers --------------------------------------------------------------------------------
    def _placing(self, task_id: TaskId, run_id: int) -> TaskRecord | None:
        rec = self.tracker.get(task_id)
        if rec is None or rec.task.run_id != run_id or rec.state is not S.PLACING:
            return None
        return rec

    def settle(self, task_id: TaskId) -> None:
        """The task left the ready/placing stage for good: drop its timeout, entry, reason."""
        self.timeouts.clear(task_id)
        self.ready.forget(task_id)
        self.reasons.pop(task_id, None)

    def finish(self, task_id: TaskId, state: TaskState) -> bool:
        """Stop tracking a task (terminal event or kill), freeing what it holds; True if known."""
        rec = self.tracker.finish(task_id, state)
        self.settle(task_id)
        self.hosts.pop(task_id, None)
        if rec is not None:
            self.demand_changed = True
        return rec is not None
