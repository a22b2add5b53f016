"""Small stored records that only the storage gateway and the daemons exchange.

These are the remaining tables of Peloton's storage (secrets, persistent
volumes, framework registration, the job-name history) as frozen values,
plus the per-version set of task configs.  Like every model type they are
plain data: the storage codec turns them into JSON and back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from peloton.core.model.task import TaskSpec


class VolumeState(StrEnum):
    """States of a persistent volume, as Peloton names them."""

    INITIALIZED = "INITIALIZED"
    CREATED = "CREATED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class SecretInfo:
    """A secret mounted into a job's containers; `data` is opaque (base64 in the API)."""

    secret_id: str
    job_id: str
    path: str
    data: str
    version: int = 0
    valid: bool = True
    creation_time: float = 0.0


@dataclass(frozen=True, slots=True)
class VolumeInfo:
    """A persistent volume reserved on a host for one instance of a stateful job."""

    volume_id: str
    job_id: str
    instance: int
    hostname: str
    state: VolumeState = VolumeState.INITIALIZED
    goal_state: VolumeState = VolumeState.CREATED
    container_path: str = ""
    size_mb: float = 0.0
    create_time: float = 0.0
    update_time: float = 0.0


@dataclass(frozen=True, slots=True)
class FrameworkInfo:
    """What the host manager registered with its cluster manager (Mesos framework id, stream)."""

    name: str
    framework_id: str = ""
    stream_id: str = ""
    update_time: float = 0.0
    update_host: str = ""


@dataclass(frozen=True, slots=True)
class JobNameEntry:
    """One row of the job-name history: `name` was given to `job_id` at `time`."""

    name: str
    job_id: str
    time: float = 0.0


@dataclass(frozen=True, slots=True)
class TaskConfigSet:
    """The task configs of one job config version: a default plus per-instance overrides."""

    job_id: str
    version: int
    default: TaskSpec | None
    overrides: Mapping[int, TaskSpec] = field(default_factory=dict)

    def for_instance(self, instance: int) -> TaskSpec | None:
        """The spec `instance` runs with at this version (None if neither is stored)."""
        return self.overrides.get(instance, self.default)
