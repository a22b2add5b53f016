"""Workflows (updates): a rolling change of a job from one config version to another."""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.states import WorkflowState, WorkflowType


@dataclass(frozen=True, slots=True)
class UpdateSpec:
    """How a workflow rolls: batch size and failure handling.

    `batch_size` 0 means all instances at once.  `max_instance_attempts` 0
    means unlimited retries per instance; `max_failure_instances` 0 means
    no limit on failed instances.
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
