"""Timeouts keeps one deadline per task, shared by the tasks of a batch (timeouts.py).

The buckets are an implementation detail; what a caller sees must be exactly what a plain
deadline queue gives: each task's latest deadline, tasks due in deadline order and, among
equal deadlines, in the order they were last started.  A property test compares the two
over random sequences of starts, clears and expiries.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.common.deadline_queue import DeadlineQueue
from peloton.core.model.ids import TaskId
from peloton.core.states import TaskState
from peloton.resmgr.config import ResourceManagerConfig
from peloton.resmgr.timeouts import Timeouts

S = TaskState
JOB = "6d1b7c0e-0000-4000-8000-00000000beef"
CONFIG = ResourceManagerConfig(placing_timeout=10.0, launching_timeout=30.0,
                               preempting_timeout=60.0, placement_retry_backoff=5.0)
TIMED = (S.PLACING, S.LAUNCHING, S.PREEMPTING)


class Reference:
    """What Timeouts did before the buckets: one deadline-queue entry per task."""

    def __init__(self) -> None:
        self.queue: DeadlineQueue[TaskId] = DeadlineQueue()
        self.state: dict[TaskId, TaskState] = {}

    def start(self, task_id: TaskId, state: TaskState, now: float, attempt: int) -> None:
        self.queue.remove(task_id)
        self.queue.enqueue(task_id, now + Timeouts(CONFIG).seconds(state, attempt))
        self.state[task_id] = state

    def clear(self, task_id: TaskId) -> None:
        if self.state.pop(task_id, None) is not None:
            self.queue.remove(task_id)

    def due(self, now: float) -> list[tuple[TaskId, TaskState]]:
        return [(t, self.state.pop(t)) for t in self.queue.pop_all_due(now)]


def test_a_batch_started_together_expires_together_in_start_order() -> None:
    timeouts = Timeouts(CONFIG)
    batch = [TaskId(JOB, i) for i in (3, 1, 2)]
    for task_id in batch:
        timeouts.start(task_id, S.LAUNCHING, 100.0)
    timeouts.start(TaskId(JOB, 9), S.PLACING, 100.0)  # due earlier: 10 s + 5 s of backoff
    timeouts.clear(TaskId(JOB, 1))
    assert timeouts.next_deadline() == 115.0
    assert timeouts.due(129.9) == [(TaskId(JOB, 9), S.PLACING)]
    assert timeouts.next_deadline() == 130.0
    assert timeouts.due(130.0) == [(TaskId(JOB, 3), S.LAUNCHING), (TaskId(JOB, 2), S.LAUNCHING)]
    assert len(timeouts) == 0 and timeouts.next_deadline() is None


def test_starting_again_replaces_the_deadline() -> None:
    timeouts = Timeouts(CONFIG)
    task_id = TaskId(JOB, 0)
    timeouts.start(task_id, S.PLACING, 100.0)
    timeouts.start(task_id, S.LAUNCHING, 105.0)
    assert timeouts.due(120.0) == []  # the PLACING deadline (115) went with the restart
    assert timeouts.due(135.0) == [(task_id, S.LAUNCHING)]


def test_deadlines_whose_tasks_all_left_do_not_pile_up() -> None:
    timeouts = Timeouts(CONFIG)
    for i in range(10_000):  # every task alone in its batch, cleared before its deadline
        timeouts.start(TaskId(JOB, i), S.PLACING, float(i))
        timeouts.clear(TaskId(JOB, i))
    assert len(timeouts) == 0
    assert len(timeouts._heap) <= 64 + 2  # compacted, not one entry per start
    assert timeouts.next_deadline() is None


@dataclass(frozen=True)
class Start:
    instance: int
    state: TaskState
    later: int
    attempt: int


@dataclass(frozen=True)
class Clear:
    instance: int


@dataclass(frozen=True)
class Advance:
    seconds: int


ops = st.lists(st.one_of(
    st.builds(Start, st.integers(0, 7), st.sampled_from(TIMED), st.integers(0, 3),
              st.integers(1, 4)),
    st.builds(Clear, st.integers(0, 7)),
    st.builds(Advance, st.integers(0, 40)),
), max_size=80)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_behaves_as_one_deadline_queue_entry_per_task(script: list[Start | Clear | Advance]
                                                      ) -> None:
    timeouts, reference = Timeouts(CONFIG), Reference()
    now = 1000.0
    for op in script:
        if isinstance(op, Start):
            # Batches: several starts at the same instant share a deadline.
            task_id = TaskId(JOB, op.instance)
            timeouts.start(task_id, op.state, now + op.later, op.attempt)
            reference.start(task_id, op.state, now + op.later, op.attempt)
        elif isinstance(op, Clear):
            timeouts.clear(TaskId(JOB, op.instance))
            reference.clear(TaskId(JOB, op.instance))
        else:
            now += op.seconds
            assert timeouts.due(now) == reference.due(now)
        assert timeouts.next_deadline() == reference.queue.next_deadline()
        assert len(timeouts) == len(reference.state)
