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

from peloton.core.ports import EventStream

if TYPE_CHECKING:
    from peloton.resmgr.app import ResourceManager

log = logging.getLogger(__name__)

#: Wait after a failed read of the status stream before trying again (seconds).
STREAM_RETRY = 1.0


class Loops:
    """Owns the greenlets of one started resource manager."""

    def __init__(self, rm: ResourceManager) -> None:
        self.rm = rm
        self._greenlets: list[gevent.Greenlet] = []
        self._stream: EventStream | None = None

    def start(self) -> None:
        """Spawn every loop."""
        cfg = self.rm.config
        self._greenlets = [
            gevent.spawn(self._admission_loop),
            gevent.spawn(self._every, cfg.entitlement_period, self.rm.refresh_capacity),
            gevent.spawn(self._event_loop),
        ]
        if cfg.preemption_enabled:
            self._greenlets.append(gevent.spawn(self._every, cfg.preemption_period,
                                                self.preempt_once))

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
        now = rm.clock()
        with rm.lock:
            book = rm.book
            book.expire(now)
            if book.demand_changed and now - rm.entitled_at >= cfg.entitlement_min_interval:
                rm.entitle_locked()
            admitted = book.admit(cfg.admit_per_pool)
            book.ready.promote(now)
            ready = book.ready.has_ready()
        if admitted or ready:
            rm.ready_signal.fire()
        return admitted

    # -- preemption -----------------------------------------------------------------------------
    def preempt_once(self) -> None:
        """One preemption cycle."""
        rm = self.rm
        with rm.lock:
            if rm.preemptor is None:
                return
            requeued, revoked = rm.preemptor.cycle()
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
            now = rm.clock()
            for event in events:
                freed = book.apply_event(event, now) or freed
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
