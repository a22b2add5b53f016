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
"""

from __future__ import annotations

from peloton.common.deadline_queue import DeadlineQueue
from peloton.core.lifecycle.retry import placing_timeout
from peloton.core.model.ids import TaskId
from peloton.core.states import TaskState
from peloton.resmgr.config import ResourceManagerConfig

S = TaskState


class Timeouts:
    """Deadlines of tasks in timed states (one per task)."""

    def __init__(self, config: ResourceManagerConfig) -> None:
        self.config = config
        self._queue: DeadlineQueue[TaskId] = DeadlineQueue()
        self._state: dict[TaskId, TaskState] = {}

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
        self._queue.remove(task_id)
        self._queue.enqueue(task_id, now + self.seconds(state, attempt))
        self._state[task_id] = state

    def clear(self, task_id: TaskId) -> None:
        """The task left its timed state (or is gone)."""
        if self._state.pop(task_id, None) is not None:
            self._queue.remove(task_id)

    def due(self, now: float) -> list[tuple[TaskId, TaskState]]:
        """Remove and return every deadline that has passed, earliest first."""
        out = []
        for task_id in self._queue.pop_all_due(now):
            state = self._state.pop(task_id, None)
            if state is not None:
                out.append((task_id, state))
        return out

    def next_deadline(self) -> float | None:
        """The earliest deadline, or None."""
        return self._queue.next_deadline()
