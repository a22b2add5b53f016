"""Moving runs off: preemption victims from the resource manager and runs on draining hosts.

As Peloton's evictor (pkg/jobmgr/task/evictor): each run to move is marked in one write,
message "evicting running task", reason `EvictionReason_PREEMPTION` or
`EvictionReason_HOST_MAINTENANCE`, with its termination reason, and the task goal-state
engine does the rest:

* a task whose job asks to be killed on preemption stops for good: a batch task gets goal
  PREEMPTING (Peloton's batch kill-on-preempt path; its run ends KILLED and the task stays
  so), any other task goal KILLED;
* any other task is started again as a new run (the desired run id is bumped): the engine
  kills the old run and, once it ended, queues the new one, which placement puts on another
  host (a draining host is never offered).

Runs on draining hosts move only as far as their job's SLA allows (peloton.core.sla, with
each host's drain request): the others stay, and are looked at again next round, when the
instances moved before may be back.  Preemption victims are never held.  Runs already
asked to stop, and victims whose run changed since, are left alone.  Daemon instances on
draining hosts are left to the daemon controller.  A mark that kept losing its
compare-and-set (task_writes.py) is tried again next round: a victim is held
for it (the resource manager hands each victim out once), a drain finds the run
still movable.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Collection

from peloton.common.clock import Clock
from peloton.common.loop import Loop
from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import RunId
from peloton.core.model.sched import VictimReason
from peloton.core.model.sla_policy import JOB_SLA_DRAIN
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.core.sla import Candidate, JobSla, TaskSla, instance_sla, job_verdicts, task_sla
from peloton.core.states import JobType, TaskState
from peloton.jobmgr.aggregate import CachedJob, TaskChange
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.ownership import Ownership
from peloton.jobmgr.task_writes import TaskWriteOutcome

log = logging.getLogger(__name__)
S = TaskState

#: Task runtime message of a run being moved (Peloton's _msgEvictingRunningTask).
EVICTING = "evicting running task"
#: Task runtime reason by termination reason (Peloton's EvictionReason names).
_REASONS = {TerminationReason.PREEMPTED_RESOURCES: "EvictionReason_PREEMPTION",
            TerminationReason.KILLED_HOST_MAINTENANCE: "EvictionReason_HOST_MAINTENANCE"}
_LIVE_GOALS = frozenset({S.RUNNING, S.SUCCEEDED})


class Evictor:
    """Polls for victims and draining runs and moves them; see the module docstring."""

    def __init__(self, cache: JobCache, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 config: JobManagerConfig, clock: Clock,
                 ownership: Ownership | None = None) -> None:
        self.cache = cache
        #: Whose victims to take: the resource manager hands each out once, so only the
        #: owner of the victim's job may take it.
        self.ownership = ownership or Ownership()
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.config = config
        self.clock = clock
        #: (job id, instance) -> why its run on a draining host waits (logged once per reason).
        self.waiting: dict[tuple[str, int], str] = {}
        #: Victims whose mark was not stored: tried again next round.
        self._held: list[tuple[TerminationReason, RunId]] = []
        self._loop = Loop("evictor", self.evict_once, interval=config.evict_interval, log=log)

    def start(self) -> None:
        """Begin evicting in a greenlet."""
        self._loop.start()

    def stop(self) -> None:
        """Stop evicting."""
        self._loop.stop()

    def evict_once(self) -> int:
        """One round; returns how many runs were asked to move."""
        return self._preempt() + self._drain()

    # -- preemption ------------------------------------------------------------------------
    def _preempt(self) -> int:
        runs: dict[tuple[str, TerminationReason], list[RunId]] = defaultdict(list)
        held, self._held = self._held, []
        for reason, rid in held:
            runs[(rid.job_id, reason)].append(rid)
        for victim in self.resmgr.take_victims(self.config.evict_batch, self.ownership.asked()):
            reason = (TerminationReason.KILLED_HOST_MAINTENANCE
                      if victim.reason is VictimReason.HOST_MAINTENANCE
                      else TerminationReason.PREEMPTED_RESOURCES)
            rid = RunId(victim.task_id.job_id, victim.task_id.instance, victim.run_id)
            runs[(rid.job_id, reason)].append(rid)
        moved = 0
        for (job_id, reason), rids in runs.items():
            job = self.cache.get(job_id)
            if job is not None:
                outcome = self._evict(job, _movable(job, rids), reason)
                moved += len(outcome.written)
                self._held.extend((reason, rid) for rid in rids
                                  if rid.instance in outcome.unwritten)
        return moved

    # -- draining hosts --------------------------------------------------------------------
    def _drain(self) -> int:
        draining = self.hostmgr.draining_runs()
        if not draining:
            self.waiting.clear()
            return 0
        requests = self.hostmgr.drain_requests()
        by_job: dict[str, list[tuple[RunId, str]]] = defaultdict(list)
        for host, run_id in draining:
            try:
                rid = RunId.parse(run_id)
            except InvalidArgument:
                continue
            by_job[rid.job_id].append((rid, host))
        moved, waiting = 0, {}
        now = self.clock.wall()
        for job_id, found in by_job.items():
            job = self.cache.get(job_id)
            if job is None or job.spec.type is JobType.DAEMON:
                continue  # the daemon controller removes instances of hosts that leave
            hosts = {rid.instance: host for rid, host in found}
            movable = _movable(job, [rid for rid, _ in found])
            candidates = [Candidate(i, requests.get(hosts[i], JOB_SLA_DRAIN), self._task_sla(job, i))
                          for i in movable]
            snapshot = JobSla(job.job_id, job.spec.type is JobType.SERVICE,
                              job.spec.sla.maximum_unavailable_instances,
                              tuple(instance_sla(i, rt) for i, rt in job.tasks()))
            allowed = []
            for verdict in job_verdicts(snapshot, candidates, now):
                if verdict.allowed:
                    allowed.append(verdict.instance)
                else:
                    waiting[(job_id, verdict.instance)] = verdict.why
            # An instance not stored (outcome.unwritten) is still movable next round.
            moved += len(self._evict(job, allowed,
                                     TerminationReason.KILLED_HOST_MAINTENANCE).written)
        for key, why in waiting.items():
            if self.waiting.get(key) != why:
                log.info("task %s/%d stays on its draining host: %s", key[0], key[1], why)
        self.waiting = waiting
        return moved

    @staticmethod
    def _task_sla(job: CachedJob, instance: int) -> TaskSla:
        try:
            return task_sla(job.task_spec(instance).labels)
        except InvalidArgument as err:
            log.warning("job %s instance %d: %s; drained as if it had none", job.job_id,
                        instance, err)
            return TaskSla()

    # -- the write -------------------------------------------------------------------------
    def _evict(self, job: CachedJob, instances: Collection[int],
               reason: TerminationReason) -> TaskWriteOutcome:
        """Mark each instance's run to move (see the module docstring)."""
        if not instances:
            return TaskWriteOutcome(job.job_id)
        now = self.clock.wall()
        changes = {i: _eviction(job, i, reason, now) for i in instances}
        return job.write_tasks(changes)


