"""At-least-once delivery of the agent's status updates to the host manager.

Every update stays pending until the host manager acknowledges its uuid.
A sender thread ships whatever is queued in one ReportStatus call (so
updates batch themselves under load, with no artificial delay); pending
updates are re-sent after `resend_secs` without an ack, and all of them
at once after every (re-)registration.  A run's terminal update is
therefore kept until acknowledged, whether or not the host manager was
there when the run ended.  Updates of one run go out in the order they
were published.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from peloton.agent.model import Update
from peloton.common.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

#: Sends one batch; True if the host manager took it.
Send = Callable[[Sequence[Update]], bool]


@dataclass(slots=True)
class _Pending:
    update: Update
    terminal: bool
    sent_at: float = float("-inf")


class StatusReporter:
    """Pending updates, the send queue and the resend timer; sends only while connected."""

    def __init__(self, send: Send, *, resend_secs: float = 10.0, max_batch: int = 2000,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._send = send
        self.resend_secs = resend_secs
        self.max_batch = max_batch
        self._clock = clock
        self._cond = threading.Condition()
        self._pending: dict[str, _Pending] = {}
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._unacked: dict[str, int] = {}  # run id -> pending updates of that run
        self._ended: set[str] = set()  # runs whose terminal update was published
        self._stopping = False
        self._connected = False
        self._stopped = threading.Event()  # the resender's own timer: publish() must not wake it
        self._threads = [threading.Thread(target=self._sender, name="status-sender", daemon=True),
                         threading.Thread(target=self._resender, name="status-resend", daemon=True)]

    def start(self) -> None:
        """Start sending."""
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        """Stop sending; pending updates are dropped with the process (the sandboxes keep the truth)."""
        self._stopped.set()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def publish(self, update: Update, terminal: bool = False) -> None:
        """Queue an update for delivery; publishing a pending uuid again just re-sends it."""
        with self._cond:
            if update.uuid not in self._pending:
                self._pending[update.uuid] = _Pending(update, terminal)
                self._unacked[update.run_id] = self._unacked.get(update.run_id, 0) + 1
            if terminal:
                self._ended.add(update.run_id)
            self._enqueue(update.uuid)
            self._cond.notify_all()

    def _enqueue(self, uuid: str) -> None:
        if uuid not in self._queued:
            self._queued.add(uuid)
            self._queue.append(uuid)

    def acknowledge(self, uuids: Iterable[str]) -> list[str]:
        """Forget acknowledged updates; returns runs now ended with nothing left pending."""
        settled = []
        with self._cond:
            for uuid in uuids:
                entry = self._pending.pop(uuid, None)
                if entry is None:
                    continue
                run_id = entry.update.run_id
                left = self._unacked[run_id] - 1
                if left:
                    self._unacked[run_id] = left
                    continue
                del self._unacked[run_id]
                if run_id in self._ended:
                    self._ended.discard(run_id)
                    settled.append(run_id)
        return settled

    def connected(self, up: bool) -> None:
        """The link (re-)registered (re-send everything pending) or lost the host manager."""
        with self._cond:
            self._connected = up
            if up:
                for uuid in self._pending:
                    self._enqueue(uuid)
            self._cond.notify_all()

    def pending_count(self) -> int:
        """Updates not yet acknowledged."""
        with self._cond:
            return len(self._pending)

    def _sender(self) -> None:
        while True:
            with self._cond:
                while not (self._queue and self._connected) and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                batch: list[Update] = []
                while self._queue and len(batch) < self.max_batch:
                    uuid = self._queue.popleft()
                    self._queued.discard(uuid)
                    entry = self._pending.get(uuid)
                    if entry is not None:  # else acknowledged while queued
                        entry.sent_at = self._clock.monotonic()
                        batch.append(entry.update)
            if batch and not self._send(batch):
                # Not delivered: hold everything until the link registers again
                # (`connected(True)` then re-sends all pending updates).
                with self._cond:
                    self._connected = False
                    for update in batch:
                        entry = self._pending.get(update.uuid)
                        if entry is not None:
                            entry.sent_at = float("-inf")

    def _resender(self) -> None:
        while not self._stopped.wait(max(0.05, self.resend_secs / 2)):
            with self._cond:
                due = self._clock.monotonic() - self.resend_secs
                stale = [u for u, e in self._pending.items() if e.sent_at <= due]
                for uuid in stale:
                    self._enqueue(uuid)
                if stale:
                    self._cond.notify_all()
