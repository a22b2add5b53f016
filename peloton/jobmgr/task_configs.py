"""Per-instance task configs of cached jobs, held within a byte budget.

A job may give each of its instances its own config, each up to the request
maxima (peloton/api/limits.py): three jobs of 800 per-instance configs of 60 KiB
took the job manager from 140 to 877 MB, and it stayed there, because every
cached config version kept every instance's `TaskSpec` for as long as the job was
active.  Now a cached job's `JobSpec.instance_tasks` is an `InstanceTasks`: it
knows which instances have their own config, and fetches each spec from the job
manager's one `TaskConfigCache`, a least-recently-used map whose accounted bytes
stay within `JobManagerConfig.task_config_cache_bytes`; a spec that is not
there is read back from storage (`get_task_config`).

Why that is safe:
* storage is the truth: a config version's per-instance configs are stored
  (create_job_with_tasks, new_config) before a cached job holds that version, and
  a stored version never changes, so a spec read back is the spec that was cached;
* a read that misses waits for the store (its thread pool), so other greenlets run
  meanwhile; what they can change is runtimes and which version is current, never
  the content of a version a reader holds.

The accounting is an estimate of the Python objects a spec holds (`approx_bytes`):
the lengths of what can be big in it plus a fixed overhead per object, so it tracks
what the spec costs in memory without walking the interpreter's allocator.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from peloton.core.model.job import JobSpec
from peloton.core.model.task import TaskSpec
from peloton.storage.task_store import TaskConfigReads

#: (job id, config version, instance)
Key = tuple[str, int, int]
#: Default budget of the per-instance config cache (JobManagerConfig.task_config_cache_bytes).
DEFAULT_CAP_BYTES = 64 * 1024 * 1024

# Rough CPython sizes: an object header with a few fields, a container slot.
_OBJECT = 56
_SLOT = 8


def approx_bytes(task: TaskSpec) -> int:
    """An estimate of the memory a task spec takes: what can be big in it (strings, the
    environment, arguments, labels, ports) plus a fixed overhead per object.  Cheap: it
    runs for every spec the cache takes in."""
    command = task.command
    total = 8 * _OBJECT + len(task.name) + len(command.value) + len(task.container_image) + \
        len(task.executor_data) + len(command.user)
    total += sum(len(k) + len(v) for k, v in command.environment) + \
        len(command.environment) * 4 * _OBJECT
    total += sum(len(a) for a in command.arguments) + len(command.arguments) * (_OBJECT + _SLOT)
    total += sum(_SLOT + _small(uri) for uri in command.uris)
    total += sum(len(label.key) + len(label.value) for label in task.labels) + \
        len(task.labels) * 4 * _OBJECT
    total += len(task.ports) * 4 * _OBJECT
    if task.constraint is not None or task.health_check is not None:
        total += _small(task.constraint) + _small(task.health_check)
    return total


def _small(value: Any) -> int:
    # Constraint trees and health checks: bounded by the nesting maxima, walked generically.
    if isinstance(value, (str, bytes)):
        return _OBJECT + len(value)
    if isinstance(value, (tuple, list)):
        return _OBJECT + sum(_SLOT + _small(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _OBJECT + sum(_SLOT + _small(getattr(value, f.name))
                             for f in dataclasses.fields(value))
    return 0  # numbers, enums, None: small or shared


class TaskConfigCache:
    """Per-instance task specs by (job, version, instance), least recently used out first.

    Its accounted bytes (`bytes`) never exceed `cap_bytes` once a call returns; a spec
    bigger than the whole budget is handed out without being kept.  One per job manager,
    used on its hub only.
    """

    def __init__(self, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        if cap_bytes < 0:
            raise ValueError("cap_bytes must be >= 0")
        self.cap_bytes = cap_bytes
        self._entries: OrderedDict[Key, tuple[TaskSpec, int]] = OrderedDict()
        self._by_job: dict[str, set[Key]] = {}
        self._bytes = 0
        #: Specs read back from storage since the start (a miss), for tests and metrics.
        self.loads = 0

    @property
    def bytes(self) -> int:
        """Accounted bytes of the specs held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key, load: Callable[[], TaskSpec]) -> TaskSpec:
        """The spec at `key`, from memory or else from `load()` (which may wait on storage)."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            return entry[0]
        spec = load()
        self.loads += 1
        self._put(key, spec, evict=True)
        return spec

    def offer(self, key: Key, spec: TaskSpec) -> bool:
        """Keep `spec` if it fits without pushing anything out; whether it was kept.
        (A job's specs are offered as it is cached: they are in memory already.)"""
        if key in self._entries:
            return True
        return self._put(key, spec, evict=False)

    def forget_job(self, job_id: str) -> None:
        """Drop every spec of a job (it left the cache, or was deleted)."""
        for key in self._by_job.pop(job_id, set()):
            _spec, size = self._entries.pop(key)
            self._bytes -= size

    def _put(self, key: Key, spec: TaskSpec, *, evict: bool) -> bool:
        size = approx_bytes(spec)
        if size > self.cap_bytes or (not evict and self._bytes + size > self.cap_bytes):
            return False
        while self._bytes + size > self.cap_bytes:
            old, (_spec, old_size) = self._entries.popitem(last=False)
            self._bytes -= old_size
            keys = self._by_job.get(old[0])
            if keys is not None:
                keys.discard(old)
                if not keys:
                    del self._by_job[old[0]]
        self._entries[key] = (spec, size)
        self._by_job.setdefault(key[0], set()).add(key)
        self._bytes += size
        return True


class InstanceTasks(Mapping[int, TaskSpec]):
    """A cached config version's per-instance specs: the instances are known, the specs
    come from the TaskConfigCache (or storage).  Read-only, like the dict it replaces."""

    __slots__ = ("_cache", "_instances", "_job_id", "_store", "_version")

    def __init__(self, cache: TaskConfigCache, store: TaskConfigReads, job_id: str, version: int,
                 instances: frozenset[int]) -> None:
        self._cache = cache
        self._store = store
        self._job_id = job_id
        self._version = version
        self._instances = instances

    def __getitem__(self, instance: int) -> TaskSpec:
        if instance not in self._instances:
            raise KeyError(instance)
        return self._cache.get((self._job_id, self._version, instance), lambda: (
            self._store.get_task_config(self._job_id, instance, self._version)))

    def __contains__(self, instance: object) -> bool:
        return instance in self._instances

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._instances))

    def __len__(self) -> int:
        return len(self._instances)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, InstanceTasks) and (other._job_id, other._version) == (
                self._job_id, self._version):
            return other._instances == self._instances  # one stored version: same specs
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # like the dict it stands for

    def __repr__(self) -> str:
        return (f"InstanceTasks(job {self._job_id} v{self._version}, "
                f"{len(self._instances)} instances)")


def held_lightly(spec: JobSpec, job_id: str, cache: TaskConfigCache,
                 store: TaskConfigReads) -> JobSpec:
    """`spec` (a stored version of job `job_id`) with its per-instance specs moved into
    `cache`: what a cached job keeps.  Specs that fit are offered to the cache, so a job
    just created or loaded does not read them back at once."""
    tasks = spec.instance_tasks
    if not tasks or isinstance(tasks, InstanceTasks):
        return spec
    for instance, task in tasks.items():
        if not cache.offer((job_id, spec.version, instance), task):
            break
    return dataclasses.replace(spec, instance_tasks=InstanceTasks(
        cache, store, job_id, spec.version, frozenset(tasks)))
