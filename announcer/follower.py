"""Following pod state through the Peloton API: a full read, then the WatchService stream.

One loop, on its own thread (a greenlet under the daemons' gevent):

1. open a pod watch on every job (WatchService.Watch, no filter) and take its
   first answer (the watch id): from here on every pod change is buffered;
2. read everything once (ListJobs; for each job with RUNNING pods, QueryPods
   of the RUNNING ones) and hand the registry the full set of members;
3. apply the watch's changes as they come, in order.  A change older than
   what step 2 read (a smaller pod revision) is skipped.

The watch carries a deadline (`resync_secs`): when it passes, or the stream
ends (a new job manager leader, "event overflow", Cancel), the loop starts
again at 1, so a full read also happens periodically.  Errors are retried
with a backoff.  `stop()` cancels the watch and waits for the loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from announcer.members import Member, MemberResolver
from peloton.api.client_transport import DeadlineExceeded
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.common.retry import RetryPolicy
from peloton.core.errors import NotFound, PelotonError

log = logging.getLogger(__name__)

RETRY = RetryPolicy(initial_delay=0.2, max_delay=5.0, multiplier=2.0, jitter=0.0)
_RUNNING_NAME = pod_pb2.PodState.Name(pod_pb2.POD_STATE_RUNNING)


class PodSource(Protocol):
    """The Peloton calls the follower makes (PelotonClient has them)."""

    def list_stateless_jobs(self) -> Iterator[Any]: ...
    def query_pods(self, job_id: str, spec: Any, *, pagination: Any = None,
                   summary_only: bool = False) -> Any: ...
    def watch_pods(self, job_id: str = "", pod_names: Any = (), labels: Any = (), *,
                   timeout: float | None = None) -> Iterator[Any]: ...
    def cancel_watch(self, watch_id: str) -> Any: ...


class MemberSink(Protocol):
    """Where members go (announcer.registry.MemberRegistry)."""

    def replace(self, wanted: dict[str, Member]) -> None: ...
    def put(self, key: str, member: Member | None) -> None: ...


class PodFollower:
    """Feeds a MemberSink from Peloton's pods; see the module docstring."""

    def __init__(self, source: PodSource, resolver: MemberResolver, sink: MemberSink, *,
                 resync_secs: float = 300.0, retry: RetryPolicy = RETRY,
                 on_synced: Callable[[int], None] | None = None) -> None:
        self._source = source
        self._resolver = resolver
        self._sink = sink
        self._resync_secs = resync_secs
        self._retry = retry
        self._on_synced = on_synced or (lambda count: None)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch_id = ""
        self._revisions: dict[str, int] = {}

    def start(self) -> None:
        """Begin following (returns at once)."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="announcer-follower", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel the watch and wait for the loop to end."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping.set()
        if self._watch_id:
            try:
                self._source.cancel_watch(self._watch_id)
            except PelotonError:
                pass  # the deadline ends it anyway
        if thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                self._follow_once()
                failures = 0
            except DeadlineExceeded:
                failures = 0  # the periodic resync
            except PelotonError as exc:
                failures += 1
                delay = self._retry.delay(failures, 0.0)
                if not self._stopping.is_set():
                    log.warning("announcer: following pods failed: %s (again in %.1f s)", exc, delay)
                self._stopping.wait(delay)
            except Exception:  # the loop must outlive any error
                failures += 1
                log.exception("announcer: following pods failed")
                self._stopping.wait(self._retry.delay(failures, 0.0))
            finally:
                self._watch_id = ""

    def _follow_once(self) -> None:
        stream = self._source.watch_pods(timeout=self._resync_secs)
        try:
            first = next(stream, None)
            if first is None or self._stopping.is_set():
                return
            self._watch_id = first.watch_id
            wanted = self._read_all()
            if self._stopping.is_set():
                return
            self._sink.replace(wanted)
            self._on_synced(len(wanted))
            for response in stream:
                if self._stopping.is_set():
                    return
                for pod in response.pods:
                    self._changed(pod.pod_name.value, pod.status)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def _changed(self, name: str, status: Any) -> None:
        revision = int(status.revision.version)
        if revision < self._revisions.get(name, 0):
            return  # older than what the full read saw
        self._revisions[name] = revision
        self._sink.put(name, self._resolver.member(name, status))

    def _read_all(self) -> dict[str, Member]:
        """Every member that should exist now, from a full read."""
        wanted: dict[str, Member] = {}
        self._revisions = {}
        running = pod_pb2.QuerySpec(pod_states=[pod_pb2.POD_STATE_RUNNING])
        for batch in self._source.list_stateless_jobs():
            for job in batch.jobs:
                if not job.status.pod_stats.get(_RUNNING_NAME, 0):
                    continue
                try:
                    pods = self._source.query_pods(job.job_id.value, running, summary_only=True).pods
                except NotFound:
                    continue  # deleted meanwhile
                for pod in pods:
                    name = pod.spec.pod_name.value
                    self._revisions[name] = int(pod.status.revision.version)
                    member = self._resolver.member(name, pod.status)
                    if member is not None:
                        wanted[name] = member
        return wanted
