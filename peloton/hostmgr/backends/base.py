"""The HostBackend seam: how the host manager reaches the machines that run tasks.

A backend reports hosts and task status to a `HostEventListener` and
carries out launches and kills.  Status delivery is *at least once*: a
backend re-delivers an update until the host manager calls
`acknowledge()` for it, which the host manager does only after every
consumer of its event stream has processed (and persisted) the update.
Consumers therefore deduplicate by `StatusUpdate.uuid` and by run id.

Implementations: `local` (our agents over gRPC, local.py), `sim` (virtual
hosts on an injectable clock, sim.py), `mesos` (Mesos' HTTP API).  All pass
tests/contract/test_host_backend.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.states import HealthState, TaskState


@dataclass(frozen=True, slots=True)
class BackendHost:
    """A machine as its backend describes it."""

    hostname: str
    agent_id: str
    capacity: Resources
    ports: tuple[PortRange, ...] = ()
    labels: tuple[Label, ...] = ()
    revocable_cpu: float = 0.0
    #: Where the host can be reached (backend specific; may be empty).
    address: str = ""
    #: "host:port" of the host's HTTP file server (Mesos-style `/files/download?path=`),
    #: which `task logs` reads sandboxes from; empty if the host has none.
    file_address: str = ""
    #: False while the host takes no new runs but keeps (and can still kill) the ones it has:
    #: a cordoned Kubernetes node.  Not offered to placement, launches on it are refused.
    schedulable: bool = True


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A state change of one run, as reported by the host that runs it.

    `state` is one of STARTING, RUNNING, SUCCEEDED, FAILED, KILLED, LOST.
    `healthy` is set on RUNNING updates of runs with a health check
    (HEALTH_UNKNOWN until the first verdict, then HEALTHY/UNHEALTHY on each
    change, with reason REASON_TASK_HEALTH_CHECK_STATUS_UPDATED).
    `uuid` identifies the state change: a re-delivery carries the same one
    (the local backend keeps it stable even across agent restarts), so
    equal uuids mean the same event.  `reason` uses Mesos' names (e.g.
    REASON_CONTAINER_LIMITATION_MEMORY); `exit_code` is set when the task's
    process exited on its own.  `hostname` and `agent_id` are empty on a
    LOST update for a run no host knows.
    """

    uuid: str
    run_id: str
    state: TaskState
    hostname: str
    agent_id: str
    timestamp: float
    message: str = ""
    reason: str = ""
    exit_code: int | None = None
    healthy: HealthState | None = None


class HostEventListener(Protocol):
    """Receives what backends observe; called from backend greenlets, must not block long."""

    def host_up(self, host: BackendHost) -> None:
        """A host registered or re-registered (capacity or labels may have changed)."""

    def host_gone(self, hostname: str, reason: str) -> None:
        """A host stopped answering or deregistered; its runs will be reported LOST or re-reported."""

    def host_seen(self, hostname: str) -> None:
        """A registered host gave a sign of life (a heartbeat, a status report): one that a
        launch could not get to is offered again.  Cheap (called on every heartbeat); a
        backend that hears no heartbeats need not call it (the host manager gives up
        holding such a host after a while)."""

    def status_update(self, update: StatusUpdate) -> None:
        """A run changed state; re-delivered until acknowledged."""

    def status_updates(self, updates: Sequence[StatusUpdate]) -> None:
        """Several updates, in order: the same as `status_update` for each, in one call (a
        backend that learns of many changes at once saves the per-call work)."""


class HostBackend(Protocol):
    """Launches and kills runs on hosts and reports what happens to them."""

    name: str

    def start(self, listener: HostEventListener) -> None:
        """Begin accepting hosts and reporting events to `listener`."""

    def stop(self) -> None:
        """Stop reporting; running tasks keep running (they are re-reported on the next start)."""

    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Start `tasks` on `hostname`. Raises NotFound for an unknown host, Unavailable if it
        cannot be reached; a task that fails to start is reported as a FAILED status update."""

    def kill(self, hostname: str, run_ids: Sequence[str], grace_secs: float) -> None:
        """Stop runs (SIGTERM, then SIGKILL after `grace_secs`); each ends with a KILLED update.
        Killing an unknown or finished run is not an error (idempotent); an unknown host
        raises NotFound and an unreachable one Unavailable, as for launch."""

    def acknowledge(self, updates: Sequence[StatusUpdate]) -> None:
        """Every consumer has processed these updates; the backend may forget them."""

    def reconcile(self, run_ids: Sequence[str] | None = None) -> None:
        """Ask hosts to re-report the current status of `run_ids` (all runs if None; an
        empty list asks for nothing).  Asynchronous: answers arrive as status updates.
        Runs no host knows are reported LOST -- only once hosts had time to (re-)register
        after the backend started, and never while a host could not be asked."""

    def list_sandbox(self, hostname: str, run_id: str, path: str = "") -> list[tuple[str, int]]:
        """(name, size) of files under a run's sandbox directory `path`."""

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Bytes of a sandbox file (e.g. stdout, stderr)."""


@runtime_checkable
class CordoningBackend(Protocol):
    """A backend whose machines can be marked to take no new work while the host manager
    drains them for maintenance (Kubernetes: cordon), so other schedulers sharing them keep
    away too.  Backends whose hosts only we use need not be told."""

    def cordon(self, hostname: str, unschedulable: bool) -> None:
        """Mark the host (un)schedulable for everyone; failures are logged, not raised."""


@runtime_checkable
class VolumeBackend(Protocol):
    """A backend whose hosts keep persistent volumes of stateful runs on their own disks
    (our agents: peloton/agent/volumes.py), created with a run's launch
    (`LaunchSpec.volume_id`).  The host manager asks it to remove them when the job
    manager says so; a backend without volumes has nothing to remove."""

    def destroy_volumes(self, hostname: str, volume_ids: Sequence[str]) -> list[str]:
        """Remove volumes from a host; idempotent (an absent one counts as removed).
        Returns the ones kept because a live run there still uses them.  NotFound for a
        host not registered now, Unavailable for one that cannot be reached."""
