"""The resource manager's greenlets: admission, entitlement, preemption, status events.

Each is a `peloton.common.loop.Loop`, which logs a failed round and carries on
(a host manager that is briefly unreachable must not stop admission); each is
killed by `stop()` while it waits, never while it holds the state lock: the lock
is taken only around pure, non-blocking work.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from peloton.common.loop import Loop
from peloton.common.metrics import Metrics
from peloton.core.model.ids import RunIdParser
from peloton.core.ports import EventStream
from peloton.core.respool.admission import reservation_due
from peloton.resmgr.transitions import apply_events, expire

if TYPE_CHECKING:
    from peloton.resmgr.app import ResourceManager

log = logging.getLogger(__name__)

#: Wait after a failed read of the status stream before trying again (seconds).
STREAM_RETRY = 1.0


class Counts:
    """The resource manager's counters (`peloton_resmgr_*_total`)."""

    def __init__(self, metrics: Metrics) -> None:
        self.admitted = metrics.counter("tasks_admitted", "Tasks admitted (PENDING -> READY)")
        self.placed = metrics.counter("tasks_placed", "Runs reported placed")
        self.unplaced = metrics.counter("tasks_unplaced", "Runs reported unplaced")
        self.timed_out = metrics.counter("tasks_timed_out", "Tasks a state timeout moved back")
        self.requeued = metrics.counter("victims_requeued",
                                        "Preemption victims requeued before they started")
        self.revoked = metrics.counter("victims_revoked",
                                       "Running preemption victims handed to the job manager")