def _movable(job: CachedJob, rids: Collection[RunId]) -> list[int]:
    """Instances whose named run is current, live, meant to run and not yet asked to move."""
    out = []
    for r in rids:
        rt = job.get_task(r.instance)
        if rt is not None and rt.run_id == r.run and not rt.state.terminal \
                and rt.goal_state in _LIVE_GOALS and rt.desired_run_id in (0, rt.run_id) \
                and rt.config_version == rt.desired_config_version:
            out.append(r.instance)
    return sorted(set(out))


def _eviction(job: CachedJob, instance: int, reason: TerminationReason, now: float) -> TaskChange:
    """The one write that moves an instance's run (Peloton's getRuntimeDiffForPreempt)."""
    stop = job.task_spec(instance).kill_on_preempt
    goal = S.PREEMPTING if job.spec.type is JobType.BATCH else S.KILLED

    def change(rt: TaskRuntime) -> TaskRuntime | None:
        if rt.state.terminal or rt.goal_state not in _LIVE_GOALS or \
                rt.desired_run_id not in (0, rt.run_id):
            return None  # it ended, was stopped or is already moving since we looked
        marked = dataclasses.replace(rt, message=EVICTING, reason=_REASONS[reason],
                                     termination=reason, update_time=now)
        if stop:
            return dataclasses.replace(marked, goal_state=goal)
        return dataclasses.replace(marked, desired_run_id=rt.run_id + 1)

    return change
