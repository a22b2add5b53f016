"""What task queries reuse between requests: converted tasks, whole replies, shared reads.

Task listings are polled: by the Aurora CLI while it waits for an update, by
dashboards, by many clients at once, mostly over pods that have not changed.
Three layers keep a repeated query of a 5,000-task job cheap:

* `task(key, make)`: the ScheduledTask of one pod run, keyed by the bytes of
  its Peloton PodStatus (plus job, pod and executor choice).  A run's spec is
  fixed by its config version, which the status carries, so equal bytes mean
  an equal task; any change to the pod (state, host, ports, message, run)
  changes the bytes, and the run is converted afresh.  With the task, its
  binary encoding, made once: a changed listing's reply is spliced from
  those bytes (codec.EncodedStructs), so only the changed runs are encoded
  again.
* `pods(job)`: what each pod of a job added to the job's last big,
  unfiltered listing (its runs' tasks with their encodings and sort keys,
  task_runs.Listed), by the bytes of its Peloton PodInfo: an unchanged pod
  costs a lookup, not a look at each of its runs.  Each listing keeps only
  the pods it listed, so the job's current pods are what is held; a pod is
  kept only when its runs follow from its PodInfo alone (its earlier runs
  remembered, below).
* `earlier_runs(key)`: the earlier runs of a pod (GetPod), keyed by
  its current run: a run that has a successor is finished and its record
  no longer changes, so they are read once per run of the pod, not once per
  request (a job whose pods all restarted once would otherwise cost one
  GetPod per instance per listing).  A purge of a finished run's events
  (DeletePodEvents) shows once the pod runs again or its entry is evicted.
* `reply(key, fingerprint, make)`: the previous Response of the same query
  when everything it was computed from (the caller's fingerprint: jobs and
  the bytes of their QueryPods replies, which name every current run and so
  every cached earlier run) is unchanged; the processor then also
  reuses its encoding (processor.ThriftProcessor).
* `shared(key, fn)`: overlapping identical queries share one computation that
  started after each of them arrived (coalesce.Coalescer), so answers are as
  fresh as unshared ones.

Everything handed out here is shared between replies and must not be mutated.
Memory is bounded: the oldest entries go first.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from aurorabridge import codec
from aurorabridge.coalesce import Coalescer

MAX_TASKS = 50_000  # about 1.5 KB each with its encoding: ~75 MB at most
MAX_REPLIES = 64
MAX_EARLIER = 10_000  # pods; up to pod_runs_depth - 1 runs each, with their specs
MAX_LISTED_JOBS = 64  # jobs (and executor choices); each its current pods, sharing the tasks above


def _trim(cache: dict[Any, Any], limit: int) -> None:
    """Drop the oldest quarter of `cache` when it is full (dicts keep insertion order)."""
    if len(cache) >= limit:
        for old in list(cache)[: max(1, limit // 4)]:
            del cache[old]


class TaskAnswers:
    """The caches of the task handlers (one per BridgeContext)."""

    def __init__(self, max_tasks: int = MAX_TASKS, max_replies: int = MAX_REPLIES,
                 max_earlier: int = MAX_EARLIER, max_listed_jobs: int = MAX_LISTED_JOBS) -> None:
        self._max_tasks = max_tasks
        self._max_replies = max_replies
        self._max_earlier = max_earlier
        self._max_listed_jobs = max_listed_jobs
        self._tasks: dict[tuple[str, str, bool, bytes], tuple[Any, bytes]] = {}
        self._pods: dict[Hashable, dict[bytes, Any]] = {}
        self._earlier: dict[tuple[str, str, str, int], tuple[Any, ...]] = {}
        self._replies: dict[Hashable, tuple[Hashable, Any]] = {}
        self._coalescer: Coalescer[Any] = Coalescer()

    def task(self, job: str, pod_name: str, with_executor: bool, status: Any,
             make: Callable[[], Any]) -> tuple[Any, bytes]:
        """The cached ScheduledTask of a run with this PodStatus, else `make()` (remembered),
        with its binary encoding (codec.encode_struct)."""
        key = (job, pod_name, with_executor, status.SerializeToString(deterministic=True))
        hit = self._tasks.get(key)
        if hit is None:
            task = make()
            hit = (task, codec.encode_struct(task))
            _trim(self._tasks, self._max_tasks)
            self._tasks[key] = hit
        return hit

    def pods(self, job: Hashable) -> dict[bytes, Any]:
        """What each pod added to the last big listing of `job` (job name and executor choice;
        see task_runs.listing), by its PodInfo's bytes; empty if none is remembered."""
        return self._pods.get(job, {})

    def remember_pods(self, job: Hashable, pods: dict[bytes, Any]) -> None:
        """Remember what each pod added to a big listing of `job`, replacing the last one's."""
        self._pods.pop(job, None)  # re-inserted as the newest
        _trim(self._pods, self._max_listed_jobs)
        self._pods[job] = pods

    def earlier_runs(self, key: tuple[str, str, str, int]) -> tuple[Any, ...] | None:
        """The remembered earlier runs of a pod as of its current run, `key` = (job id, pod
        name, current pod id, runs asked for), or None."""
        return self._earlier.get(key)

    def remember_earlier_runs(self, key: tuple[str, str, str, int], runs: tuple[Any, ...]) -> None:
        """Remember the earlier runs read for `key` (see `earlier_runs`)."""
        _trim(self._earlier, self._max_earlier)
        self._earlier[key] = runs

    def reply(self, key: Hashable, fingerprint: Hashable, make: Callable[[], tuple[Any, bool]]) -> Any:
        """The last Response for `key` if it was made from an equal `fingerprint`, else the
        Response of `make()`, which also says whether it may be reused for that fingerprint."""
        last = self._replies.get(key)
        if last is not None and last[0] == fingerprint:
            return last[1]
        response, reusable = make()
        self._replies.pop(key, None)  # re-inserted as the newest, or forgotten
        if reusable:
            _trim(self._replies, self._max_replies)
            self._replies[key] = (fingerprint, response)
        return response

    def shared(self, key: Hashable, fn: Callable[[], Any]) -> Any:
        """`fn()`, shared with overlapping callers of the same key (see coalesce)."""
        return self._coalescer.run(key, fn)
