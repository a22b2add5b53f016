"""What every job manager component shares: storage, cache, writer, ports, engines, clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from peloton.common.goalstate import Engine
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.sched import NeedsCache
from peloton.jobmgr.writer import TaskWriter
from peloton.storage import Store


@dataclass
class JobContext:
    """Wiring shared by the job manager's components (built once in app.py)."""

    store: Store
    writer: TaskWriter
    resmgr: ResourceManagerPort
    hostmgr: HostManagerPort
    config: JobManagerConfig
    cache: JobCache = field(default_factory=JobCache)
    needs: NeedsCache = field(default_factory=NeedsCache)
    clock: Callable[[], float] = time.time
    task_engine: Engine | None = None
    job_engine: Engine | None = None
    update_engine: Engine | None = None
    #: Called with a job id whenever its tasks changed (debounced job runtime update).
    on_tasks_changed: Callable[[str], None] = lambda job_id: None
    #: Called with a job id when its active workflow should be evaluated.
    on_update_due: Callable[[str], None] = lambda job_id: None

    def enqueue_task(self, job_id: str, instance: int, delay: float = 0.0) -> None:
        """Have the task goal-state engine look at one task (after `delay` seconds)."""
        from peloton.jobmgr.goalstate.task import TaskEntity

        if self.task_engine is not None:
            self.task_engine.enqueue_after(TaskEntity(self, job_id, instance), delay)

    def enqueue_job(self, job_id: str, delay: float = 0.0) -> None:
        """Have the job goal-state engine look at one job."""
        from peloton.jobmgr.goalstate.job import JobEntity

        if self.job_engine is not None:
            self.job_engine.enqueue_after(JobEntity(self, job_id), delay)
