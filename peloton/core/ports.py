"""The ports between the daemons: what each one asks of the others.

Calls go one way, top to bottom, as in Peloton: the job manager calls the
resource manager and the host manager; the placement engine pulls from the
resource manager and the host manager; status flows back up as an
acknowledged event stream that the host manager offers to its consumers.

In `peloton up` the daemon objects implement these Protocols and are wired
directly; between separate processes a gRPC client implements the same
Protocol (pelotonpy.internal.*).  Both pass the same tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from peloton.core.feasibility import HostShape
from peloton.core.model.host import HostInfo
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import (
    EnqueueFailure,
    HostLease,
    HostReservation,
    LaunchFailure,
    LaunchSpec,
    Placement,
    PlacementFailure,
    PlacementGang,
    Victim,
)
from peloton.core.model.sla_policy import DrainRequest
from peloton.core.partitions import PartitionSet
from peloton.core.respool.records import RmTask
from peloton.core.states import HostState, TaskState


@dataclass(frozen=True, slots=True)
class RecoveredRun:
    """A run already placed, launched or running, handed back after a job manager restart."""

    pool_id: str
    task: RmTask
    state: TaskState
    hostname: str = ""


class ResourceManagerPort(Protocol):
    """The resource manager as the job manager and the placement engine see it."""

    # -- job manager side ----------------------------------------------------
    def validate_pool(self, pool_id: str, need: Resources | None = None) -> None:
        """A job may be created in this pool: it exists and is a leaf other than the root,
        and (given `need`, the most one admission of the job asks) the pool's limits could
        ever admit it.  Raises NotFound or InvalidArgument naming the pool (field
        "respoolID") or the resource (field "resources.<kind>")."""

    def pool_id_for_path(self, path: str) -> str:
        """The id of the pool at `path` (e.g. "/a/b"); NotFound if there is none."""

    def enqueue_gangs(self, pool_id: str, gangs: Sequence[Sequence[RmTask]]) -> list[EnqueueFailure]:
        """Queue gangs (each all or nothing) in a leaf pool.  A task already tracked with
        the same run is accepted again without effect (idempotent); one tracked with an
        older run is replaced.  Returns the tasks refused (unknown pool, non-leaf pool)."""

    def kill_tasks(self, task_ids: Sequence[TaskId]) -> None:
        """Forget these tasks: drop them from queues, free what they hold.  Idempotent."""

    def get_placements(self, limit: int, timeout: float,
                       partitions: PartitionSet | None = None, *,
                       still_current: Callable[[], bool] | None = None) -> list[Placement]:
        """Placed runs ready to launch, at most `limit` tasks; waits up to `timeout` seconds
        for the first one.  Each returned task moves to LAUNCHING.  Given `partitions` (a
        member of an all-active cluster), only runs of jobs in those partitions are
        returned: a placement is launched by its job's owner, never by whoever asks first;
        None (a lone job manager): runs of any job.  `still_current` (the serving side's
        term fence, never sent by a client) is asked before each take: once it says no,
        the caller's partitions have moved and the wait ends with nothing."""

    def recover_task(self, pool_id: str, task: RmTask, state: TaskState, hostname: str = "") -> None:
        """After a restart: re-track a run already placed/launched/running (allocation held)."""

    def recover_tasks(self, runs: Sequence[RecoveredRun]) -> None:
        """`recover_task` for many runs at once (one call, one lock: a restart hands back
        every run of every job)."""

    def take_victims(self, limit: int, partitions: PartitionSet | None = None) -> list[Victim]:
        """Running tasks the preemptor wants stopped to free resources (each given once),
        of jobs in `partitions` only when given (as `get_placements`)."""

    def pending_reasons(self, task_ids: Sequence[TaskId]) -> dict[TaskId, str]:
        """Why queued tasks are not running yet (admission or the last placement report)."""

    # -- placement engine side ------------------------------------------------
    def dequeue_gangs(self, limit: int, timeout: float) -> list[PlacementGang]:
        """Admitted gangs to place (READY -> PLACING), at most `limit` tasks."""

    def set_placements(self, placements: Sequence[Placement],
                       failures: Sequence[PlacementFailure]) -> None:
        """Report a placement round: placed runs become PLACED, failed ones go back to
        READY (or PENDING after a full cycle of attempts) with the reason kept."""


