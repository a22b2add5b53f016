"""Small builders for core tests: pools, hosts, tasks."""

from __future__ import annotations

import itertools

from peloton.core.model.constraints import Constraint, Label
from peloton.core.model.host import HostOffer
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import PortRange, ResourceKind, Resources, to_units
from peloton.core.model.respool import ReservationType, ResourceConfig, ResourcePoolConfig
from peloton.core.placement.request import GangRequest, PlacementNeeds, Strategy, TaskRequest
from peloton.core.respool.records import RmTask
from peloton.core.states import HostState

_ids = itertools.count()


def units(*amounts: float) -> list[int]:
    """A pool-node vector (fixed-point units) from amounts in user units; missing kinds are 0."""
    return [to_units(a) for a in amounts] + [0] * (4 - len(amounts))


def pool_config(name: str, parent: str = "root", *, cpu: tuple[float, float, float] = (0, 0, 1),
                mem: tuple[float, float, float] | None = None, static: bool = False,
                slack_pct: float | None = None, controller_pct: float | None = None,
                ) -> ResourcePoolConfig:
    """A config; each kind is (reservation, limit, share)."""
    rt = ReservationType.STATIC if static else ReservationType.ELASTIC
    res = [ResourceConfig(ResourceKind.CPU, *cpu, type=rt)]
    if mem is not None:
        res.append(ResourceConfig(ResourceKind.MEMORY, *mem, type=rt))
    return ResourcePoolConfig(name=name, parent_id=parent, resources=tuple(res),
                              slack_limit_percent=slack_pct,
                              controller_limit_percent=controller_pct)


def host(name: str, cpu: float = 8, mem: float = 8192, disk: float = 100_000, gpu: float = 0,
         *, labels: tuple[Label, ...] = (), ports: tuple[PortRange, ...] = (),
         state: HostState = HostState.UP, rcpu: float = 0.0,
         task_labels: tuple[tuple[Label, int], ...] = ()) -> HostOffer:
    """An empty host offer (available == capacity)."""
    cap = Resources(cpu, mem, disk, gpu)
    return HostOffer(name, f"agent-{name}", cap, cap, ports=ports, labels=labels, state=state,
                     revocable_cpu=rcpu, task_labels=task_labels)


def needs(cpu: float = 1, mem: float = 0, disk: float = 0, gpu: float = 0, *, ports: int = 0,
          revocable: bool = False, constraint: Constraint | None = None,
          strategy: Strategy = Strategy.PACK) -> PlacementNeeds:
    """Placement needs."""
    return PlacementNeeds(Resources(cpu, mem, disk, gpu), ports, revocable, constraint, strategy)


def task(n: PlacementNeeds, job: str = "job", inst: int | None = None, *,
         labels: tuple[Label, ...] = (), desired: str = "", only: bool = False) -> TaskRequest:
    """A placement request with a fresh instance id unless one is given."""
    return TaskRequest(TaskId(job, next(_ids) if inst is None else inst), n, labels, desired,
                       only)


def gang(*tasks: TaskRequest) -> GangRequest:
    """A gang."""
    return GangRequest(tuple(tasks))


def rm_task(cpu: float = 1, *, job: str = "job", inst: int | None = None, priority: int = 0,
            preemptible: bool = True, revocable: bool = False, controller: bool = False,
            mem: float = 0, run: int = 1) -> RmTask:
    """A resource-manager task."""
    return RmTask(task(needs(cpu, mem, revocable=revocable), job, inst), run, priority,
                  preemptible, controller)
