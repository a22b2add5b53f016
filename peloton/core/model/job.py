"""Jobs: their versioned configuration (JobSpec) and runtime (JobRuntime).

`JobSpec.document` keeps the API request the job was created or last
replaced from (a serialized v0 JobConfig or v1alpha JobSpec, named by
`document_kind`), so a client reading its job back sees every field it
sent, including ones the scheduler does not interpret.  The core never
parses it; only the API converters do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from peloton.core.model.constraints import Label
from peloton.core.model.task import TaskSpec
from peloton.core.states import JobState, JobType, TaskState

#: Largest job Peloton accepts (its cap came from an outage caused by huge partitions).
MAX_INSTANCES_PER_JOB = 100_000


class PlacementStrategy(StrEnum):
    """How a job's tasks are laid out over hosts (v0 JobConfig.placementStrategy).

    UNSET leaves it to the job type: batch work is packed, long-running work
    spread by load.
    """

    UNSET = "UNSET"
    #: Fill hosts: the fullest host that still fits.
    PACK_HOST = "PACK_HOST"
    #: One task of the job per host as far as the hosts go.
    SPREAD_JOB = "SPREAD_JOB"


@dataclass(frozen=True, slots=True)
class SlaSpec:
    """Scheduling promises of a job."""

    priority: int = 0
    preemptible: bool = True
    revocable: bool = False
    maximum_running_instances: int = 0
    minimum_running_instances: int = 0
    max_running_time_secs: int = 0
    maximum_unavailable_instances: int = 0


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One version of a job's configuration."""

    name: str
    type: JobType
    instance_count: int
    default_task: TaskSpec
    respool_id: str = ""
    owner: str = ""
    owning_team: str = ""
    ldap_groups: tuple[str, ...] = ()
    description: str = ""
    labels: tuple[Label, ...] = ()
    sla: SlaSpec = SlaSpec()
    #: Full per-instance specs where an instance differs from the default.
    instance_tasks: Mapping[int, TaskSpec] = field(default_factory=dict)
    version: int = 1
    created_at: float = 0.0
    document_kind: str = ""
    document: bytes = b""
    placement_strategy: PlacementStrategy = PlacementStrategy.UNSET

    def task_spec(self, instance: int) -> TaskSpec:
        """The spec instance `instance` runs with."""
        return self.instance_tasks.get(instance, self.default_task)


@dataclass(frozen=True, slots=True)
class JobRuntime:
    """The mutable state of a job; writes are compare-and-set on `revision`."""

    state: JobState = JobState.INITIALIZED
    goal_state: JobState = JobState.SUCCEEDED
    creation_time: float = 0.0
    start_time: float = 0.0
    completion_time: float = 0.0
    update_time: float = 0.0
    task_stats: Mapping[TaskState, int] = field(default_factory=dict)
    config_version: int = 1
    desired_state_version: int = 1
    state_version: int = 1
    workflow_version: int = 0
    update_id: str = ""
    message: str = ""
    revision: int = 0

    def entity_version(self) -> str:
        """Peloton's entity version string `<config>-<desired state>-<workflow>`."""
        return f"{self.config_version}-{self.desired_state_version}-{self.workflow_version}"


@dataclass(frozen=True, slots=True)
class JobSummary:
    """What job queries return: the indexed fields of a job (no task specs)."""

    job_id: str
    name: str
    type: JobType
    owner: str
    owning_team: str
    respool_id: str
    instance_count: int
    labels: tuple[Label, ...]
    runtime: JobRuntime
    #: Both APIs' job summaries carry the SLA (priority, preemptible, ...).
    sla: SlaSpec = SlaSpec()
