"""A greenlet that runs one step of work over and over until it is stopped.

The daemons' background work (consume the status stream, launch placements,
evict victims, check deadlines, follow hosts) is each a function that does one
round and returns; `Loop` owns the greenlet around it, so the policy is in one
place: a step that raises is logged and tried again after `retry_delay`
(the work it did not finish is re-delivered or re-derived next round), and
`interval` paces steps that do not block on their own.  A periodic job that
should not run at start (a pruner, a reconciler: `start()` already did that
work) passes `delay_first=True` to wait one `interval` before its first step.
A step that waits for work itself (on a signal, or a blocking read with a
timeout) passes no `interval`: the loop only yields between its steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent


class Loop:
    """Runs `step()` repeatedly in one greenlet between `start()` and `stop()`."""

    def __init__(self, name: str, step: Callable[[], object], *, interval: float = 0.0,
                 retry_delay: float = 1.0, delay_first: bool = False,
                 log: logging.Logger | None = None) -> None:
        self.name = name
        self.step = step
        self.interval = interval
        self.retry_delay = retry_delay
        self.delay_first = delay_first
        self._log = log or logging.getLogger(f"peloton.loop.{name}")
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        """Begin looping (idempotent)."""
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Stop looping; a step in progress is interrupted."""
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None

    @property
    def running(self) -> bool:
        """Whether the loop's greenlet is alive."""
        return self._greenlet is not None and not self._greenlet.dead

    def _run(self) -> None:
        if self.delay_first:
            gevent.sleep(self.interval)
        while True:
            try:
                self.step()
            except Exception:
                self._log.exception("%s round failed; retrying in %.1fs", self.name,
                                    self.retry_delay)
                gevent.sleep(self.retry_delay)
                continue
            # Yield even with no interval, so a step that finds no work cannot starve others.
            gevent.sleep(self.interval)
