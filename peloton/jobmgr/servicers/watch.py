"""v1alpha WatchService: streams of job and pod changes (`peloton.api.v1alpha.watch.svc`).

A small in-process publisher (Peloton's watchsvc processor) fed by the job
cache's listeners: every task runtime, job runtime or workflow a cached
job takes on is offered to the watchers whose filter matches.  It
subscribes to the cache only while someone watches.

Each watcher has a bounded buffer of raw changes (immutable runtimes,
converted to wire messages by the watcher's own stream, not by the writer
that made the change).  A watcher whose client does not keep up and
overflows its buffer is dropped: its stream ends with ABORTED "event
overflow", as in Peloton, rather than holding unbounded memory.  Cancel
ends a stream with CANCELLED.  The first response carries only the watch
id; later ones carry up to `BATCH` changes each (Peloton sent one per
response; clients read the repeated fields either way).

Differences from Peloton: changes of every job type are published (Peloton
only published stateless ones), workflow changes count as job changes,
and Cancel works for job watches too (Peloton answered NOT_FOUND there).
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent.event
import grpc

from peloton.api import peloton_texts as texts
from peloton.api.convert.v1_job import job_summary_to_v1
from peloton.api.convert.v1_pod_status import pod_summary_to_v1
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as pb
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2_grpc as pb_grpc
from peloton.core.errors import Conflict, InvalidArgument, NotFound, ResourceExhausted
from peloton.core.model.constraints import Label
from peloton.core.model.task import TaskRuntime
from peloton.jobmgr.aggregate import CachedJob
from peloton.jobmgr.job_deps import Listeners
from peloton.jobmgr.servicers.common import job_summary

log = logging.getLogger(__name__)

#: Changes per response.
BATCH = 100
#: How often a waiting stream checks that its client is still there (seconds).
POLL = 1.0


@dataclass(eq=False)
class Watcher:
    """One watch: its filter and its bounded buffer of changes."""

    watch_id: str
    pods: bool
    job_ids: frozenset[str] = frozenset()
    pod_names: frozenset[str] = frozenset()
    labels: tuple[Label, ...] = ()
    limit: int = 10_000
    buffer: deque[Any] = field(default_factory=deque)
    wake: gevent.event.Event = field(default_factory=gevent.event.Event)
    ended: str = ""  # "cancel" or "overflow" once the publisher dropped it

    def offer(self, item: Any) -> bool:
        """Buffer a change; False if the buffer is full."""
        if len(self.buffer) >= self.limit:
            return False
        self.buffer.append(item)
        self.wake.set()
        return True


def _has_labels(wanted: tuple[Label, ...], have: tuple[Label, ...]) -> bool:
    return all(label in have for label in wanted)


class WatchPublisher:
    """Fans job and pod changes out to watchers; see the module notes."""

    def __init__(self, listeners: Listeners, buffer_size: int = 10_000,
                 max_clients: int = 1000) -> None:
        self.listeners = listeners
        self.buffer_size = buffer_size
        self.max_clients = max_clients
        self.watchers: dict[str, Watcher] = {}
        self._subscribed = False

    def add(self, pods: bool, job_ids: frozenset[str] = frozenset(),
            pod_names: frozenset[str] = frozenset(), labels: tuple[Label, ...] = ()) -> Watcher:
        """A new watcher (ResourceExhausted past `max_clients`)."""
        if len(self.watchers) >= self.max_clients:
            raise ResourceExhausted("max client reached")  # Peloton's text
        kind = "task" if pods else "job"  # Peloton's watch id prefixes
        watcher = Watcher(f"{kind}_{uuid.uuid4()}", pods, job_ids, pod_names, labels,
                          self.buffer_size)
        self.watchers[watcher.watch_id] = watcher
        self._subscribe()
        return watcher

    def drop(self, watch_id: str, why: str) -> bool:
        """End a watcher's stream (`why` "cancel" or "overflow"); False if unknown."""
        watcher = self.watchers.pop(watch_id, None)
        if watcher is None:
            return False
        watcher.ended = watcher.ended or why
        watcher.wake.set()
        if not self.watchers:
            self._unsubscribe()
        return True

    def _subscribe(self) -> None:
        if not self._subscribed:
            self.listeners.task.append(self._on_task)
            self.listeners.job.append(self._on_job)
            self._subscribed = True

    def _unsubscribe(self) -> None:
        if self._subscribed:
            self.listeners.task.remove(self._on_task)
            self.listeners.job.remove(self._on_job)
            self._subscribed = False

    def _deliver(self, watcher: Watcher, item: Any) -> None:
        if not watcher.offer(item):
            log.warning("watch %s fell %d changes behind; ending it", watcher.watch_id,
                        watcher.limit)
            self.drop(watcher.watch_id, "overflow")

    def _on_task(self, job: CachedJob, instance: int, rt: TaskRuntime) -> None:
        name = f"{job.job_id}-{instance}"
        for watcher in list(self.watchers.values()):
            if not watcher.pods or (watcher.job_ids and job.job_id not in watcher.job_ids):
                continue
            if watcher.pod_names and name not in watcher.pod_names:
                continue
            if watcher.labels and not _has_labels(
                    watcher.labels, job.task_spec(instance, rt.config_version).labels):
                continue
            self._deliver(watcher, (job.job_id, instance, rt))

    def _on_job(self, job: CachedJob) -> None:
        spec, runtime, update = job.spec, job.runtime, job.update
        for watcher in list(self.watchers.values()):
            if watcher.pods or (watcher.job_ids and job.job_id not in watcher.job_ids):
                continue
            if watcher.labels and not _has_labels(watcher.labels, spec.labels):
                continue
            self._deliver(watcher, (job.job_id, spec, runtime, update))


