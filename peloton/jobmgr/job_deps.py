"""What every cached job is wired to: storage, group commit, the goal-state queue, the
clock, the listeners told of its changes, and the task write locks (one set per job manager).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from peloton.common.clock import Clock
from peloton.core.model.task import TaskRuntime
from peloton.jobmgr.goalstate.queue import GoalStateQueue
from peloton.jobmgr.task_configs import TaskConfigCache
from peloton.jobmgr.task_locks import TaskWriteLocks
from peloton.storage import GroupCommitter, Store

if TYPE_CHECKING:
    from peloton.jobmgr.aggregate import CachedJob

#: Told (job, instance, runtime) after a cached job takes on a task runtime.
TaskListener = Callable[["CachedJob", int, TaskRuntime], None]
#: Told (job) after a cached job's runtime or workflow changed.
JobListener = Callable[["CachedJob"], None]


class Listeners:
    """Callbacks of the jobs in one cache; called on the job manager's hub, must not block."""

    __slots__ = ("job", "task")

    def __init__(self) -> None:
        self.task: list[TaskListener] = []
        self.job: list[JobListener] = []


@dataclass(frozen=True, slots=True)
class JobDeps:
    """What every cached job writes to, tells and reads the time from (one per job manager)."""

    store: Store
    committer: GroupCommitter
    queue: GoalStateQueue
    clock: Clock
    listeners: Listeners
    task_locks: TaskWriteLocks = field(default_factory=TaskWriteLocks)
    #: The cached jobs' per-instance task specs, within a byte budget (task_configs.py).
    task_configs: TaskConfigCache = field(default_factory=TaskConfigCache)
