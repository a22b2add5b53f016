"""Knobs of the placement engine (Peloton's config/placement, sized for rounds of milliseconds).

Peloton's engine takes 10 tasks per round and keeps retrying a task
inside the engine until its per-type deadline (500 s for batch).  Here a
round takes up to 1,000 tasks, places them against every free host at
once, and reports what it could not place straight back to the resource
manager, which retries it after a short, growing delay (its backoff cycle);
so a round never waits on a task that cannot be placed.
"""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class PlacementEngineConfig:
    """Batching and timing of the placement loop."""

    #: Tasks taken from the resource manager per round (whole gangs; at least one gang).
    batch_limit: int = 1000
    #: How long a round waits for ready gangs before looking again (seconds).
    dequeue_timeout: float = 0.5
    #: Hosts leased per round: `hosts_per_task` for each task taken (at least `min_hosts`),
    #: at most `max_hosts` (0: no cap); `hosts_per_task` 0 leases every host with free
    #: resources.  Leasing, indexing and giving back ten thousand hosts took a round
    #: 0.1-0.2 s of the hub with a thousand tasks to place; Peloton's batch placement
    #: leases at most one host per task.  Leased hosts go to the back of the offerable
    #: set, so successive rounds see every host.
    hosts_per_task: int = 4
    min_hosts: int = 1000
    max_hosts: int = 0
    #: Keep GPU hosts for tasks that use GPUs (Peloton's scarce_resource_types: [GPU]).
    scarce_gpu: bool = True
    #: Pause after a round that failed (host manager or resource manager unreachable).
    error_backoff: float = 1.0

    def __post_init__(self) -> None:
        if self.batch_limit < 1:
            raise InvalidArgument("batch_limit must be >= 1", field="batch_limit")
        for name in ("max_hosts", "hosts_per_task", "min_hosts"):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must be >= 0", field=name)
        for name in ("dequeue_timeout", "error_backoff"):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must be >= 0", field=name)

    def lease_size(self, tasks: int) -> int:
        """Hosts to lease for a round of `tasks` tasks (0: every offerable host)."""
        if self.hosts_per_task == 0:
            return self.max_hosts
        want = max(self.min_hosts, self.hosts_per_task * tasks)
        return min(want, self.max_hosts) if self.max_hosts else want
