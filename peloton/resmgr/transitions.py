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

from collections.abc import Callable

from peloton.core.errors import InvalidArgument
from peloton.core.lifecycle.task_transitions import NOT_LAUNCHED
from peloton.core.model.ids import RunId
from peloton.core.ports import HostEvent
from peloton.core.respool.records import TaskRecord
from peloton.core.states import TaskState
from peloton.resmgr.ready import ReadyEntry
from peloton.resmgr.taskbook import TaskBook

S = TaskState

#: How a task the host reports RUNNING gets there from a state where we thought it was not
#: launched yet (a launch timeout fired, then the run started after all).
_TO_RUNNING: dict[TaskState, tuple[TaskState, ...]] = {
    S.READY: (S.PLACED, S.LAUNCHING, S.RUNNING), S.PLACING: (S.PLACED, S.LAUNCHING, S.RUNNING),
    S.PLACED: (S.LAUNCHING, S.RUNNING), S.LAUNCHING: (S.RUNNING,), S.LAUNCHED: (S.RUNNING,)}


def apply_event(book: TaskBook, event: HostEvent, now: float,
                parse: Callable[[str], RunId] = RunId.parse) -> bool:
    """Apply one status event; True if it freed allocation.  `parse` reads the run id (a
    consumer passes its RunIdParser's)."""
    try:
        rid = parse(event.run_id)
    except InvalidArgument:
        return False
    task_id = rid.task
    rec = book.tracker.get(task_id)
    if rec is None or rec.task.run_id != rid.run:
        return False  # a run we do not track, or an older one
    state = event.state
    if state.terminal:
        if rec.state is S.PENDING:
            return False  # queued again (e.g. preempted before start): the queue keeps it
        if state is S.LOST and rec.state in NOT_LAUNCHED:
            return False  # no host had it: a reconciliation's "unknown run" leaves it queued
        book.finish(task_id, state)
        return True
    if event.hostname:
        book.hosts[task_id] = event.hostname
    if state is S.RUNNING:
        for step in _TO_RUNNING.get(rec.state, ()):
            book.tracker.transition(task_id, step, at=now)
        if rec.state is S.RUNNING:
            book.settle(task_id)
    elif state in (S.LAUNCHED, S.STARTING) and rec.state is S.LAUNCHING:
        book.tracker.transition(task_id, S.LAUNCHED)
        book.timeouts.clear(task_id)
    return False


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
