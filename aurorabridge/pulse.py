"""Real pulse timeouts for Aurora updates (`blockIfNoPulsesAfterMs`).

Aurora blocks an update that stops receiving pulses (ROLL_FORWARD_AWAITING_PULSE)
until the next pulseJobUpdate.  Peloton has no such timer, and Peloton's
bridge only honoured the first pulse; this one keeps a deadline per pulsed
update, pushed forward by every pulse.  When a deadline passes, `on_expire`
(the updates handler) pauses the workflow and records `pulse_timeout` in its
opaque data, which reads back as AWAITING_PULSE; the next pulse resumes it.

The timer is in memory.  `pulse_timeout_ms` is also stored in the opaque
data, so after a restart the bridge re-arms every rolling pulsed update with
a full timeout (it cannot know when the last pulse came; erring long).
A pause that loses a compare-and-set race with the job manager is tried again
by the action itself (handlers/updates.retry_conflicts) and, if it still
loses, at the next check.  Clock and sleep are injected; tests call `tick()`
with a fake clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent

from peloton.core.errors import Conflict

log = logging.getLogger(__name__)

#: Called with (job_id, update_id) when an update's pulse deadline passes.
ExpireFn = Callable[[str, str], None]


class PulseTimer:
    """Deadlines of pulsed updates, one per job (a job has at most one active update)."""

    def __init__(self, on_expire: ExpireFn, clock: Callable[[], float] = time.monotonic) -> None:
        self._on_expire = on_expire
        self._clock = clock
        self._deadlines: dict[str, tuple[str, float]] = {}
        self._loop: Any = None

    def arm(self, job_id: str, update_id: str, timeout_ms: int) -> None:
        """(Re)start the countdown of `update_id` on `job_id`."""
        self._deadlines[job_id] = (update_id, self._clock() + timeout_ms / 1000.0)

    def disarm(self, job_id: str) -> None:
        """Forget the job's deadline (update paused, finished or replaced)."""
        self._deadlines.pop(job_id, None)

    def armed(self, job_id: str) -> str | None:
        """The update id whose deadline is running for `job_id`, if any."""
        entry = self._deadlines.get(job_id)
        return entry[0] if entry else None

    def tick(self) -> int:
        """Fire every passed deadline; returns how many fired."""
        now = self._clock()
        due = [(job, upd) for job, (upd, when) in self._deadlines.items() if when <= now]
        for job_id, update_id in due:
            if self._deadlines.get(job_id, ("", 0.0))[0] == update_id:
                del self._deadlines[job_id]
            try:
                self._on_expire(job_id, update_id)
            except Conflict as exc:  # still racing another writer after the action's own tries
                log.warning("pausing update %s of job %s after missed pulses: %s; trying again "
                            "at the next check", update_id, job_id, exc.message)
                self._deadlines.setdefault(job_id, (update_id, now))
            except Exception:  # one failing job must not stop the timer
                log.exception("pausing update %s of job %s after missed pulses failed", update_id, job_id)
        return len(due)

    def start(self, interval_s: float) -> None:
        """Check deadlines every `interval_s` in a greenlet."""
        def loop() -> None:
            while True:
                gevent.sleep(interval_s)
                self.tick()

        if self._loop is None:
            self._loop = gevent.spawn(loop)

    def stop(self) -> None:
        """Stop the greenlet."""
        if self._loop is not None:
            self._loop.kill(block=True, timeout=2)
            self._loop = None