class Loops:
    """Owns the loops of one started resource manager."""

    def __init__(self, rm: ResourceManager) -> None:
        self.rm = rm
        self._loops: list[Loop] = []
        self._stream: EventStream | None = None
        self._run_ids = RunIdParser()
        # A caller stepping the loops itself (`run_due`): the work signal at the last
        # admission pass, and when that pass was (the loop passes every period after it).
        self._work_seen = -1
        self._admitted_at = -math.inf

    @property
    def admitted_at(self) -> float:
        """When a stepping caller last made an admission pass (monotonic; -inf: never)."""
        return self._admitted_at

    def resume_admitted_at(self, at: float) -> None:
        """Date the last admission pass `at`: a simulation resuming a live loop's phase
        (the loop passes every period after it)."""
        self._admitted_at = at

    def start(self) -> None:
        """Subscribe to the status stream (so nothing is trimmed before we read it), spawn loops."""
        cfg = self.rm.config
        try:
            self._stream = self.rm.hostmgr.subscribe(cfg.stream_consumer)
        except Exception:
            log.warning("cannot subscribe to the status stream yet; retrying", exc_info=True)
        self._loops = [
            # Waits in its own step (on `rm.work`), failed or not: nothing more to wait after.
            Loop("admission", self._admission_step, retry_delay=0.0, log=log),
            Loop("entitlement", self.rm.refresh_capacity, interval=cfg.entitlement_period,
                 retry_delay=cfg.entitlement_period, delay_first=True, log=log),
            # Blocks in its poll of the stream (up to `poll_timeout`).
            Loop("status-events", self._events_step, retry_delay=STREAM_RETRY, log=log),
            # Always running: `set_preemption` may turn preemption on later (a pass without
            # a preemptor does nothing).
            Loop("preemption", self.preempt_once, interval=cfg.preemption_period,
                 retry_delay=cfg.preemption_period, delay_first=True, log=log),
        ]
        for loop in self._loops:
            loop.start()

    def stop(self) -> None:
        """Kill every loop and wait for them to exit."""
        for loop in self._loops:
            loop.stop()
        self._loops = []
        self._stream = None  # a restart subscribes again, from the last acknowledged offset

    # -- admission ------------------------------------------------------------------------------
    def _admission_step(self) -> None:
        """One admission pass, then wait `scheduling_period` or until work is signalled
        (since before the pass, so a signal during it is not missed)."""
        rm = self.rm
        token = rm.work.token()
        try:
            self.admit_once()
        finally:
            rm.work.wait(rm.config.scheduling_period, token)

    def admit_once(self) -> int:
        """Timeouts, a demand-driven entitlement cycle if due, then admission; returns admitted."""
        rm = self.rm
        cfg = rm.config
        now = rm.clock.monotonic()
        with rm.lock:
            book = rm.book
            expired = expire(book, now)
            if book.demand_changed and now - rm.entitled_at >= cfg.entitlement_min_interval:
                rm.entitle_locked()
            admitted = book.admit(cfg.admit_per_pool, now)
            book.ready.promote(now)
            ready = book.ready.has_ready()
        rm.counts.admitted.inc(admitted)
        rm.counts.timed_out.inc(expired)
        if admitted or ready:
            rm.ready_signal.fire()
        return admitted

    def admission_due(self) -> float | None:
        """The earliest monotonic time an admission pass could change anything unless work
        is signalled (`rm.work`) first, or None: a state timeout, a placement retry coming
        due, a demand-driven entitlement cycle, a refused gang old enough to hold a backfill
        reservation.  The greenlet passes every `scheduling_period` regardless; a caller that
        steps the resource manager itself (the simulator) may skip the passes before this.
        """
        rm = self.rm
        with rm.lock:
            book = rm.book
            times = [book.timeouts.next_deadline(), book.ready.next_due()]
            if book.demand_changed:
                times.append(rm.entitled_at + rm.config.entitlement_min_interval)
            tracker = book.tracker
            times.extend(reservation_due(node, tracker.preemption_enabled, tracker.backfill)
                         for node in tracker.tree.leaves())
        due = [t for t in times if t is not None]
        return min(due) if due else None

    # -- stepped by the caller (the simulator), never started ---------------------------------
    def run_due(self) -> int:
        """What the woken loops do now, in the caller, waiting for nothing: one batch of the
        status stream, then an admission pass if work was signalled since the last pass (the
        admission loop's wait ends at such a signal).  Returns how much work it found.  The
        admission loop's timed passes are the caller's to make (`next_admission`,
        `admit_pass`), and so are the entitlement and preemption periods."""
        done = self.events_once(0.0)
        if self.rm.work.token() != self._work_seen:
            done += self.admit_pass()
        return done

    def admit_pass(self) -> int:
        """One admission pass as the admission loop makes it (when woken or when its period
        ends): it notes the work signal it has seen and when it passed.  Returns admitted."""
        rm = self.rm
        self._work_seen = rm.work.token()
        self._admitted_at = rm.clock.monotonic()  # the loop waits one period from this pass
        return self.admit_once()

    def next_admission(self) -> float | None:
        """The admission loop's first periodic pass that could change anything (None: none
        until work is signalled).  The loop passes every period after its last pass; the
        passes before `admission_due` would find nothing to do, so a stepping caller skips
        them (they would leave every state as it was)."""
        due = self.admission_due()
        if due is None:
            return None
        last, period = self._admitted_at, self.rm.config.scheduling_period
        if last == -math.inf:
            return due
        t = last + max(1, math.ceil((due - last) / period)) * period
        return t if t >= due else t + period

    def next_due(self) -> float | None:
        """The earliest monotonic time stepped work could change anything: a placement retry
        coming due (the placement engine may take it), or the next useful admission pass."""
        with self.rm.lock:
            ready = self.rm.book.ready.next_due()
        due = [t for t in (ready, self.next_admission()) if t is not None]
        return min(due) if due else None

    # -- preemption -----------------------------------------------------------------------------
    def preempt_once(self) -> None:
        """One preemption cycle."""
        rm = self.rm
        with rm.lock:
            if rm.preemptor is None:
                return
            requeued, revoked = rm.preemptor.cycle()
        rm.counts.requeued.inc(requeued)
        rm.counts.revoked.inc(revoked)
        if requeued:
            rm.work.fire()
        if requeued or revoked:
            log.info("preemption: %d task(s) requeued, %d running task(s) to stop",
                     requeued, revoked)

    # -- status events --------------------------------------------------------------------------
    def _events_step(self) -> None:
        try:
            self.events_once(self.rm.config.poll_timeout)
        except Exception:
            self._stream = None  # subscribe again next round
            raise

    def events_once(self, timeout: float) -> int:
        """Apply one batch of status events and acknowledge it; returns how many were read."""
        rm = self.rm
        if self._stream is None:
            self._stream = rm.hostmgr.subscribe(rm.config.stream_consumer)
        events = self._stream.poll(rm.config.event_batch, timeout)
        if not events:
            return 0
        with rm.lock:
            freed = apply_events(rm.book, events, rm.clock.monotonic(), self._run_ids.parse)
        self._stream.acknowledge(events[-1].offset)
        if freed:
            rm.work.fire()
        return len(events)
