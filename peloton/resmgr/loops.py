"""The resource manager's greenlets: admission, entitlement, preemption, status events.

Each loop catches and logs its own failures and carries on (a host manager
that is briefly unreachable must not stop admission), and each is killed by
`stop()` while it waits, never while it holds the state lock: the lock is
taken only around pure, non-blocking work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import gevent

from peloton.common.metrics import Metrics
from peloton.core.model.ids import RunIdParser
from peloton.core.ports import EventStream
from peloton.core.respool.admission import reservation_due
from peloton.resmgr.transitions import apply_event, expire

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
    """Owns the greenlets of one started resource manager."""

    def __init__(self, rm: ResourceManager) -> None:
        self.rm = rm
        self._greenlets: list[gevent.Greenlet] = []
        self._stream: EventStream | None = None
        self._run_ids = RunIdParser()

    def start(self) -> None:
        """Subscribe to the status stream (so nothing is trimmed before we read it), spawn loops."""
        cfg = self.rm.config
        try:
            self._stream = self.rm.hostmgr.subscribe(cfg.stream_consumer)
        except Exception:
            log.warning("cannot subscribe to the status stream yet; retrying", exc_info=True)
        self._greenlets = [
            gevent.spawn(self._admission_loop),
            gevent.spawn(self._every, cfg.entitlement_period, self.rm.refresh_capacity),
            gevent.spawn(self._event_loop),
            # Always running: `set_preemption` may turn preemption on later (a pass without
            # a preemptor does nothing).
            gevent.spawn(self._every, cfg.preemption_period, self.preempt_once),
        ]

    def stop(self) -> None:
        """Kill every loop and wait for them to exit."""
        gevent.killall(self._greenlets)
        self._greenlets = []
        self._stream = None  # a restart subscribes again, from the last acknowledged offset

    # -- admission ------------------------------------------------------------------------------
    def _admission_loop(self) -> None:
        rm = self.rm
        while True:
            token = rm.work.token()
            try:
                self.admit_once()
            except Exception:
                log.exception("admission pass failed")
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
    def _event_loop(self) -> None:
        while True:
            try:
                self.events_once(self.rm.config.poll_timeout)
            except Exception:
                log.exception("reading the status stream failed")
                self._stream = None
                gevent.sleep(STREAM_RETRY)

    def events_once(self, timeout: float) -> int:
        """Apply one batch of status events and acknowledge it; returns how many were read."""
        rm = self.rm
        if self._stream is None:
            self._stream = rm.hostmgr.subscribe(rm.config.stream_consumer)
        events = self._stream.poll(rm.config.event_batch, timeout)
        if not events:
            return 0
        freed = False
        with rm.lock:
            book = rm.book
            now = rm.clock.monotonic()
            parse = self._run_ids.parse
            for event in events:
                freed = apply_event(book, event, now, parse) or freed
        self._stream.acknowledge(events[-1].offset)
        if freed:
            rm.work.fire()
        return len(events)

    # -- helpers --------------------------------------------------------------------------------
    @staticmethod
    def _every(period: float, job: Callable[[], object]) -> None:
        while True:
            gevent.sleep(period)
            try:
                job()
            except Exception:
                log.exception("periodic resource manager work failed")
