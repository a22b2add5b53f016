"""Workflows (updates): a rolling change of a job from one config version to another."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from peloton.core.states import WorkflowState, WorkflowType


class Strategy(StrEnum):
    """How instances are grouped as a workflow rolls (Aurora's update strategies).

    QUEUE keeps up to the batch size of instances in flight, starting another as
    soon as one is done (Peloton's only way, and Aurora's queueStrategy); BATCH
    starts a group of the batch size and waits until the whole group is done
    (Aurora's batchStrategy); VAR_BATCH does the same with `group_sizes` in turn,
    the last size repeating (Aurora's varBatchStrategy).
    """

    QUEUE = "QUEUE"
    BATCH = "BATCH"
    VAR_BATCH = "VAR_BATCH"


@dataclass(frozen=True, slots=True)
class UpdateSpec:
    """How a workflow rolls: strategy, batch size, watch time and failure handling.

    `batch_size` 0 means all instances at once.  `max_instance_attempts` 0
    means unlimited retries per instance; `max_failure_instances` 0 means
    no limit on failed instances.  The rest is our extension of Peloton's
    UpdateSpec (Aurora's JobUpdateSettings): `strategy` and `group_sizes`
    (VAR_BATCH), `autopause` (a BATCH or VAR_BATCH update rolling forward pauses
    itself before each batch after the first), and `watch_secs`: an instance
    counts as updated only once its new run has stayed RUNNING (and HEALTHY,
    when it has a health check) that long, and a run that ends inside it is a
    failure of the instance.
    """

    batch_size: int = 0
    batch_percentage: float = 0.0
    rollback_on_failure: bool = False
    max_instance_attempts: int = 0
    max_failure_instances: int = 0
    start_paused: bool = False
    in_place: bool = False
    start_tasks: bool = False
    stop_before_update: bool = False
    strategy: Strategy = Strategy.QUEUE
    group_sizes: tuple[int, ...] = ()
    autopause: bool = False
    watch_secs: float = 0.0
    #: The workflow undoes an update (a rollback started as a new workflow): it rolls as a
    #: rollback does (update_plan: highest instance first, no auto-pause).
    rollback_order: bool = False


@dataclass(frozen=True, slots=True)
class UpdateInfo:
    """A stored workflow and its progress; writes are compare-and-set on `revision`."""

    update_id: str
    job_id: str
    type: WorkflowType
    state: WorkflowState
    spec: UpdateSpec
    prev_state: WorkflowState = WorkflowState.INITIALIZED
    config_version: int = 0
    prev_config_version: int = 0
    instances_total: int = 0
    instances_added: tuple[int, ...] = ()
    instances_updated: tuple[int, ...] = ()
    instances_removed: tuple[int, ...] = ()
    instances_done: tuple[int, ...] = ()
    instances_failed: tuple[int, ...] = ()
    instances_current: tuple[int, ...] = ()
    opaque_data: str = ""
    message: str = ""
    creation_time: float = 0.0
    update_time: float = 0.0
    completion_time: float = 0.0
    rollback: bool = False
    #: Instances touched when the workflow last paused itself after a batch (-1: never);
    #: a resumed workflow starts that batch instead of pausing again.
    autopaused_at: int = -1
    revision: int = 0


@dataclass(frozen=True, slots=True)
class WorkflowEvent:
    """One state change of a workflow, or of one instance within it."""

    update_id: str
    instance: int | None
    type: WorkflowType
    state: WorkflowState
    time: float
    message: str = ""
