"""The job manager's in-memory view of active jobs.

Storage is the truth; the cache is what the job manager last wrote or read
there, so every decision can be made without a database round trip and
every write is a compare-and-set against the revision the cache holds.
Task state counts are kept incrementally (O(1) per change) because a job's
state is derived from them after every event.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import gevent.lock

from peloton.core.errors import NotFound
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.model.update import UpdateInfo
from peloton.core.states import TaskState


class CachedJob:
    """One job: its current config, runtime, task runtimes and active workflow."""

    __slots__ = ("_tasks", "counts", "job_id", "lock", "runtime", "spec", "specs", "update")

    def __init__(self, job_id: str, spec: JobSpec, runtime: JobRuntime) -> None:
        self.job_id = job_id
        self.spec = spec
        self.runtime = runtime
        #: Config versions loaded so far (the current one, and an update's target/source).
        self.specs: dict[int, JobSpec] = {spec.version: spec}
        self._tasks: dict[int, TaskRuntime] = {}
        self.counts: Counter[TaskState] = Counter()
        self.update: UpdateInfo | None = None
        #: Serialises job-level actions (create, kill, runtime update) of this job.
        self.lock = gevent.lock.RLock()

    # -- tasks -----------------------------------------------------------------
    def task(self, instance: int) -> TaskRuntime:
        """The cached runtime of one instance; NotFound if it has none."""
        try:
            return self._tasks[instance]
        except KeyError:
            raise NotFound(f"instance {instance} of job {self.job_id} not found") from None

    def get_task(self, instance: int) -> TaskRuntime | None:
        """The cached runtime of one instance, or None."""
        return self._tasks.get(instance)

    def set_task(self, instance: int, rt: TaskRuntime) -> None:
        """Record a stored runtime (ignores one older than what is cached)."""
        old = self._tasks.get(instance)
        if old is not None:
            if old.revision > rt.revision:
                return
            self.counts[old.state] -= 1
        self._tasks[instance] = rt
        self.counts[rt.state] += 1

    def drop_task(self, instance: int) -> None:
        """Forget one instance (it was deleted)."""
        old = self._tasks.pop(instance, None)
        if old is not None:
            self.counts[old.state] -= 1

    def tasks(self) -> Iterator[tuple[int, TaskRuntime]]:
        """(instance, runtime) pairs in instance order."""
        for inst in sorted(self._tasks):
            yield inst, self._tasks[inst]

    def instances(self) -> list[int]:
        """Instance ids that have a runtime."""
        return sorted(self._tasks)

    def __len__(self) -> int:
        return len(self._tasks)

    # -- configs -----------------------------------------------------------------
    def spec_version(self, version: int) -> JobSpec | None:
        """A loaded config version, or None."""
        return self.specs.get(version)

    def task_spec(self, instance: int, version: int | None = None) -> TaskSpec:
        """The spec an instance runs with at `version` (default: the current config)."""
        spec = self.specs.get(version, self.spec) if version is not None else self.spec
        return spec.task_spec(instance)

    def state_counts(self) -> dict[TaskState, int]:
        """Task count per state (only non-zero entries)."""
        return {state: n for state, n in self.counts.items() if n > 0}


class JobCache:
    """All active jobs by id."""

    def __init__(self) -> None:
        self._jobs: dict[str, CachedJob] = {}

    def add(self, job: CachedJob) -> CachedJob:
        """Track a job (replacing any previous entry)."""
        self._jobs[job.job_id] = job
        return job

    def get(self, job_id: str) -> CachedJob | None:
        """The cached job, or None if it is not active."""
        return self._jobs.get(job_id)

    def remove(self, job_id: str) -> None:
        """Stop tracking a job."""
        self._jobs.pop(job_id, None)

    def __iter__(self) -> Iterator[CachedJob]:
        return iter(list(self._jobs.values()))

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs
