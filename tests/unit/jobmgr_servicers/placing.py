"""The fake resource manager placing with the real core placer.

The fake resource manager places round-robin and ignores a task's desired
host, so tests of host preference (in-place updates, stateful and daemon
pinning) swap in `Placer` from `peloton.core.placement` — the filter and
ranker chain the placement engine runs — over the fake hosts' free room.
What the job manager asks for (`TaskRequest.desired_host`,
`desired_host_only`) then decides where runs go, as in the real cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from peloton.core.model.ids import TaskId
from peloton.core.model.sched import PlacedTask, Placement
from peloton.core.placement.request import GangRequest
from peloton.core.placement.stack import Placer
from peloton.core.states import HostState
from tests.unit.jobmgr_servicers.conftest import Cluster


class CorePlacement:
    """Installed on a cluster's fake resource manager; counts failed attempts per task."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        #: Placement attempts that found no host, per task.
        self.misses: Counter[TaskId] = Counter()
        c.rm.place = self.place  # type: ignore[method-assign]  # this cluster places by the core placer

    def place(self, task_ids: Sequence[TaskId] | None = None, hostname: str = "") -> int:
        """Place queued tasks (all, or these) where the core placer puts them."""
        rm = self.c.rm
        hosts = rm.hosts.hosts
        placer = Placer(h.offer() for h in hosts.values() if h.state is HostState.UP)
        count = 0
        for task_id in list(rm.queued) if task_ids is None else list(task_ids):
            task = rm.queued.get(task_id)
            if task is None:
                continue
            plan = placer.place([GangRequest((task.request,))], {task_id: task.run_id})
            if not plan.placed:
                self.misses[task_id] += 1
                continue
            del rm.queued[task_id]
            where = plan.placed[0]
            rm.ready.append(Placement(where.hostname, where.agent_id,
                                      (PlacedTask(task_id, task.run_id, where.ports),)))
            count += 1
        return count

    def missed(self, task_id: TaskId) -> int:
        """How often `task_id` found no host."""
        return self.misses[task_id]