@dataclass(frozen=True, slots=True)
class HostEvent:
    """One entry of the host manager's ordered status stream."""

    offset: int
    run_id: str
    state: TaskState
    hostname: str
    agent_id: str
    timestamp: float
    message: str = ""
    reason: str = ""
    exit_code: int | None = None
    healthy: str = ""


#: Separates a status-stream consumer group from one member of it: "jobmgr@<member id>".
MEMBER_SEP = "@"


def member_consumer(consumer: str, member: str) -> str:
    """The status-stream consumer name of one member of a group of consumers (each job
    manager of an all-active cluster reads its partitions' events as `jobmgr@<member id>`;
    the host manager waits for the group, not for a fixed name: peloton/hostmgr/events.py)."""
    return f"{consumer}{MEMBER_SEP}{member}"


@dataclass(frozen=True, slots=True)
class EventScan:
    """What one read of the status stream found."""

    #: The events asked for, oldest first.
    events: list[HostEvent]
    #: The offset of the last event read, returned or passed over (where the read began if
    #: none): where the next read goes on, what to acknowledge once the events are stored.
    position: int
    #: The newest offset when the read answered (events wait beyond `position` if higher).
    head: int


class EventStream(Protocol):
    """A consumer's view of the host manager's status stream (at-least-once, in order).

    A poll naming `partitions` (an all-active job manager member's) returns only events of
    those partitions' jobs; it passes over the others, moving `position` past them, so the
    consumer acknowledges them unread.  Passing over is safe only for partitions the
    consumer did not hold at any time during the poll: one it took over meanwhile may have
    had a reconcile's re-report passed over, so the consumer `rewind`s and reads again.
    """

    @property
    def position(self) -> int:
        """The offset of the last event the last poll returned or passed over."""

    @property
    def head(self) -> int:
        """The stream's newest offset when the last poll answered: events are waiting
        beyond `position` when it is higher."""

    def poll(self, limit: int, timeout: float,
             partitions: PartitionSet | None = None) -> list[HostEvent]:
        """Events after `position`, oldest first, of jobs in `partitions` only (None:
        every event); waits up to `timeout` for one."""

    def rewind(self) -> None:
        """Make the next poll read again what the last one read (returned or passed over)."""

    def acknowledge(self, offset: int) -> None:
        """Everything up to and including `offset` is processed and persisted."""


@dataclass(frozen=True, slots=True)
class HostSummary:
    """A host as `host query` shows it."""

    info: HostInfo
    capacity: Resources
    allocated: Resources
    agent_id: str = ""
    connected: bool = True
    #: Runs on the host (placed, launching or running).
    tasks: int = 0
    #: Their run ids (the host manager's own summaries; not sent between daemons).
    runs: tuple[str, ...] = ()
    #: Revocable (slack) cpu the host offers, and how much of it runs hold (in `allocated`).
    slack_cpu: float = 0.0
    slack_allocated_cpu: float = 0.0


def shapes_of(summaries: Sequence[HostSummary]) -> list[HostShape]:
    """Hosts as the feasibility check sees them (UP means UP and connected)."""
    return [HostShape(s.info.hostname, s.capacity, s.info.labels,
                      up=s.connected and s.info.state is HostState.UP) for s in summaries]


