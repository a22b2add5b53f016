"""What placement is asked to do: tasks with their needs, grouped into gangs.

`PlacementNeeds` is everything that decides *which* hosts can take a task
and how they are ranked.  Tasks of one job normally share one needs value,
which lets the placer cache verdicts per needs and stop searching for a
needs value that already failed in this call.  Per-task facts (the labels it
adds to its host, a desired host) live on `TaskRequest` so they do not
break that sharing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Constraint, Label
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources


class Strategy(StrEnum):
    """How hosts are ranked for a task."""

    #: Best fit: the host with the least free cpu that still fits (batch work; defragments).
    PACK = "PACK"
    #: Least loaded: the host with the most free cpu (services; spreads failure domains).
    SPREAD = "SPREAD"
    #: Peloton's SPREAD_JOB: the host holding the fewest tasks of the same job first (so a
    #: job gets one task per host as far as the hosts go), then the most free cpu.  The
    #: job's tasks carry `job_label(job_id)`, which is what hosts count.
    SPREAD_JOB = "SPREAD_JOB"


#: Key of the task label that marks the tasks of a SPREAD_JOB job (value: the job id).
JOB_LABEL_KEY = "peloton/job"


def job_label(job_id: str) -> Label:
    """The task label a SPREAD_JOB job's tasks carry, counted per host by placement."""
    return Label(JOB_LABEL_KEY, job_id)


@dataclass(frozen=True, slots=True)
class PlacementNeeds:
    """The part of a task that decides where it may go (shared by a job's tasks)."""

    resources: Resources
    #: Number of dynamic ports the host must pick.
    ports: int = 0
    #: Revocable tasks run on slack cpu; their memory, disk and gpu are regular.
    revocable: bool = False
    constraint: Constraint | None = None
    strategy: Strategy = Strategy.PACK

    def __post_init__(self) -> None:
        if self.ports < 0:
            raise InvalidArgument("ports must be >= 0", field="ports")
        if self.resources.any_negative():
            raise InvalidArgument(f"negative resources {self.resources}", field="resources")


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """One task to place.

    `labels` are added to the host's task-label counts once placed, which is
    what task-kind constraints ("at most one instance of this job per host")
    count.  `desired_host` is tried first; with `desired_host_only` no other
    host is acceptable (used until an in-place update's host-hold deadline).
    """

    task_id: TaskId
    needs: PlacementNeeds
    labels: tuple[Label, ...] = ()
    desired_host: str = ""
    desired_host_only: bool = False


@dataclass(frozen=True, slots=True)
class GangRequest:
    """Tasks that are placed all together or not at all."""

    tasks: tuple[TaskRequest, ...]

    @staticmethod
    def single(task: TaskRequest) -> GangRequest:
        """A gang of one task (what most tasks are)."""
        return GangRequest((task,))
