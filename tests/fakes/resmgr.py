"""A fake resource manager: `ResourceManagerPort` over a FakeHostManager (a fake, not a mock).

It keeps the job manager's side of the port simply but truthfully:

* pools are a fixed path -> id map; `validate_pool` and `pool_id_for_path`
  answer from it (NotFound / InvalidArgument like the real one);
* `enqueue_gangs` queues each task's newest run (an older run is replaced,
  the same run again is a no-op); `kill_tasks` forgets tasks wherever they are;
* with `auto_place` on, `get_placements` places every queued task at once,
  round-robin over the fake host manager's UP hosts, with consecutive
  dynamic ports; with it off the test calls `place` itself; given `partitions`
  it hands out only placements (and victims) of jobs in them, as the real one;
* `pending_reasons` explains queued tasks (a settable reason per task).

The placement engine side (dequeue_gangs, set_placements) is not faked.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

import gevent

from peloton.api import peloton_texts as texts
from peloton.core.errors import InvalidArgument, NotFound, Unimplemented
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import (
    EnqueueFailure,
    PlacedTask,
    Placement,
    PlacementFailure,
    PlacementGang,
    Victim,
)
from peloton.core.partitions import PartitionSet
from peloton.core.ports import RecoveredRun
from peloton.core.respool.records import RmTask
from peloton.core.states import HostState, TaskState
from tests.fakes.hostmgr import FakeHostManager

#: What `pending_reasons` says of a queued task the test gave no reason for.
WAITING = "waiting for placement (fake resource manager)"


class FakeResourceManager:
    """Queues and places tasks for the job manager; see the module docstring."""

    def __init__(self, hosts: FakeHostManager, pools: dict[str, str] | None = None, *,
                 auto_place: bool = True) -> None:
        self.hosts = hosts
        self.pools = dict(pools or {"/DefaultResPool": "respool-default"})
        #: Pool ids that have children (jobs may not use them).
        self.parents: set[str] = set()
        self.auto_place = auto_place
        self.queued: dict[TaskId, RmTask] = {}
        self.ready: list[Placement] = []
        self.killed: list[TaskId] = []
        self.recovered: list[TaskId] = []
        self.reasons: dict[TaskId, str] = {}
        #: Preemption victims the next `take_victims` hands out (a test puts them here).
        self.victims: list[Victim] = []
        self._ports = itertools.count(31000)
        self._turn = itertools.count()

    # -- test helpers ---------------------------------------------------------------------
    def place(self, task_ids: Sequence[TaskId] | None = None, hostname: str = "") -> int:
        """Place queued tasks (all, or these) on `hostname` or round-robin; returns how many."""
        up = [h for h in self.hosts.hosts.values() if h.state is HostState.UP]
        chosen = list(task_ids) if task_ids is not None else list(self.queued)
        count = 0
        for task_id in chosen:
            task = self.queued.pop(task_id, None)
            if task is None or not up:
                continue
            pinned = task.request.desired_host if task.request.desired_host_only else ""
            if hostname or pinned:  # a pinned task (stateful, daemon) goes only to its host
                host = self.hosts.hosts[hostname or pinned]
            else:
                host = up[next(self._turn) % len(up)]
            ports = tuple(next(self._ports) for _ in range(task.request.needs.ports))
            self.ready.append(Placement(host.hostname, host.agent_id,
                                        (PlacedTask(task_id, task.run_id, ports),)))
            count += 1
        return count

    # -- job manager side ---------------------------------------------------------------------
    def validate_pool(self, pool_id: str, need: Resources | None = None) -> None:
        # Peloton's texts, as the real resource manager's port.
        if not pool_id:
            raise InvalidArgument(texts.POOL_ID_NULL, field="respoolID")
        if pool_id == "root":
            raise InvalidArgument(texts.POOL_IS_ROOT, field="respoolID")
        if pool_id in self.parents:
            raise InvalidArgument(texts.POOL_NOT_LEAF, field="respoolID")
        if pool_id not in self.pools.values():
            raise NotFound(texts.POOL_NOT_FOUND, field="respoolID")

    def pool_id_for_path(self, path: str) -> str:
        try:
            return self.pools[path]
        except KeyError:
            raise NotFound(f"resource pool {path} not found", field="respool") from None

    def enqueue_gangs(self, pool_id: str, gangs: Sequence[Sequence[RmTask]]) -> list[EnqueueFailure]:
        if pool_id not in self.pools.values():
            return [EnqueueFailure(t.task_id, f"unknown pool {pool_id}") for g in gangs for t in g]
        for gang in gangs:
            for task in gang:
                old = self.queued.get(task.task_id)
                if old is None or old.run_id <= task.run_id:
                    self.queued[task.task_id] = task
        return []

    def kill_tasks(self, task_ids: Sequence[TaskId]) -> None:
        gone = set(task_ids)
        self.killed.extend(task_ids)
        for task_id in gone:
            self.queued.pop(task_id, None)
        self.ready = [p for p in self.ready if p.tasks[0].task_id not in gone]

    def get_placements(self, limit: int, timeout: float,
                       partitions: PartitionSet | None = None, *,
                       still_current: Callable[[], bool] | None = None) -> list[Placement]:
        deadline = time.monotonic() + timeout
        while True:
            if still_current is not None and not still_current():
                return []
            if self.auto_place and self.queued:
                self.place()
            mine = [p for p in self.ready
                    if partitions is None or partitions.covers(p.tasks[0].task_id.job_id)]
            if mine or time.monotonic() >= deadline:
                out = mine[:limit]
                self.ready = [p for p in self.ready if p not in out]
                return out
            gevent.sleep(0.01)

    def recover_task(self, pool_id: str, task: RmTask, state: TaskState, hostname: str = "") -> None:
        self.recovered.append(task.task_id)

    def recover_tasks(self, runs: Sequence[RecoveredRun]) -> None:
        self.recovered.extend(run.task.task_id for run in runs)

    def take_victims(self, limit: int, partitions: PartitionSet | None = None) -> list[Victim]:
        out = [v for v in self.victims
               if partitions is None or partitions.covers(v.task_id.job_id)][:limit]
        self.victims = [v for v in self.victims if v not in out]
        return out

    def pending_reasons(self, task_ids: Sequence[TaskId]) -> dict[TaskId, str]:
        return {t: self.reasons.get(t, WAITING) for t in task_ids if t in self.queued}

    # -- placement engine side (not faked) ----------------------------------------------------
    def dequeue_gangs(self, limit: int, timeout: float) -> list[PlacementGang]:
        raise Unimplemented("the fake resource manager places tasks itself")

    def set_placements(self, placements: Sequence[Placement],
                       failures: Sequence[PlacementFailure]) -> None:
        raise Unimplemented("the fake resource manager places tasks itself")