class HostManagerPort(Protocol):
    """The host manager as the other daemons see it."""

    # -- placement engine side --------------------------------------------
    def acquire_hosts(self, max_hosts: int = 0) -> HostLease:
        """Lease every UP host with free resources (or at most `max_hosts`)."""

    def commit_lease(self, lease_id: str, reservations: Sequence[HostReservation]) -> None:
        """Turn a lease into reservations for the placed runs and free the rest of it.
        Reservations expire if their run is not launched in time."""

    def release_lease(self, lease_id: str) -> None:
        """Give a lease back unused.  Idempotent."""

    # -- job manager side -------------------------------------------------------
    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> list[LaunchFailure]:
        """Start runs on a host, consuming their reservations (a run without one is
        launched if the host still has room).  Returns the runs that could not be handed
        to the host (unknown or down host, no room); the others report status events."""

    def launch_hosts(self, launches: Mapping[str, Sequence[LaunchSpec]]
                     ) -> dict[str, list[LaunchFailure]]:
        """`launch` on many hosts in one call, `launches` by hostname, each host as by
        `launch` in the order given (a launch round places a few runs on each of thousands
        of hosts).  Returns the failures by hostname; hosts without any are left out."""

    def kill(self, run_ids: Sequence[str], grace_secs: float = 5.0) -> None:
        """Stop runs wherever they are (SIGTERM, SIGKILL after the grace).  Idempotent;
        each known run ends with a KILLED event."""

    def destroy_volumes(self, hostname: str, volume_ids: Sequence[str]) -> list[str]:
        """Remove persistent volumes from a host (idempotent).  Returns those kept because a
        live run there still uses them; Unavailable when the host cannot be asked now."""

    def adopt(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """After a restart: runs the job manager knows were launched on `hostname` hold
        their resources again (so the host is not offered twice).  Idempotent."""

    def adopt_hosts(self, runs: Mapping[str, Sequence[LaunchSpec]]) -> None:
        """`adopt` for many hosts at once, `runs` by hostname (a job manager's recovery
        adopts every run it knows, on thousands of hosts).  Idempotent."""

    def reconcile(self, run_ids: Sequence[str],
                  expected: Sequence[TaskState | None] | None = None) -> None:
        """Ask the hosts to re-report these runs; runs no host knows come back LOST.  Given
        `expected` (one per run id: the state the caller holds, None for none), a run the
        host manager last heard in that state is left out: the caller has its latest
        report (a job manager's recovery holds a million runs as they are)."""

    def sandbox_files(self, hostname: str, run_id: str,
                      path: str = "") -> tuple[str, list[tuple[str, int]]]:
        """(file server address "host:port", [(file, size)]) of a run's sandbox on a host."""

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Bytes of a file in a run's sandbox (stdout, stderr, ...)."""

    def subscribe(self, consumer: str) -> EventStream:
        """The status stream for one named consumer (its acknowledged offset persists
        across calls with the same name)."""

    def cluster_capacity(self) -> tuple[Resources, float]:
        """Total non-revocable capacity of connected UP hosts, and slack (revocable) cpu."""

    def host_states(self) -> dict[str, HostState]:
        """Maintenance state of every known host."""

    def host_summaries(self) -> list[HostSummary]:
        """Every known host with capacity, allocation, labels, state and connection."""

    def host_shapes(self) -> list[HostShape]:
        """What every known host could ever hold (capacity, labels, UP and connected),
        sorted by hostname: `shapes_of(host_summaries())`, which a host manager may answer
        from a cache (the feasibility check runs on every create, over every host)."""

    def draining_runs(self) -> list[tuple[str, str]]:
        """(hostname, run id) of every run on a DRAINING host, for the job manager to move.
        A DRAINING host with no runs left becomes DRAINED, then DOWN, by itself."""

    def drain_requests(self) -> dict[str, DrainRequest]:
        """How each DRAINING host is drained (the job manager moves its runs within the SLA
        rules of peloton.core.sla); a host drained by Peloton's StartMaintenance has the
        default request (DrainMode.JOB_SLA)."""
