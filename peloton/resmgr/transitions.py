"""The state changes nobody asks the resource manager for: host status events and timeouts.

* A status event moves the task's *current* run: RUNNING records the start
  (and settles a task whose launch we had given up on, if it started after
  all), LAUNCHED/STARTING stop the launch timeout, and a terminal state
  ends tracking and frees the allocation (but LOST for a run not launched yet,
  `NOT_LAUNCHED`, is dropped: no host had it).  Events about other runs are
  dropped (run-id discipline).
* A timeout that passed moves the task back if it is still in the state
  the deadline was set for: PLACING -> READY (or PENDING at the end of a
  backoff cycle, gangs kept whole), LAUNCHING -> READY (placed again),
  PREEMPTING -> RUNNING (a later preemption cycle may pick it again).

Both run under the daemon's lock, on a `TaskBook`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from peloton.core.errors import InvalidArgument
from peloton.core.lifecycle.task_transitions import NOT_LAUNCHED
from peloton.core.model.ids import RunId, TaskId
from peloton.core.ports import HostEvent
from peloton.core.respool.records import TaskRecord
from peloton.core.states import TERMINAL_TASK_STATES, TaskState
from peloton.resmgr.ready import ReadyEntry
from peloton.resmgr.taskbook import TaskBook

S = TaskState

#: How a task the host reports RUNNING gets there from a state where we thought it was not
#: launched yet (a launch timeout fired, then the run started after all).
_TO_RUNNING: dict[TaskState, tuple[TaskState, ...]] = {
    S.READY: (S.PLACED, S.LAUNCHING, S.RUNNING), S.PLACING: (S.PLACED, S.LAUNCHING, S.RUNNING),
    S.PLACED: (S.LAUNCHING, S.RUNNING), S.LAUNCHING: (S.RUNNING,), S.LAUNCHED: (S.RUNNING,)}
#: The host reports a run launched: a LAUNCHING task stops its launch timeout.
_LAUNCH_SEEN = frozenset({S.LAUNCHED, S.STARTING})


def apply_events(book: TaskBook, events: Iterable[HostEvent], now: float,
                 parse: Callable[[str], RunId] = RunId.parse) -> bool:
    """Apply status events in stream order, each as the module docstring says; True if any
    freed allocation.  `parse` reads run ids (a consumer passes its RunIdParser's).  One
    call per batch read from the stream: every task sends three events (STARTING, RUNNING,
    its end), so what is looked up once per batch is not looked up per event."""
    tracker = book.tracker
    get, transition = tracker.get, tracker.transition
    hosts, clear_timeout = book.hosts, book.timeouts.clear
    freed = False
    for event in events:
        try:
            rid = parse(event.run_id)
        except InvalidArgument:
            continue
        task_id = TaskId(rid.job_id, rid.instance)
        rec = get(task_id)
        if rec is None or rec.task.run_id != rid.run:
            continue  # a run we do not track, or an older one
        state = event.state
        if state in TERMINAL_TASK_STATES:
            if rec.state is S.PENDING:
                continue  # queued again (e.g. preempted before start): the queue keeps it
            if state is S.LOST and rec.state in NOT_LAUNCHED:
                continue  # no host had it: a reconciliation's "unknown run" leaves it queued
            book.finish(task_id, state)
            freed = True
            continue
        if event.hostname:
            hosts[task_id] = event.hostname
        if state is S.RUNNING:
            for step in _TO_RUNNING.get(rec.state, ()):
                transition(task_id, step, at=now)
            if rec.state is S.RUNNING:
                book.settle(task_id)
        elif state in _LAUNCH_SEEN and rec.state is S.LAUNCHING:
            transition(task_id, S.LAUNCHED)
            clear_timeout(task_id)
    return freed


def expire(book: TaskBook, now: float) -> int:
    """Apply every state timeout that passed; returns how many tasks fell back."""
    count = 0
    placing: dict[int, list[TaskRecord]] = {}
    for task_id, state in book.timeouts.due(now):
        rec = book.tracker.get(task_id)
        if rec is None or rec.state is not state:
            continue
        count += 1
        if state is S.PLACING:
            limit = book.timeouts.seconds(S.PLACING, rec.placement_attempts)
            book.reasons[task_id] = f"placement did not answer within {limit:g}s"
            placing.setdefault(id(book.ready.owner.get(task_id)), []).append(rec)
        elif state is S.LAUNCHING:
            book.tracker.transition(task_id, S.READY)
            book.reasons[task_id] = (f"not launched within {book.config.launching_timeout:g}s; "
                                     "placing it again")
            book.hosts.pop(task_id, None)
            book.ready.push(ReadyEntry([rec]))
        elif state is S.PREEMPTING:
            # The table has no PREEMPTING -> RUNNING edge: only this timeout takes it.
            # Both states hold the same allocation, so no accounting changes.
            rec.state = S.RUNNING
    for recs in placing.values():
        book.unplaced(recs, now)
    return count
