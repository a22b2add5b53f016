"""Moving runs off: preemption victims from the resource manager and runs on draining hosts.

A victim is stopped and, unless its job asks to be killed on preemption,
started again as a new run (Peloton bumps the desired run id); the task
goal-state engine then kills the old run and, once it ended, queues the
new one, which placement puts on another host (a draining host is never
offered).  Victims whose run already changed are ignored.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from peloton.common.loop import Loop
from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import RunId
from peloton.core.model.task import TerminationReason
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.states import JobType, TaskState
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.runcontrol import RunControl

log = logging.getLogger(__name__)


class Evictor:
    """Polls for victims and draining runs and restarts them elsewhere."""

    def __init__(self, cache: JobCache, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 control: RunControl, config: JobManagerConfig) -> None:
        self.cache = cache
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.control = control
        self.config = config
        self._loop = Loop("evictor", self.evict_once, interval=config.evict_interval, log=log)

    def start(self) -> None:
        """Begin evicting in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop evicting."""
        self._loop.stop()

    def evict_once(self) -> int:
        """One round; returns how many runs were asked to move."""
        runs: dict[tuple[str, TerminationReason], list[RunId]] = defaultdict(list)
        for victim in self.resmgr.take_victims(self.config.evict_batch):
            rid = RunId(victim.task_id.job_id, victim.task_id.instance, victim.run_id)
            runs[(rid.job_id, TerminationReason.PREEMPTED_RESOURCES)].append(rid)
        for _host, run_id in self.hostmgr.draining_runs():
            try:
                rid = RunId.parse(run_id)
            except InvalidArgument:
                continue
            runs[(rid.job_id, TerminationReason.KILLED_HOST_MAINTENANCE)].append(rid)
        moved = 0
        for (job_id, reason), rids in runs.items():
            job = self.cache.get(job_id)
            if job is None:
                continue
            if job.spec.type is JobType.DAEMON and reason is TerminationReason.KILLED_HOST_MAINTENANCE:
                continue  # the daemon controller removes instances of hosts that leave
            current = []
            for r in rids:
                rt = job.get_task(r.instance)
                if rt is not None and rt.run_id == r.run and not rt.state.terminal and \
                        rt.goal_state in (TaskState.RUNNING, TaskState.SUCCEEDED):
                    current.append(r.instance)
            if not current:
                continue
            kill_goal = [i for i in current if job.task_spec(i).kill_on_preempt
                         and reason is TerminationReason.PREEMPTED_RESOURCES]
            restart = [i for i in current if i not in kill_goal]
            if kill_goal:
                self.control.set_goal(job, kill_goal, TaskState.KILLED, reason=reason)
            if restart:
                by_goal: dict[TaskState, list[int]] = defaultdict(list)
                for i in restart:
                    by_goal[job.task(i).goal_state].append(i)
                for goal, insts in by_goal.items():
                    self.control.set_goal(job, insts, goal, bump_run=True, reason=reason)
            moved += len(current)
        return moved