def _labels(labels: Any) -> tuple[Label, ...]:
    return tuple(Label(lb.key, lb.value) for lb in labels)


class WatchServicer(pb_grpc.WatchServiceServicer):  # type: ignore[misc]
    """Watch and Cancel."""

    def __init__(self, publisher: WatchPublisher) -> None:
        self.publisher = publisher

    def Watch(self, request: pb.WatchRequest, context: Any) -> Iterator[pb.WatchResponse]:
        if request.HasField("pod_filter"):
            flt = request.pod_filter
            job_ids = frozenset({flt.job_id.value}) if flt.job_id.value else frozenset()
            watcher = self.publisher.add(True, job_ids, frozenset(n.value for n in flt.pod_names),
                                         _labels(flt.labels))
        elif request.HasField("stateless_job_filter"):
            jflt = request.stateless_job_filter
            watcher = self.publisher.add(False, frozenset(j.value for j in jflt.job_ids),
                                         labels=_labels(jflt.labels))
        else:
            raise InvalidArgument(texts.WATCH_TYPE_UNSUPPORTED, field="pod_filter")
        try:
            yield pb.WatchResponse(watch_id=watcher.watch_id)
            while True:
                if not watcher.buffer and not watcher.ended:
                    watcher.wake.clear()
                    watcher.wake.wait(POLL)
                if watcher.ended == "overflow":
                    raise Conflict(f"event overflow: {watcher.watch_id}")  # Peloton's text
                if watcher.ended:
                    context.abort(grpc.StatusCode.CANCELLED,
                                  f"watch cancelled: {watcher.watch_id}")
                if not context.is_active():
                    return
                if watcher.buffer:
                    yield self._response(watcher)
        finally:
            self.publisher.drop(watcher.watch_id, "cancel")

    @staticmethod
    def _response(watcher: Watcher) -> pb.WatchResponse:
        out = pb.WatchResponse(watch_id=watcher.watch_id)
        for _ in range(min(BATCH, len(watcher.buffer))):
            item = watcher.buffer.popleft()
            if watcher.pods:
                job_id, instance, rt = item
                out.pods.append(pod_summary_to_v1(job_id, instance, rt))
            else:
                job_id, spec, runtime, update = item
                out.stateless_jobs.append(job_summary_to_v1(job_summary(job_id, spec, runtime),
                                                            update))
        return out

    def Cancel(self, request: pb.CancelRequest, context: Any) -> pb.CancelResponse:
        if not self.publisher.drop(request.watch_id, "cancel"):
            # Peloton's texts: a pod ("task_") watch it does not know, anything else.
            if request.watch_id.startswith("task_"):
                raise NotFound(f"watch_id {request.watch_id} not exist for task watch client",
                               field="watch_id")
            raise NotFound(texts.WATCH_ID_INVALID, field="watch_id")
        return pb.CancelResponse()
