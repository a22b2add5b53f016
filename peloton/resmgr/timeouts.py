"""State timeouts of resource-manager tasks: PLACING, LAUNCHING and PREEMPTING fall back on their own.

Each timed state a task enters gets one deadline, keyed by the task and
tagged with the state it was set for (`RM_TIMEOUTS` in the core names the
states and where they fall back to).  A deadline whose task has since left
that state is void: `due` hands back (task, state) pairs and the caller
checks the task is still in that state before acting, so leaving a state
never needs to find and cancel its deadline (it may, with `clear`, to keep
the queue small).

Placement backoff (Peloton's backoffpolicy.go): the n-th PLACING of a task
may last `placing_timeout + (n mod attempts_per_cycle) x retry_backoff`.

Tasks move in batches (a dequeue of hundreds of gangs, a round of placements taken for
launch), and every task of a batch gets the same deadline.  So deadlines are kept as
buckets, one per distinct deadline in a heap, each an insertion-ordered set of its tasks:
a batch costs one heap entry, and starting or clearing a task's deadline is a dict
operation (a heap entry per task was ~2 µs of each of the two timed states every task
passes through).  Among equal deadlines, tasks come out in the order they were (last)
started, as from a deadline queue.
"""

from __future__ import annotations

import heapq

from peloton.core.lifecycle.retry import placing_timeout
from peloton.core.model.ids import TaskId
from peloton.core.states import TaskState
from peloton.resmgr.config import ResourceManagerConfig

S = TaskState


class Timeouts:
    """Deadlines of tasks in timed states (one per task)."""

    def __init__(self, config: ResourceManagerConfig) -> None:
        self.config = config
        #: The state and deadline of each task in a timed state.
        self._state: dict[TaskId, tuple[TaskState, float]] = {}
        #: Tasks by deadline (dicts as insertion-ordered sets); a deadline whose tasks all
        #: left is deleted here and its heap entry skipped when it comes up.
        self._buckets: dict[float, dict[TaskId, None]] = {}
        self._heap: list[float] = []

    def __len__(self) -> int:
        return len(self._state)

    def seconds(self, state: TaskState, attempt: int = 1) -> float:
        """How long a task may stay in `state` (for PLACING: on its `attempt`-th try)."""
        cfg = self.config
        if state is S.PLACING:
            return placing_timeout(attempt, cfg.placing_timeout, cfg.placement_retry_backoff,
                                   cfg.placement_attempts_per_cycle)
        if state is S.LAUNCHING:
            return cfg.launching_timeout
        if state is S.PREEMPTING:
            return cfg.preempting_timeout
        raise ValueError(f"{state.value} has no timeout")

    def start(self, task_id: TaskId, state: TaskState, now: float, attempt: int = 1) -> None:
        """The task entered timed `state` at `now`; replaces any earlier deadline."""
        deadline = now + self.seconds(state, attempt)
        old = self._state.get(task_id)
        if old is not None:
            self._drop(task_id, old[1])
        self._state[task_id] = (state, deadline)
        bucket = self._buckets.get(deadline)
        if bucket is None:
            bucket = self._buckets[deadline] = {}
            heapq.heappush(self._heap, deadline)
            if len(self._heap) > 2 * len(self._buckets) + 64:
                # Mostly deadlines whose tasks all left: keep the heap to the live ones.
                self._heap = list(self._buckets)
                heapq.heapify(self._heap)
        bucket[task_id] = None

    def clear(self, task_id: TaskId) -> None:
        """The task left its timed state (or is gone)."""
        old = self._state.pop(task_id, None)
        if old is not None:
            self._drop(task_id, old[1])

    def due(self, now: float) -> list[tuple[TaskId, TaskState]]:
        """Remove and return every deadline that has passed, earliest first."""
        out = []
        heap, buckets, states = self._heap, self._buckets, self._state
        while heap and heap[0] <= now:
            bucket = buckets.pop(heapq.heappop(heap), None)
            for task_id in bucket or ():
                out.append((task_id, states.pop(task_id)[0]))
        return out

    def next_deadline(self) -> float | None:
        """The earliest deadline, or None."""
        heap = self._heap
        while heap and heap[0] not in self._buckets:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _drop(self, task_id: TaskId, deadline: float) -> None:
        bucket = self._buckets[deadline]
        del bucket[task_id]
        if not bucket:
            del self._buckets[deadline]
