"""The job manager's in-memory view of active jobs.

Storage is the truth; the cache is what the job manager last wrote or read
there, so every decision can be made without a database round trip and
every write is a compare-and-set against the revision the cache holds.
Task state counts are kept incrementally (O(1) per change) because a job's
state is derived from them after every event.

`JobCache.listeners` are told about every task runtime, job runtime and
workflow a cached job takes on (the watch API subscribes there); with no
listener the cost is one empty-list check per change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import gevent.lock

from peloton.core.errors import NotFound
from peloton.core.model.job import JobRuntime, JobSpec
from peloton.core.model.task import TaskRuntime, TaskSpec
from peloton.core.model.update import UpdateInfo
from peloton.core.states import TaskState

#: Told (job, instance, runtime) after a cached job takes on a task runtime.
TaskListener = Callable[["CachedJob", int, TaskRuntime], None]
#: Told (job) after a cached job's runtime or workflow changed.
JobListener = Callable[["CachedJob"], None]


class Listeners:
    """Callbacks of the jobs in one cache; called on the job manager's hub, must not block."""

    __slots__ = ("job", "task")

    def __init__(self) -> None:
        self.task: list[TaskListener] = []
        self.job: list[JobListener] = []


#: Listeners of jobs not (yet) in a cache: loading a job is not a change.
_NONE = Listeners()


class CachedJob:
    """One job: its current config, runtime, task runtimes and active workflow."""

    __slots__ = ("_listeners", "_runtime", "_tasks", "_update", "counts", "job_id", "lock",
                 "spec", "specs")

    def __init__(self, job_id: str, spec: JobSpec, runtime: JobRuntime) -> None:
        self._listeners = _NONE
        self.job_id = job_id
        self.spec = spec
        self._runtime = runtime
        #: Config versions loaded so far (the current one, and an update's target/source).
        self.specs: dict[int, JobSpec] = {spec.version: spec}
        self._tasks: dict[int, TaskRuntime] = {}
        self.counts: Counter[TaskState] = Counter()
        self._update: UpdateInfo | None = None
        #: Serialises job-level actions (create, kill, runtime update) of this job.
        self.lock = gevent.lock.RLock()

    # -- runtime and workflow (listeners are told of every change) ---------------
    @property
    def runtime(self) -> JobRuntime:
        """The job runtime as last stored."""
        return self._runtime

    @runtime.setter
    def runtime(self, runtime: JobRuntime) -> None:
        self._runtime = runtime
        for fn in self._listeners.job:
            fn(self)

    @property
    def update(self) -> UpdateInfo | None:
        """The job's current workflow (active or finished), if loaded."""
        return self._update

    @update.setter
    def update(self, update: UpdateInfo | None) -> None:
        self._update = update
        for fn in self._listeners.job:
            fn(self)

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
        for fn in self._listeners.task:
            fn(self, instance, rt)

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
        #: Told of changes to every cached job (see the module notes).
        self.listeners = Listeners()

    def add(self, job: CachedJob) -> CachedJob:
        """Track a job (replacing any previous entry)."""
        job._listeners = self.listeners
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
