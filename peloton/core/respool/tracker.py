"""The resource manager's task tracker: every task it knows, its state, queues and accounting.

The tracker is the one place that changes a task's resource-manager state,
and it keeps three things in step with every change, each in O(gang size +
tree depth):

* the task's queue membership (PENDING tasks are queued in their leaf);
* demand (queued work) and allocation (admitted, unfinished work) in the
  leaf and all its ancestors;
* the leaf's `active` set (tasks holding allocation), which the preemptor
  ranks.

State changes follow `RM_TRANSITIONS`; a terminal status ends tracking from
any state (Peloton's MarkItDone).  The daemon drives it: `enqueue` on
EnqueueGangs, `admit` every scheduling tick, `transition` as placement and
launch progress, `finish` on terminal events and kills.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from peloton.core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from peloton.core.lifecycle.task_transitions import ALLOCATED_STATES, rm_allows
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.respool.admission import BackfillPolicy, admit_gangs, refusal
from peloton.core.respool.node import PoolNode
from peloton.core.respool.queues import LeafQueues, QueueKind
from peloton.core.respool.records import Gang, RmTask, TaskRecord
from peloton.core.respool.tree import PoolTree
from peloton.core.states import TaskState


class TaskTracker:
    """Tasks by id, with queues and accounting kept in the pool tree's leaves."""

    def __init__(self, tree: PoolTree, *, preemption_enabled: bool = False,
                 backfill: BackfillPolicy = BackfillPolicy()) -> None:
        self.tree = tree
        self.preemption_enabled = preemption_enabled
        self.backfill = backfill
        #: The total capacity of each UP host (distinct values), as the resource manager last
        #: heard; a gang that fits none is never admitted (admission.py).  Empty: unknown.
        self.host_room: tuple[Resources, ...] = ()
        self._tasks: dict[TaskId, TaskRecord] = {}

    # -- queries ------------------------------------------------------------------
    def get(self, task_id: TaskId) -> TaskRecord | None:
        """The record of a tracked task, or None."""
        return self._tasks.get(task_id)

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def records(self) -> Iterator[TaskRecord]:
        """Every tracked task (no particular order)."""
        return iter(self._tasks.values())

    def pending_reason(self, task_id: TaskId) -> str | None:
        """Why a queued task is not admitted yet (None if it is not queued)."""
        rec = self._tasks.get(task_id)
        if rec is None or rec.state is not TaskState.PENDING or rec.gang is None:
            return None
        refused = refusal(rec.pool, rec.gang, self.preemption_enabled)
        if refused is None:
            return (f"queued in {rec.pool.path}: fits the pool now, waiting for its turn "
                    "(priority FIFO)")
        return f"queued in {rec.pool.path}: gang of {len(rec.gang)} exceeds the pool's {refused}"

    def active_tasks(self, pool_id: str) -> list[TaskRecord]:
        """Tasks holding allocation in a leaf pool (what the preemptor chooses from)."""
        return list(self.tree.get(pool_id).active)

    # -- enqueue --------------------------------------------------------------------
    def enqueue(self, pool_id: str, tasks: Sequence[RmTask]) -> Gang:
        """Queue one gang in a leaf pool, all or nothing.

        A task id already tracked is refused with AlreadyExists, except a new
        run of a task that is LAUNCHED or RUNNING (a relaunch), which replaces
        the old run and frees its allocation.
        """
        node = self._leaf(pool_id)
        if not tasks:
            raise InvalidArgument("a gang needs at least one task", field="gang")
        first = tasks[0]
        for t in tasks[1:]:
            if (t.priority, t.preemptible, t.revocable, t.controller) != (
                    first.priority, first.preemptible, first.revocable, first.controller):
                raise InvalidArgument(f"gang tasks {first.task_id} and {t.task_id} differ in "
                                      "priority, preemptible, revocable or controller",
                                      field="gang")
        replaced: list[TaskRecord] = []
        for t in tasks:
            old = self._tasks.get(t.task_id)
            if old is None:
                continue
            if old.task.run_id != t.run_id and old.state in (TaskState.LAUNCHED,
                                                             TaskState.RUNNING):
                replaced.append(old)
                continue
            raise AlreadyExists(f"task {t.task_id} is already tracked "
                                f"({old.state.value}, run {old.task.run_id})", field="task_id")
        for old in replaced:
            self.finish(old.task_id, TaskState.KILLED)
        records = [TaskRecord(t, node) for t in tasks]
        gang = Gang(records)
        for rec in records:
            rec.gang = gang
            self._tasks[rec.task.request.task_id] = rec
        self._queue(node, gang)
        return gang

    def _queue(self, node: PoolNode, gang: Gang) -> None:
        queues = node.queues
        if queues is None:
            queues = node.queues = LeafQueues()
        queues[QueueKind.PENDING].push(gang)
        node.add_demand(gang.need, gang.revocable, 1)

    def _leaf(self, pool_id: str) -> PoolNode:
        node = self.tree.get(pool_id)
        if node.is_root or not node.is_leaf:
            raise FailedPrecondition(f"pool {node.path} is not a leaf; only leaf pools take "
                                     "tasks", field="pool_id")
        return node

    # -- admission ------------------------------------------------------------------
    def admit(self, limit_per_pool: int = 1000, pool_id: str | None = None, *,
              now: float = 0.0) -> list[Gang]:
        """Admit what entitlement allows in one leaf (or every leaf); tasks become READY.

        Refused gangs are backfilled past (see admission.py); `now` dates refusals
        for the reservation rule.
        """
        nodes = [self._leaf(pool_id)] if pool_id is not None else self.tree.leaves()
        out: list[Gang] = []
        for node in nodes:
            if node.queues is not None:
                out.extend(admit_gangs(node, limit_per_pool,
                                       preemption_enabled=self.preemption_enabled, now=now,
                                       policy=self.backfill, host_room=self.host_room))
        return out

    # -- state changes ------------------------------------------------------------
    def transition(self, task_id: TaskId, to: TaskState, *, at: float = 0.0) -> TaskRecord:
        """Move a tracked task along the rmtask table.

        Moving an admitted task back to PENDING (placement gave up, or a
        preemption victim that had not started) frees its allocation and
        queues it again as a gang of one.  `at` is the time of the change;
        entering RUNNING records it as the start time the preemptor ranks by.
        """
        rec = self._tasks.get(task_id)
        if rec is None:
            raise NotFound(f"task {task_id} is not tracked", field="task_id")
        src = rec.state
        if not rm_allows(src, to):
            raise FailedPrecondition(f"task {task_id}: {src.value} -> {to.value} is not a "
                                     "valid resource manager transition", field="state")
        if to.terminal:
            self.finish(task_id, to)
            return rec
        if to is TaskState.PENDING:
            if src in ALLOCATED_STATES:
                self._release(rec)
            rec.state = TaskState.PENDING
            gang = Gang([rec])
            rec.gang = gang
            self._queue(rec.pool, gang)
            return rec
        if src is TaskState.PENDING:
            _left_gang(rec)  # moved on while queued: its gang is walked to and trimmed
        if src is TaskState.INITIALIZED and to in ALLOCATED_STATES:
            self._allocate(rec)
        if to is TaskState.PLACING:
            rec.placement_attempts += 1
        if to is TaskState.RUNNING:
            rec.start_time = at
        rec.state = to
        return rec

    def recover(self, pool_id: str, task: RmTask, state: TaskState,
                start_time: float = 0.0) -> TaskRecord:
        """Re-add a task found in an allocated state after a restart, with its allocation."""
        if state not in ALLOCATED_STATES:
            raise InvalidArgument(f"cannot recover a task in state {state.value}; enqueue it",
                                  field="state")
        if task.task_id in self._tasks:
            raise AlreadyExists(f"task {task.task_id} is already tracked", field="task_id")
        rec = TaskRecord(task, self._leaf(pool_id))
        rec.state = TaskState.INITIALIZED
        self._tasks[task.task_id] = rec
        self._allocate(rec)
        rec.state = state
        rec.start_time = start_time
        return rec

    def finish(self, task_id: TaskId, state: TaskState = TaskState.KILLED) -> TaskRecord | None:
        """Stop tracking a task (terminal event or kill); returns its last record, if any.

        A queued task leaves demand at once and is dropped from its gang when
        the gang reaches the head of the queue; an admitted one frees its
        allocation.  Unknown ids are ignored (kills and events are retried).
        """
        if not state.terminal:
            raise InvalidArgument(f"finish needs a terminal state, not {state.value}",
                                  field="state")
        rec = self._tasks.pop(task_id, None)
        if rec is None:
            return None
        if rec.state is TaskState.PENDING:
            gang = rec.gang
            res = rec.resources
            rec.pool.add_demand(res, rec.revocable, -1)
            if gang is not None:
                _left_gang(rec)
                gang.need = gang.need - res
                rec.gang = None
        elif rec.state in ALLOCATED_STATES:
            self._release(rec)
        rec.state = state
        return rec

    def _allocate(self, rec: TaskRecord) -> None:
        t = rec.task
        rec.pool.add_allocation(t.resources, revocable=t.revocable, preemptible=t.preemptible,
                                controller=t.controller, sign=1)
        rec.pool.active.add(rec)

    def _release(self, rec: TaskRecord) -> None:
        t = rec.task
        rec.pool.add_allocation(t.resources, revocable=t.revocable, preemptible=t.preemptible,
                                controller=t.controller, sign=-1)
        rec.pool.active.discard(rec)


def _left_gang(rec: TaskRecord) -> None:
    """A PENDING task leaves its queued gang other than by admission: its queue stops
    counting the gang by shape (queues.py), whose need or tasks no longer match."""
    gang = rec.gang
    if gang is not None and gang.queue is not None:
        gang.queue.changed(gang)
