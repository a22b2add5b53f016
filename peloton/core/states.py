"""The state vocabularies of tasks, jobs, workflows and hosts.

These Enums are the core's words; the API converters map them to the v0
and v1alpha wire enums (TaskState <-> PodState and so on) and to Aurora's
ScheduleStatus.  Transition and goal-state tables built on them live in
their own modules (see peloton/core/lifecycle/).
"""

from __future__ import annotations

from enum import StrEnum


class TaskState(StrEnum):
    """The 17 states of a task run (Peloton v0 TaskState, minus UNKNOWN)."""

    INITIALIZED = "INITIALIZED"
    PENDING = "PENDING"
    READY = "READY"
    PLACING = "PLACING"
    PLACED = "PLACED"
    LAUNCHING = "LAUNCHING"
    LAUNCHED = "LAUNCHED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    LOST = "LOST"
    PREEMPTING = "PREEMPTING"
    KILLING = "KILLING"
    KILLED = "KILLED"
    DELETED = "DELETED"
    RESERVED = "RESERVED"

    @property
    def terminal(self) -> bool:
        """The run has ended (it will never change state again)."""
        return self in TERMINAL_TASK_STATES

    @property
    def owner(self) -> str:
        """Which side reports this state: 'resmgr', 'host' or 'jobmgr'."""
        if self in _RESMGR_OWNED:
            return "resmgr"
        if self in _HOST_OWNED:
            return "host"
        return "jobmgr"


TERMINAL_TASK_STATES = frozenset({
    TaskState.SUCCEEDED, TaskState.FAILED, TaskState.LOST, TaskState.KILLED, TaskState.DELETED})
_RESMGR_OWNED = frozenset({
    TaskState.PENDING, TaskState.READY, TaskState.PLACING, TaskState.PLACED,
    TaskState.LAUNCHING, TaskState.PREEMPTING, TaskState.RESERVED})
_HOST_OWNED = frozenset({
    TaskState.STARTING, TaskState.RUNNING, TaskState.SUCCEEDED, TaskState.FAILED,
    TaskState.LOST, TaskState.KILLED})


class HealthState(StrEnum):
    """Result of a task's health check."""

    INVALID = "INVALID"
    DISABLED = "DISABLED"
    HEALTH_UNKNOWN = "HEALTH_UNKNOWN"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"


class JobType(StrEnum):
    """What kind of work a job is.

    A stateful job is a SERVICE whose task spec has a persistent volume, as in
    Peloton; it is not a separate type on the wire, so not here either.
    """

    BATCH = "BATCH"
    SERVICE = "SERVICE"
    DAEMON = "DAEMON"


class JobState(StrEnum):
    """State of a job, derived from its tasks' states."""

    UNKNOWN = "UNKNOWN"
    INITIALIZED = "INITIALIZED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    KILLING = "KILLING"
    UNINITIALIZED = "UNINITIALIZED"
    DELETED = "DELETED"

    @property
    def terminal(self) -> bool:
        """No task of the job will run again unless the job is started anew."""
        return self in TERMINAL_JOB_STATES


TERMINAL_JOB_STATES = frozenset({
    JobState.SUCCEEDED, JobState.FAILED, JobState.KILLED, JobState.DELETED})


class WorkflowType(StrEnum):
    """Kinds of job workflow (a rolling change to a running job)."""

    UPDATE = "UPDATE"
    RESTART = "RESTART"
    START = "START"
    STOP = "STOP"


class WorkflowState(StrEnum):
    """State of a workflow / update."""

    INITIALIZED = "INITIALIZED"
    ROLLING_FORWARD = "ROLLING_FORWARD"
    PAUSED = "PAUSED"
    SUCCEEDED = "SUCCEEDED"
    ABORTED = "ABORTED"
    FAILED = "FAILED"
    ROLLING_BACKWARD = "ROLLING_BACKWARD"
    ROLLED_BACK = "ROLLED_BACK"

    @property
    def terminal(self) -> bool:
        """The workflow will make no more progress."""
        return self in TERMINAL_WORKFLOW_STATES

    @property
    def active(self) -> bool:
        """The workflow still owns the job (running or paused)."""
        return not self.terminal


TERMINAL_WORKFLOW_STATES = frozenset({
    WorkflowState.SUCCEEDED, WorkflowState.ABORTED, WorkflowState.FAILED,
    WorkflowState.ROLLED_BACK})


class HostState(StrEnum):
    """Maintenance state of a host."""

    UNKNOWN = "UNKNOWN"
    UP = "UP"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"
    DOWN = "DOWN"
