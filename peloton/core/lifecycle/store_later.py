"""Which host reports a job manager may keep in its cache and store with the run's next change.

Every state change of a task is a compare-and-set and a pod event in the store.  A run's
STARTING is followed within a second or so by RUNNING (or by its end) on most hosts, and
storing it on its own cost a whole write a task (issue 24, docs/design/per-task-cost.md).
So a report in `KEPT_FROM` may wait in the owning job manager's cache (its goal-state
engines and reads see it at once) and is stored, with its own pod event and timestamp, in
the run's next write, or alone once it has waited `JobManagerConfig.store_later_secs`.

What waiting costs, and why STARTING only:
- A job manager that dies before storing it leaves the run LAUNCHED in the store.  Its
  successor reconciles the run with the host manager, which re-reports what it last heard
  (STARTING or later) because it differs from the LAUNCHED handed to it.  The launch timeout
  treats LAUNCHED and STARTING alike.  One case narrows: a run whose host is lost before
  that re-report reaches the successor ends LOST from LAUNCHED, which run_end.py does not
  count against the task (`LOST_BEFORE_START`), so that task gets one try more than its
  `maxFailures`.  A job manager handing its partitions over stores what it kept first.
- Another job manager reading the store sees LAUNCHED for a moment (at most the bound).
- Only a report that moves a run on from LAUNCHED waits: RUNNING and the ends are what
  users, workflows and the restart policy act on, and are stored at once.
"""

from __future__ import annotations

from peloton.core.model.task import TaskRuntime
from peloton.core.states import TaskState

S = TaskState

#: Reported state -> the states of the same run it may be kept from (empty: store at once).
#: Every state has a row; a test walks them all.
KEPT_FROM: dict[TaskState, frozenset[TaskState]] = {
    S.INITIALIZED: frozenset(),
    S.PENDING: frozenset(),
    S.READY: frozenset(),
    S.PLACING: frozenset(),
    S.PLACED: frozenset(),
    S.LAUNCHING: frozenset(),
    S.LAUNCHED: frozenset(),
    # The host has the run and is starting it: nothing acts on it that LAUNCHED does not.
    S.STARTING: frozenset({S.LAUNCHED}),
    S.RUNNING: frozenset(),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.LOST: frozenset(),
    S.PREEMPTING: frozenset(),
    S.KILLING: frozenset(),
    S.KILLED: frozenset(),
    S.DELETED: frozenset(),
    S.RESERVED: frozenset(),
}
assert set(KEPT_FROM) == set(TaskState)


def may_keep(before: TaskRuntime, after: TaskRuntime) -> bool:
    """May `after` (a host report applied to `before`) wait in the cache, unstored, for the
    run's next write?  Only a change of state within the same run, as `KEPT_FROM` says."""
    return (after.run_id == before.run_id and after.goal_state is before.goal_state
            and before.state in KEPT_FROM[after.state])
