"""Task and gang records held by the resource manager.

`RmTask` is the frozen value the job manager enqueues (Peloton's
`resmgr.Task`): the placement request plus the scheduling facts admission
needs.  `TaskRecord` and `Gang` are the resource manager's own mutable,
slotted records; a million pending tasks must fit in well under 1.5 GB, so
they hold references to shared values (the job's `PlacementNeeds` and
`Resources`) rather than copies, and nothing per task is a dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from peloton.core.model.ids import TaskId
from peloton.core.model.resources import ZERO, Resources
from peloton.core.placement.request import TaskRequest
from peloton.core.states import JobType, TaskState

if TYPE_CHECKING:
    from peloton.core.respool.node import PoolNode
    from peloton.core.respool.queues import GangQueue, ShapeRun

#: What admission compares gangs by: need in fixed-point units, revocable, preemptible,
#: controller.  Gangs of one shape get the same answer from every admitter.
Shape = tuple[tuple[int, int, int, int], bool, bool, bool]


@dataclass(frozen=True, slots=True)
class RmTask:
    """A task as the job manager hands it to the resource manager."""

    request: TaskRequest
    run_id: int = 1
    priority: int = 0
    preemptible: bool = True
    controller: bool = False

    @property
    def task_id(self) -> TaskId:
        """The task's id."""
        return self.request.task_id

    @property
    def resources(self) -> Resources:
        """What the task needs."""
        return self.request.needs.resources

    @property
    def revocable(self) -> bool:
        """Runs on slack (revocable) cpu."""
        return self.request.needs.revocable


class TaskRecord:
    """The resource manager's live record of one task run.

    `state` follows the rmtask table (lifecycle/task_transitions.py).  A
    record holds allocation in its pool exactly while `state` is one of
    `ALLOCATED_STATES`; it is in a queue exactly while PENDING.
    """

    __slots__ = ("gang", "placement_attempts", "pool", "start_time", "state", "task")

    def __init__(self, task: RmTask, pool: PoolNode) -> None:
        self.task = task
        self.state = TaskState.PENDING
        self.pool = pool
        self.gang: Gang | None = None
        self.start_time = 0.0
        self.placement_attempts = 0

    # The preemption planner reads these through its Protocol.
    @property
    def resources(self) -> Resources:
        """What the task needs."""
        return self.task.request.needs.resources

    @property
    def priority(self) -> int:
        """Higher runs first; lower is preempted first."""
        return self.task.priority

    @property
    def preemptible(self) -> bool:
        """May be preempted to give resources back."""
        return self.task.preemptible

    @property
    def revocable(self) -> bool:
        """Runs on slack cpu."""
        return self.task.request.needs.revocable

    @property
    def task_id(self) -> TaskId:
        """The task's id."""
        return self.task.request.task_id

    def __repr__(self) -> str:
        return f"TaskRecord({self.task_id}, {self.state.value})"


class Gang:
    """Tasks admitted together or not at all; every task shares the gang's flags.

    `need` is the sum of the live tasks' resources.  Killed tasks stay in
    `tasks` until the gang reaches the head of its queue (lazy removal, as
    Peloton does), but are already subtracted from `need` and from demand.
    """

    __slots__ = ("controller", "need", "preemptible", "priority", "queue", "refused_since",
                 "revocable", "run", "tasks")

    def __init__(self, tasks: list[TaskRecord]) -> None:
        first = tasks[0].task
        self.tasks = tasks
        self.priority = first.priority
        self.preemptible = first.preemptible
        self.revocable = first.revocable
        self.controller = first.controller
        #: When admission first refused the gang (None: never yet); see admission.py.
        self.refused_since: float | None = None
        #: The queue holding the gang (None: not queued) and the run of its shape it is
        #: counted in there (None: not counted); both kept by `GangQueue` (queues.py).
        self.queue: GangQueue | None = None
        self.run: ShapeRun | None = None
        if len(tasks) == 1:
            self.need = first.resources
        else:
            need = ZERO
            for rec in tasks:
                need = need + rec.task.resources
            self.need = need

    def live(self) -> list[TaskRecord]:
        """Tasks not killed while queued."""
        return [t for t in self.tasks if t.state is TaskState.PENDING]

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"Gang({[str(t.task_id) for t in self.tasks]}, prio={self.priority})"


def gang_instances(instances: Sequence[int], *, job_type: JobType, revocable: bool,
                   minimum_running_instances: int) -> list[list[int]]:
    """Group a job's instances into gangs the way Peloton's job manager does.

    Instances below `minimum_running_instances` of a batch (non-service),
    non-revocable job with a minimum above 1 form one gang, listed first;
    every other instance is a gang of its own.
    """
    if (job_type is JobType.SERVICE or revocable or minimum_running_instances <= 1):
        return [[i] for i in instances]
    together = [i for i in instances if i < minimum_running_instances]
    rest = [[i] for i in instances if i >= minimum_running_instances]
    return ([together] if together else []) + rest
