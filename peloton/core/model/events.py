"""Pod events: the history of every run of every task."""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.states import HealthState, TaskState


@dataclass(frozen=True, slots=True)
class PodEvent:
    """One state change of one run of a task, kept for `task events` / GetPodEvents."""

    job_id: str
    instance: int
    run_id: int
    state: TaskState
    goal_state: TaskState
    time: float
    prev_run_id: int = 0
    desired_run_id: int = 0
    host: str = ""
    agent_id: str = ""
    config_version: int = 0
    desired_config_version: int = 0
    message: str = ""
    reason: str = ""
    healthy: HealthState = HealthState.INVALID
