"""Work done off the caller's stack: backend calls made in answer to backend callbacks, and
batched acknowledgements.

A backend calls the host manager's listener from its own greenlets, possibly while
holding its own locks; calling back into the backend from there (a kill for a run that
just re-registered, an acknowledgement) could deadlock or stall it.  Such calls are
queued here and run by one greenlet.  Before `start()` (and in tests) nothing runs until
`run_pending()` is called, so a test decides exactly when the deferred work happens.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence

import gevent
import gevent.event

from peloton.hostmgr.backends.base import HostBackend, StatusUpdate

log = logging.getLogger(__name__)


class Deferred:
    """A FIFO of callables run by one greenlet (or by `run_pending` in the caller)."""

    def __init__(self) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._wake = gevent.event.Event()
        self._greenlet: gevent.Greenlet | None = None

    def __len__(self) -> int:
        return len(self._jobs)

    def defer(self, job: Callable[[], None]) -> None:
        """Run `job` soon; never raises, never blocks."""
        self._jobs.append(job)
        self._wake.set()

    def run_pending(self) -> int:
        """Run every queued job (and those they queue) in the caller; returns how many ran."""
        ran = 0
        while self._jobs:
            job = self._jobs.popleft()
            ran += 1
            try:
                job()
            except Exception:
                log.exception("deferred host manager work failed")
        return ran

    def start(self) -> None:
        """Run queued work in a greenlet until `stop()`."""
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def stop(self) -> None:
        """Stop the greenlet; work still queued runs at the next start or `run_pending`."""
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None

    def _loop(self) -> None:
        while True:
            self._wake.clear()
            if not self._jobs:
                self._wake.wait()
            self.run_pending()
            gevent.sleep(0)  # let producers add to the next batch


class Acker:
    """Collects updates every consumer has processed and acknowledges them to the backend
    in one call per batch.  A failed acknowledgement is only logged: the backend re-delivers
    the updates, the stream recognises their uuids and acknowledges them again."""

    def __init__(self, backend: HostBackend, deferred: Deferred) -> None:
        self._backend = backend
        self._deferred = deferred
        self._lock = threading.Lock()
        self._pending: list[StatusUpdate] = []
        self.acknowledged = 0

    def __call__(self, updates: Sequence[StatusUpdate]) -> None:
        with self._lock:
            first = not self._pending
            self._pending.extend(updates)
        if first:
            self._deferred.defer(self.flush)

    def flush(self) -> None:
        """Acknowledge everything collected so far."""
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            self._backend.acknowledge(batch)
            self.acknowledged += len(batch)
        except Exception:
            log.warning("acknowledging %d status updates failed; the backend will re-deliver them",
                        len(batch), exc_info=True)
