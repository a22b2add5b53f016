"""Values that travel between the daemons (job manager, resource manager,
placement engine, host manager) on the scheduling path.

They are the payloads of the ports in peloton/core/ports.py: the same
values cross an in-process call in `peloton up` and a gRPC call between
separate processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from peloton.core.model.constraints import Label
from peloton.core.model.host import HostOffer
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.task import TaskSpec
from peloton.core.placement.request import GangRequest


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """One run to start: its id `<job>-<instance>-<run>`, its spec and assigned ports, and the
    id of its job's resource pool (a backend may place the run by it: a Kubernetes namespace)."""

    run_id: str
    spec: TaskSpec
    ports: tuple[tuple[str, int], ...] = ()
    pool: str = ""
    #: The persistent volume of a stateful run (empty without one), and whether an earlier
    #: run already created it on this host (then a host without it has lost it).
    volume_id: str = ""
    volume_created: bool = False


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """A run the host manager could not hand to its host, and why.

    `unreached`: the launch did not get to the host: it is not registered or not
    connected, or it could not be reached (an agent killed -9 refuses connections until
    its heartbeats time out).  The run did not start there as far as anyone knows (one
    that did, after a call that timed out, is an orphan its job manager kills when it is
    reported), so its end is not the task's doing.  False when the host manager turned
    the run down (no room, cordoned, the run already ended).
    """

    run_id: str
    reason: str
    unreached: bool = False


@dataclass(frozen=True, slots=True)
class PlacedTask:
    """One run placed on a host; `ports` are the dynamic ports picked, in PortSpec order."""

    task_id: TaskId
    run_id: int
    ports: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """Runs placed together on one host, ready for the job manager to launch."""

    hostname: str
    agent_id: str
    tasks: tuple[PlacedTask, ...]


@dataclass(frozen=True, slots=True)
class PlacementFailure:
    """A run placement gave up on this round, with the human-readable reason."""

    task_id: TaskId
    run_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class PlacementGang:
    """A gang handed to the placement engine: what to place and which runs it is."""

    gang: GangRequest
    run_ids: tuple[int, ...]
    pool_id: str = ""


@dataclass(frozen=True, slots=True)
class HostReservation:
    """Resources and ports a placed run holds on a host until it is launched (or expires)."""

    hostname: str
    task_id: TaskId
    run_id: int
    resources: Resources
    ports: tuple[int, ...] = ()
    revocable: bool = False
    #: Labels the run adds to its host's task-label counts (TaskRequest.labels), so that
    #: "at most N per host" holds for runs placed but not launched yet.
    labels: tuple[Label, ...] = ()


@dataclass(frozen=True, slots=True)
class HostLease:
    """Hosts lent to one placement round; no other round sees them until committed."""

    lease_id: str
    offers: tuple[HostOffer, ...]


class VictimReason(StrEnum):
    """Why a running task must be stopped."""

    PREEMPTED = "PREEMPTED_RESOURCES"
    HOST_MAINTENANCE = "KILLED_HOST_MAINTENANCE"


@dataclass(frozen=True, slots=True)
class Victim:
    """A run the job manager must stop (and, unless the job says otherwise, restart)."""

    task_id: TaskId
    run_id: int
    reason: VictimReason
    hostname: str = ""


@dataclass(frozen=True, slots=True)
class EnqueueFailure:
    """A task the resource manager refused to queue, and why."""

    task_id: TaskId
    reason: str
