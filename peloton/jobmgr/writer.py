"""Persisting task runtimes: compare-and-set through group commit, then the cache.

Callers describe a change as a function of the current runtime
(`Change`), not as a value: if a write loses its compare-and-set (another
greenlet wrote the task first), the writer reloads that task and applies
the function again, so a decision is always made on the latest runtime.
Every state or run change also leaves a pod event, which is what
`task events` / GetPodEvents show.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from peloton.core.model.events import PodEvent
from peloton.core.model.task import TaskRuntime
from peloton.jobmgr.cache import CachedJob
from peloton.storage import GroupCommitter, RuntimeWrite, Store

log = logging.getLogger(__name__)

#: A change to one task: current runtime -> new runtime, or None for "nothing to write".
Change = Callable[[TaskRuntime], TaskRuntime | None]

#: Compare-and-set rounds before a change is given up (each one reloads the losers).
MAX_ROUNDS = 5
#: Batches at least this big skip group commit (see `apply`).
DIRECT_BATCH = 64


class TaskWriter:
    """Writes task runtimes of cached jobs."""

    def __init__(self, store: Store, committer: GroupCommitter,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.committer = committer
        self.clock = clock

    def apply(self, job: CachedJob, changes: Mapping[int, Change]) -> dict[int, TaskRuntime]:
        """Apply `changes` to the named instances; returns the runtimes written.

        Instances whose change returns None, that have no runtime, or that keep
        losing their compare-and-set are left out of the result.
        """
        pending = dict(changes)
        written: dict[int, TaskRuntime] = {}
        for _ in range(MAX_ROUNDS):
            writes: list[RuntimeWrite] = []
            before: dict[int, TaskRuntime] = {}
            for inst, change in pending.items():
                cur = job.get_task(inst)
                if cur is None:
                    continue
                new = change(cur)
                if new is None:
                    continue
                before[inst] = cur
                writes.append(RuntimeWrite(job.job_id, inst, new))
            if not writes:
                break
            # A big batch is its own transaction already; only small ones (a goal-state
            # action's single task) gain from sharing one with other callers.
            if len(writes) >= DIRECT_BATCH:
                result = self.store.write_task_runtimes(writes)
            else:
                result = self.committer.write_many(writes)
            events: list[PodEvent] = []
            for task, stored in result.written.items():
                job.set_task(task.instance, stored)
                written[task.instance] = stored
                old = before[task.instance]
                if old.state is not stored.state or old.run_id != stored.run_id or \
                        old.healthy is not stored.healthy:
                    events.append(pod_event(job.job_id, task.instance, stored))
            if events:
                self.store.add_pod_events(events)
            lost = {t.instance for t in result.conflicts | result.missing}
            if not lost:
                break
            self._reload(job, lost)
            pending = {inst: pending[inst] for inst in lost if inst in pending}
        else:
            log.warning("job %s: gave up writing instances %s after %d rounds",
                        job.job_id, sorted(pending), MAX_ROUNDS)
        return written

    def apply_one(self, job: CachedJob, instance: int, change: Change) -> TaskRuntime | None:
        """`apply` for a single instance."""
        return self.apply(job, {instance: change}).get(instance)

    def _reload(self, job: CachedJob, instances: set[int]) -> None:
        fresh = self.store.get_task_runtimes(job.job_id, instances)
        for inst in instances:
            if inst in fresh:
                job.set_task(inst, fresh[inst])
            else:
                job.drop_task(inst)


def pod_event(job_id: str, instance: int, rt: TaskRuntime) -> PodEvent:
    """The history record of a runtime just written."""
    return PodEvent(job_id=job_id, instance=instance, run_id=rt.run_id, state=rt.state,
                    goal_state=rt.goal_state, time=rt.update_time, prev_run_id=rt.prev_run_id,
                    desired_run_id=rt.desired_run_id, host=rt.host, agent_id=rt.agent_id,
                    config_version=rt.config_version,
                    desired_config_version=rt.desired_config_version, message=rt.message,
                    reason=rt.reason, healthy=rt.healthy)
