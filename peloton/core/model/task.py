"""What a task is asked to be (TaskSpec) and what it currently is (TaskRuntime).

The spec is the typed projection of a task config that scheduling and the
agent need; the API layer keeps the request document the user sent (see
`JobSpec.document`) so that nothing a client stored is lost in translation.
The runtime is the mutable record of the current run; every write of it is
a compare-and-set on `revision`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from peloton.core.model.constraints import Constraint, Label
from peloton.core.model.resources import Resources
from peloton.core.states import HealthState, TaskState


@dataclass(frozen=True, slots=True)
class PortSpec:
    """A named port; value 0 asks for a dynamic port from the host's ranges."""

    name: str
    value: int = 0
    env_name: str = ""

    @property
    def dynamic(self) -> bool:
        """The host picks the port number."""
        return self.value == 0


@dataclass(frozen=True, slots=True)
class UriSpec:
    """A file fetched onto the host for each run before it starts (Mesos' CommandInfo.URI,
    Peloton's `command.uris`).  With `cache` it is an immutable remote volume: fetched once
    per host into a read-only cache and linked into every run's sandbox
    (peloton/core/remote_volume.py says how a URI is read, peloton/agent/remote_volumes.py
    how it is fetched)."""

    value: str
    executable: bool = False
    extract: bool = True
    cache: bool = False
    output_file: str = ""


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """The process to run: a shell line, or argv when shell is False."""

    value: str = ""
    shell: bool = True
    arguments: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    uris: tuple[UriSpec, ...] = ()
    user: str = ""


class HealthCheckType(StrEnum):
    """How health is probed."""

    COMMAND = "COMMAND"
    HTTP = "HTTP"
    GRPC = "GRPC"


@dataclass(frozen=True, slots=True)
class HealthCheckSpec:
    """A periodic probe; `max_consecutive_failures` failures in a row mean UNHEALTHY."""

    type: HealthCheckType = HealthCheckType.COMMAND
    enabled: bool = True
    initial_interval_secs: float = 15.0
    interval_secs: float = 10.0
    timeout_secs: float = 20.0
    max_consecutive_failures: int = 3
    command: str = ""
    http_scheme: str = "http"
    http_port: int = 0
    http_path: str = "/"


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How many failed runs a batch task may have before it is given up on."""

    max_failures: int = 0


@dataclass(frozen=True, slots=True)
class VolumeSpec:
    """A persistent volume: the task that owns it is sticky to its host."""

    container_path: str
    size_mb: float


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """The typed projection of one instance's configuration."""

    name: str = ""
    resources: Resources = Resources()
    fd_limit: int = 0
    ports: tuple[PortSpec, ...] = ()
    command: CommandSpec = CommandSpec()
    container_image: str = ""
    executor_data: bytes = b""
    constraint: Constraint | None = None
    health_check: HealthCheckSpec | None = None
    restart_policy: RestartPolicy = RestartPolicy()
    labels: tuple[Label, ...] = ()
    controller: bool = False
    kill_grace_period_secs: float = 5.0
    preemptible: bool = True
    kill_on_preempt: bool = False
    revocable: bool = False
    volume: VolumeSpec | None = None

    @property
    def health_checked(self) -> bool:
        """Has an enabled health check: its runs start HEALTH_UNKNOWN and an update waits
        for HEALTHY.  A disabled check counts as none (Peloton: HealthState DISABLED)."""
        return self.health_check is not None and self.health_check.enabled

    @property
    def stateful(self) -> bool:
        """Owns a persistent volume (so it must never move silently or run twice)."""
        return self.volume is not None

    @property
    def footprint(self) -> Resources:
        """What the task holds on its host and in its pool: its resources, plus its
        persistent volume's size as disk (the volume is disk the host must have free)."""
        if self.volume is None:
            return self.resources
        return self.resources + Resources(disk_mb=self.volume.size_mb)

    @property
    def dynamic_port_count(self) -> int:
        """Ports the host must pick for this task."""
        return sum(1 for p in self.ports if p.dynamic)


class TerminationReason(StrEnum):
    """Why a run ended or was stopped (Peloton TerminationStatus.Reason, trimmed)."""

    NONE = "NONE"
    KILLED_ON_REQUEST = "KILLED_ON_REQUEST"
    FAILED = "FAILED"
    KILLED_HOST_MAINTENANCE = "KILLED_HOST_MAINTENANCE"
    PREEMPTED_RESOURCES = "PREEMPTED_RESOURCES"
    DEADLINE_TIMEOUT_EXCEEDED = "DEADLINE_TIMEOUT_EXCEEDED"
    KILLED_FOR_UPDATE = "KILLED_FOR_UPDATE"
    KILLED_FOR_RESTART = "KILLED_FOR_RESTART"


@dataclass(frozen=True, slots=True)
class TaskRuntime:
    """The current run of a task and where it is going."""

    state: TaskState = TaskState.INITIALIZED
    goal_state: TaskState = TaskState.SUCCEEDED
    run_id: int = 1
    prev_run_id: int = 0
    desired_run_id: int = 1
    host: str = ""
    agent_id: str = ""
    ports: tuple[tuple[str, int], ...] = ()
    start_time: float = 0.0
    completion_time: float = 0.0
    message: str = ""
    reason: str = ""
    exit_code: int | None = None
    failure_count: int = 0
    config_version: int = 0
    desired_config_version: int = 0
    healthy: HealthState = HealthState.DISABLED
    #: When the current run's health check last turned HEALTHY (0: not healthy now); an
    #: update's watch time counts from it for a task with a health check.
    healthy_time: float = 0.0
    desired_host: str = ""
    termination: TerminationReason = TerminationReason.NONE
    update_time: float = 0.0
    revision: int = 0

    @property
    def terminal(self) -> bool:
        """The current run has ended."""
        return self.state.terminal


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A task's identity, spec and runtime together (a read model, never stored as such)."""

    job_id: str
    instance: int
    spec: TaskSpec
    runtime: TaskRuntime = field(default_factory=TaskRuntime)
