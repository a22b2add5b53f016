"""Builders for resource manager tests: pools, tasks, and driving a task to a state."""

from __future__ import annotations

import uuid
from typing import Any

from peloton.core.model.constraints import Constraint, Label
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ReservationType, ResourceConfig, ResourcePoolConfig
from peloton.core.model.sched import LaunchSpec, PlacedTask, Placement, PlacementFailure
from peloton.core.model.task import TaskSpec
from peloton.core.placement.request import PlacementNeeds, Strategy, TaskRequest
from peloton.core.respool.records import RmTask
from peloton.core.states import TaskState
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.config import ResourceManagerConfig
from peloton.storage.cluster_store import ResourcePoolStore
from tests.fakes.hostmgr import FakeHostManager


class FakeClock:
    """A clock tests advance by hand (both readings of peloton.common.clock.Clock)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_rm(store: ResourcePoolStore, hostmgr: FakeHostManager, clock: FakeClock,
            **config: Any) -> ResourceManager:
    """A loaded resource manager with its loops not running."""
    rm = ResourceManager(store, hostmgr, ResourceManagerConfig(**config), clock=clock)
    rm.load()
    return rm


def pool_config(name: str, parent: str = "root", *, cpu: tuple[float, float] = (0, 100),
                share: float = 1.0, static: bool = False, mem: tuple[float, float] | None = None,
                gpu: tuple[float, float] | None = None) -> ResourcePoolConfig:
    """A config with cpu (reservation, limit); memory/disk unlimited unless given."""
    rt = ReservationType.STATIC if static else ReservationType.ELASTIC
    mem = mem or (0, 1e9)
    res = [ResourceConfig(ResourceKind.CPU, cpu[0], cpu[1], share, rt),
           ResourceConfig(ResourceKind.MEMORY, mem[0], mem[1], share, rt),
           ResourceConfig(ResourceKind.DISK, 0, 1e9, share, rt)]
    if gpu is not None:
        res.append(ResourceConfig(ResourceKind.GPU, gpu[0], gpu[1], share, rt))
    return ResourcePoolConfig(name=name, parent_id=parent, resources=tuple(res))


def make_pool(rm: ResourceManager, name: str, parent: str = "root", **kw: Any) -> str:
    """Create a pool; returns its id."""
    return rm.pools.create(pool_config(name, parent, **kw))


def job_id() -> str:
    """A fresh job id (run ids need UUID job ids)."""
    return str(uuid.uuid4())


def tasks(n: int, cpu: float = 1.0, *, job: str | None = None, start: int = 0, run: int = 1,
          priority: int = 0, preemptible: bool = True, gpu: float = 0.0, mem: float = 0.0,
          labels: tuple[Label, ...] = (), constraint: Constraint | None = None,
          strategy: Strategy = Strategy.PACK, revocable: bool = False) -> list[RmTask]:
    """`n` tasks of one job sharing one needs value."""
    job = job or job_id()
    needs = PlacementNeeds(Resources(cpu, mem, 0.0, gpu), constraint=constraint,
                           strategy=strategy, revocable=revocable)
    return [RmTask(TaskRequest(TaskId(job, start + i), needs, labels), run, priority,
                   preemptible) for i in range(n)]


def singles(ts: list[RmTask]) -> list[list[RmTask]]:
    """Each task its own gang."""
    return [[t] for t in ts]


def state_of(rm: ResourceManager, task: RmTask) -> TaskState | None:
    """The resource-manager state of a task (None if untracked)."""
    rec = rm.book.tracker.get(task.task_id)
    return None if rec is None else rec.state


def place_all(rm: ResourceManager, hostmgr: FakeHostManager) -> list[TaskId]:
    """Dequeue every ready gang and place it first fit over the fake's free cpu (or fail it)."""
    free = {h.hostname: h.offer().available.cpu for h in hostmgr.hosts.values()}
    placed = []
    for g in rm.dequeue_gangs(100_000, 0):
        for t, run in zip(g.gang.tasks, g.run_ids, strict=True):
            cpu = t.needs.resources.cpu
            host = next((h for h, c in free.items() if c >= cpu), None)
            if host is None:
                rm.set_placements([], [PlacementFailure(t.task_id, run, "no host fits")])
                continue
            free[host] -= cpu
            rm.set_placements([Placement(host, f"agent-{host}", (PlacedTask(t.task_id, run),))],
                              [])
            placed.append(t.task_id)
    return placed


def launch_all(rm: ResourceManager, hostmgr: FakeHostManager) -> list[str]:
    """What the job manager does: take placements and launch them (the fake reports RUNNING)."""
    launched: list[str] = []
    for p in rm.get_placements(100_000, 0):
        specs = []
        for t in p.tasks:
            rec = rm.book.tracker.get(t.task_id)
            assert rec is not None
            spec = TaskSpec(resources=rec.task.resources, labels=rec.task.request.labels)
            specs.append(LaunchSpec(str(t.task_id.run(t.run_id)), spec))
        assert not hostmgr.launch(p.hostname, specs)
        launched.extend(s.run_id for s in specs)
    return launched


def run_all(rm: ResourceManager, hostmgr: FakeHostManager) -> list[str]:
    """Admit, place, launch and apply the RUNNING events of everything admissible."""
    rm.loops.admit_once()
    place_all(rm, hostmgr)
    launched = launch_all(rm, hostmgr)
    rm.loops.events_once(0)
    return launched
