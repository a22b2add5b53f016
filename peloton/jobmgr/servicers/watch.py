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

Two additions serve the all-active members' fan-in (watch_fanin.py), which
must tell "everything was sent" from "something may be missing":

* **A leave ends the streams cleanly.**  `leave()`, called by a member's
  stop after it released its partitions and before its gRPC server stops,
  ends every stream with OK and the trailer `peloton-watch-left` once its
  buffered changes are sent, and answers later watches the same way at once:
  from then on this process publishes nothing.  A stream that ends any other
  way (an error, a cut connection, OK without the trailer) may have lost
  changes.
* **A young publisher's history.**  With `journal`, every change this
  process publishes is also kept from its start, while there are at most
  `journal_size` of them and for `journal_seconds`; a Watch carrying
  `peloton-watch-from: start` is given those changes (filtered) before the
  live ones, so a fan-in that learns of a joiner after the joiner began
  publishing misses nothing.  Once the history no longer covers the start
  such a Watch is refused with OUT_OF_RANGE (the fan-in then ends its
  caller's watch: list and watch again), never answered with a gap.
* **A partition's history since its claim.**  With `partition` (the member's
  job -> partition), the changes of each partition's jobs since this member
  last claimed it (`claimed`, `released`: app.py's acquire and release) are kept
  the same way, within the same limits together (watch_claims.py); a Watch of
  named jobs carrying `peloton-watch-from: claim` is given those before the live
  ones, so a one-job watch that follows its job to a new owner misses nothing the
  owner published between its claim and the stream's opening.  With
  `peloton-watch-after: <epoch>` (the claim the fan-in read last) the claim must have
  taken over from that epoch: otherwise the Watch is refused OUT_OF_RANGE, or, for a
  partition this member claims only later, ended with an overflow when it does (a
  member the fan-in never read drove the job in between).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gevent
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
from peloton.jobmgr.servicers.watch_claims import ClaimHistories, HistoryGone, taken_over

log = logging.getLogger(__name__)

#: Changes per response.
BATCH = 100
#: How often a waiting stream checks that its client is still there (seconds).
POLL = 1.0
#: Trailer of a stream ended by `WatchPublisher.leave`: everything was sent.
LEFT_KEY = "peloton-watch-left"
#: Metadata asking for the changes published since this process started (value "start")
#: or, for a Watch of named jobs, since this process claimed their partitions ("claim").
FROM_KEY = "peloton-watch-from"
#: Metadata of a "claim" Watch: the epoch of the claim of the job's partition the caller
#: read last; this member's claim must have taken over from it (module notes).
AFTER_KEY = "peloton-watch-after"
#: How long a young publisher's history covers its start (seconds), and at most how many
#: changes it holds.
JOURNAL_SECONDS = 60.0
JOURNAL_SIZE = 10_000


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
    ended: str = ""  # "cancel", "overflow" or "leave" once the publisher dropped it

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
    """Fans job and pod changes out to watchers; see the module notes.  `journal`: keep
    the changes published since the start while young (all-active members);
    `partition`: a job's partition, to keep each partition's changes since its claim
    (members); `clock`: monotonic seconds, for the histories' age."""

    def __init__(self, listeners: Listeners, buffer_size: int = 10_000,
                 max_clients: int = 1000, *, journal: bool = False,
                 journal_seconds: float = JOURNAL_SECONDS, journal_size: int = JOURNAL_SIZE,
                 partition: Callable[[str], int] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.listeners = listeners
        self.buffer_size = buffer_size
        self.max_clients = max_clients
        self.watchers: dict[str, Watcher] = {}
        self._subscribed = False
        self._left = False
        self._publishing = False
        self._clock = clock
        # ("task", job, instance, runtime) or ("job", job_id, spec, runtime, update).
        self._journal: list[tuple[Any, ...]] | None = [] if journal else None
        self._journal_until = clock() + journal_seconds
        self._journal_size = min(journal_size, buffer_size)  # a replay never overflows
        self._claims = None if partition is None else ClaimHistories(
            partition, seconds=journal_seconds, size=self._journal_size, clock=clock)
        #: Partition -> {watch id: the epoch its claim here must take over from}, for
        #: "claim" watches that came before this member claimed the partition.
        self._expected: dict[int, dict[str, int]] = {}
        if journal:
            self._subscribe()  # the history starts now, watched or not

    def add(self, pods: bool, job_ids: frozenset[str] = frozenset(),
            pod_names: frozenset[str] = frozenset(), labels: tuple[Label, ...] = (), *,
            from_start: bool = False, from_claim: bool = False,
            after: int | None = None) -> Watcher:
        """A new watcher (ResourceExhausted past `max_clients`).  `from_start`: its buffer
        begins with the matching changes published since this process started;
        `from_claim`: since this process claimed the partitions of `job_ids` (which must
        name some: InvalidArgument); HistoryGone if they are no longer all kept, or, with
        `after`, if a claim took over from another epoch (a partition claimed only later
        is checked then, `claimed`).  After `leave` the watcher has ended already
        (nothing more will be published)."""
        kind = "task" if pods else "job"  # Peloton's watch id prefixes
        watcher = Watcher(f"{kind}_{uuid.uuid4()}", pods, job_ids, pod_names, labels,
                          self.buffer_size)
        if self._left:
            watcher.ended = "leave"
            return watcher
        if len(self.watchers) >= self.max_clients:
            raise ResourceExhausted("max client reached")  # Peloton's text
        replay: list[tuple[Any, ...]] = []
        if from_start:
            journal = self._history()
            if journal is None:
                raise HistoryGone("the changes published since this job manager started are "
                                  "no longer all kept")
            replay = journal
        elif from_claim:
            if not job_ids:
                raise InvalidArgument(f"{FROM_KEY}: claim is for a watch of named jobs",
                                      field="job_id")
            if self._claims is None:
                raise HistoryGone("this job manager keeps no history of its partitions")
            replay, unclaimed = self._claims.since_claim(job_ids, after)
            if after is not None:
                for partition in unclaimed:
                    self._expected.setdefault(partition, {})[watcher.watch_id] = after
        for entry in replay:  # no greenlet switch until it is registered: no gap
            if _matches(watcher, entry):
                watcher.offer(_item(entry))
        self.watchers[watcher.watch_id] = watcher
        self._subscribe()
        return watcher

    def leave(self) -> None:
        """This process publishes nothing more (a member stopping, its partitions
        released): every stream ends cleanly once its buffer is sent, and later watches
        at once.  Idempotent."""
        self._left = True
        self._journal = self._claims = None
        for watch_id in list(self.watchers):
            self.drop(watch_id, "leave")
        self._unsubscribe()

    def _history(self) -> list[tuple[Any, ...]] | None:
        """The changes since the start, None once they are not all kept."""
        if self._journal is not None and self._clock() > self._journal_until:
            self._journal = None
        return self._journal

    def claimed(self, partition: int, after: int | None = None) -> None:
        """This member took `partition` over from epoch `after` (before it can publish any
        of its jobs): the partition's history starts now, and a "claim" watch waiting for
        this claim that read another epoch last ends (overflow).  A no-op without
        `partition`."""
        if self._claims is None:
            return
        self._claims.claimed(partition, after)
        self._subscribe()
        for watch_id, read_last in self._expected.pop(partition, {}).items():
            if read_last != after and watch_id in self.watchers:
                log.warning("watch %s: %s; ending it", watch_id,
                            taken_over(partition, after, read_last))
                self.drop(watch_id, "overflow")

    def released(self, partition: int) -> None:
        """This member let `partition` go: its history is closed (kept while young)."""
        if self._claims is not None:
            self._claims.released(partition)

    def _keeping(self) -> bool:
        """Some history is kept: the publisher listens even with nobody watching."""
        return self._history() is not None or (self._claims is not None
                                                and self._claims.active)

    def _record(self, entry: tuple[Any, ...]) -> None:
        if self._claims is not None:
            self._claims.record(entry[1] if entry[0] == "job" else entry[1].job_id, entry)
        journal = self._history()
        if journal is not None and len(journal) >= self._journal_size:
            journal = self._journal = None  # the start is no longer covered: free it all
        if journal is not None:
            journal.append(entry)

    def drop(self, watch_id: str, why: str) -> bool:
        """End a watcher's stream (`why` "cancel", "overflow" or "leave"); False if
        unknown."""
        watcher = self.watchers.pop(watch_id, None)
        if watcher is None:
            return False
        for partition in [p for p, waiting in self._expected.items() if watch_id in waiting]:
            del self._expected[partition][watch_id]
            if not self._expected[partition]:
                del self._expected[partition]
        watcher.ended = watcher.ended or why
        watcher.wake.set()
        if not self._publishing:
            self._unsubscribe_if_idle()
        return True

    def _subscribe(self) -> None:
        if not self._subscribed:
            self.listeners.task.append(self._on_task)
            self.listeners.job.append(self._on_job)
            self._subscribed = True

    def _unsubscribe_if_idle(self) -> None:
        if not self.watchers and not self._keeping():
            self._unsubscribe()

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
        self._publish(("task", job, instance, rt))

    def _on_job(self, job: CachedJob) -> None:
        self._publish(("job", job.job_id, job.spec, job.runtime, job.update))

    def _publish(self, entry: tuple[Any, ...]) -> None:
        if self._left:
            return
        self._record(entry)
        self._publishing = True
        try:
            for watcher in list(self.watchers.values()):
                if _matches(watcher, entry):
                    self._deliver(watcher, _item(entry))
        finally:
            self._publishing = False
        if not self.watchers and not self._keeping():
            # Not now: the cache is iterating its listeners, and removing one from the
            # list under its loop would skip the next listener.
            gevent.spawn(self._unsubscribe_if_idle)


def _matches(watcher: Watcher, entry: tuple[Any, ...]) -> bool:
    """Whether a change (`_publish`'s entry) passes a watcher's filter."""
    if entry[0] == "task":
        _, job, instance, rt = entry
        if not watcher.pods or (watcher.job_ids and job.job_id not in watcher.job_ids):
            return False
        if watcher.pod_names and f"{job.job_id}-{instance}" not in watcher.pod_names:
            return False
        return not watcher.labels or _has_labels(
            watcher.labels, job.task_spec(instance, rt.config_version).labels)
    job_id, spec = entry[1], entry[2]
    if watcher.pods or (watcher.job_ids and job_id not in watcher.job_ids):
        return False
    return not watcher.labels or _has_labels(watcher.labels, spec.labels)


def _item(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a watcher's buffer holds for a change: a task's job by id."""
    if entry[0] == "task":
        _, job, instance, rt = entry
        return (job.job_id, instance, rt)
    return entry[1:]


def _after(metadata: tuple[tuple[str, Any], ...]) -> int | None:
    """The `AFTER_KEY` epoch of a Watch's metadata (None without one)."""
    for key, value in metadata:
        if key == AFTER_KEY:
            text = str(value)
            if not text.isdigit() or len(text) > 20:
                raise InvalidArgument(f"{AFTER_KEY}: an epoch is a non-negative integer, "
                                      f"got {text[:40]!r}", field=AFTER_KEY)
            return int(text)
    return None


def _labels(labels: Any) -> tuple[Label, ...]:
    return tuple(Label(lb.key, lb.value) for lb in labels)


class WatchServicer(pb_grpc.WatchServiceServicer):  # type: ignore[misc]
    """Watch and Cancel."""

    def __init__(self, publisher: WatchPublisher) -> None:
        self.publisher = publisher

    def Watch(self, request: pb.WatchRequest, context: Any) -> Iterator[pb.WatchResponse]:
        metadata = tuple(context.invocation_metadata() or ())
        from_start, from_claim = ((FROM_KEY, v) in metadata for v in ("start", "claim"))
        try:
            after = _after(metadata)
            if request.HasField("pod_filter"):
                flt = request.pod_filter
                job_ids = frozenset({flt.job_id.value}) if flt.job_id.value else frozenset()
                watcher = self.publisher.add(
                    True, job_ids, frozenset(n.value for n in flt.pod_names),
                    _labels(flt.labels), from_start=from_start,
                    from_claim=from_claim, after=after)
            elif request.HasField("stateless_job_filter"):
                jflt = request.stateless_job_filter
                watcher = self.publisher.add(False, frozenset(j.value for j in jflt.job_ids),
                                             labels=_labels(jflt.labels),
                                             from_start=from_start, from_claim=from_claim,
                                             after=after)
            else:
                raise InvalidArgument(texts.WATCH_TYPE_UNSUPPORTED, field="pod_filter")
        except HistoryGone as exc:
            context.abort(grpc.StatusCode.OUT_OF_RANGE, str(exc))
        try:
            yield pb.WatchResponse(watch_id=watcher.watch_id)
            while True:
                if not watcher.buffer and not watcher.ended:
                    watcher.wake.clear()
                    watcher.wake.wait(POLL)
                if watcher.ended == "overflow":
                    raise Conflict(f"event overflow: {watcher.watch_id}")  # Peloton's text
                if watcher.ended == "leave" and not watcher.buffer:
                    context.set_trailing_metadata(((LEFT_KEY, "1"),))  # everything was sent
                    return
                if watcher.ended == "cancel":
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
