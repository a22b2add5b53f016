"""The outcome of a task write: done, retried, or a conflict the caller must act on.

`CachedJob.write_tasks` compare-and-sets each task's runtime; a lost
compare-and-set reloads the runtime and re-derives the change from it, for up
to `TASK_ROUNDS` rounds (aggregate.py).  Within one job manager the task write
locks (task_locks.py) make that rare; another process writing the same task (a
deposed leader, an operator's tool) can still win every round.  The aggregate
then stops and says so, in the value it returns: nothing is given up behind the
caller's back (Nomad's retryMax: retry while progress is made, then a typed
give-up the caller must handle).

Every caller does one of three things with a CONFLICT, never nothing
(tests/unit/jobmgr/test_task_write_outcomes.py fails on a call whose result is
dropped):
- **retries**: calls `write_tasks` again; the change is re-derived from the
  runtime stored now (the kill, `retry_until_stored`);
- **re-queues** the entity: a goal-state action raises `TaskWriteConflict`
  (`stored()` does it), and the engine evaluates the key again after its
  backoff; a loop raises it and the status stream is re-delivered
  (common/loop.py); a task is handed to the task engine (`enqueue_task`);
- **raises** to its caller: an API operation answers Conflict (retry).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from peloton.core.errors import Conflict
from peloton.core.model.task import TaskRuntime


class WriteStatus(enum.Enum):
    """How a task write ended."""

    #: Every change was stored (or needed no write) on its first compare-and-set.
    DONE = "done"
    #: Every change was stored, some after lost compare-and-sets (`rounds` > 1).
    RETRIED = "retried"
    #: Some changes were not stored: `unwritten`.  The caller must act.
    CONFLICT = "conflict"


class TaskWriteConflict(Conflict):
    """Task changes that kept losing their compare-and-set; the key is evaluated again."""

    def __init__(self, job_id: str, unwritten: frozenset[int], rounds: int) -> None:
        super().__init__(f"job {job_id}: instances {sorted(unwritten)} changed under "
                         f"{rounds} writes in a row; retry")
        self.job_id = job_id
        self.unwritten = unwritten


@dataclass(frozen=True, slots=True)
class TaskWriteOutcome:
    """What a task write stored and what it could not (see the module docstring)."""

    job_id: str
    #: Runtimes stored, by instance (instances whose change returned None are not here).
    written: Mapping[int, TaskRuntime] = field(default_factory=dict)
    #: Instances whose change was not stored: they lost every compare-and-set round.
    unwritten: frozenset[int] = frozenset()
    #: Compare-and-set rounds taken (1: no conflict).
    rounds: int = 1

    @property
    def status(self) -> WriteStatus:
        """DONE, RETRIED or CONFLICT."""
        if self.unwritten:
            return WriteStatus.CONFLICT
        return WriteStatus.RETRIED if self.rounds > 1 else WriteStatus.DONE

    @property
    def conflict(self) -> bool:
        """Whether some change was not stored."""
        return bool(self.unwritten)

    def get(self, instance: int) -> TaskRuntime | None:
        """The runtime stored for `instance`, or None (nothing to write, or unwritten)."""
        return self.written.get(instance)

    def error(self) -> TaskWriteConflict:
        """The conflict as an error (for a caller that raises it after acting on the rest)."""
        return TaskWriteConflict(self.job_id, self.unwritten, self.rounds)

    def stored(self) -> Mapping[int, TaskRuntime]:
        """The runtimes stored; raises TaskWriteConflict if some change was not (a goal-state
        action then fails and its key is evaluated again after the engine's backoff)."""
        if self.unwritten:
            raise self.error()
        return self.written


#: Calls of `write_tasks` a kill makes before it leaves the job to the engine's retry.
KILL_ATTEMPTS = 3


def retry_until_stored(write: Callable[[Collection[int]], object],
                       instances: Collection[int], attempts: int = KILL_ATTEMPTS) -> None:
    """Call `write(instances)`, which raises TaskWriteConflict for what it could not store
    (`write_tasks(...).stored()`, or a RunControl method), then `write(unwritten)` while
    it does, at most `attempts` calls in all.  Each call derives its changes from the
    runtimes stored now.  Still unwritten after that: the last TaskWriteConflict (raised
    from a goal-state action, the key is evaluated again after the engine's backoff)."""
    todo = instances
    for attempt in range(1, attempts + 1):
        try:
            write(todo)
            return
        except TaskWriteConflict as err:
            if attempt == attempts:
                raise
            todo = sorted(err.unwritten)
