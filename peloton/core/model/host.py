"""Hosts: what a host offers to the scheduler, and its maintenance record."""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sla_policy import DrainRequest
from peloton.core.states import HostState

#: Host label that marks a host reserved for tasks that name it in a constraint.
EXCLUSIVE_ATTRIBUTE = "peloton/exclusive"
#: Every host has this label, valued with its hostname, for constraints (Peloton's
#: common.HostNameKey, added to every host's label values before evaluation).
HOSTNAME_LABEL_KEY = "hostname"


@dataclass(frozen=True, slots=True)
class HostInfo:
    """The stored record of a host (maintenance state, labels, pool, and how it is drained
    while under maintenance: None for a host never drained or whose maintenance ended)."""

    hostname: str
    ip: str = ""
    state: HostState = HostState.UP
    goal_state: HostState = HostState.UP
    labels: tuple[Label, ...] = ()
    current_pool: str = ""
    desired_pool: str = ""
    drain: DrainRequest | None = None


@dataclass(frozen=True, slots=True)
class HostOffer:
    """A read-only snapshot of one host's free capacity, as placement sees it.

    `capacity` is the host's total, `available` what is free now (both
    non-revocable); `revocable_cpu` is slack cpu free for revocable tasks.
    `task_labels` counts labels of tasks running on or assigned to the host,
    which task-kind constraints ("at most N per host") read.
    """

    hostname: str
    agent_id: str
    capacity: Resources
    available: Resources
    ports: tuple[PortRange, ...] = ()
    labels: tuple[Label, ...] = ()
    state: HostState = HostState.UP
    revocable_cpu: float = 0.0
    task_labels: tuple[tuple[Label, int], ...] = ()

    @property
    def has_gpu(self) -> bool:
        """Scarce-resource hosts are kept for the tasks that need their GPUs."""
        return self.capacity.gpu > 0
