"""Handing state back to a resource or host manager that started over.

Between processes the resource manager and the host manager keep what the
job manager told them in memory only: a new leader term of either starts
empty (the resource manager with no tasks, the host manager with runs it
does not know the size of).  The gRPC port adapters notice a new term on the
next answer (peloton.api.ports_grpc.channel) and the process wiring calls
`PeerResync.restarted`; the job manager then tells the new term everything
its recovery would have told it (recovery.hand_back): runs on hosts with
their allocation, queued runs queued again, runs adopted and reconciled.

One greenlet does the work and repeats while more restarts were reported
during a pass; each pass is idempotent on the other side, so a restart
reported twice costs a pass, never a double allocation.
"""

from __future__ import annotations

import logging

import gevent

from peloton.jobmgr.recovery import Recovery

log = logging.getLogger(__name__)

#: Pause before trying again after a pass failed (the peer may still be starting).
RETRY_SECONDS = 1.0


class PeerResync:
    """A lifecycle component: runs hand-back passes while started."""

    name = "peer-resync"

    def __init__(self, recovery: Recovery) -> None:
        self.recovery = recovery
        self._resmgr = False
        self._hostmgr = False
        self._greenlet: gevent.Greenlet | None = None
        self._running = False
        #: Passes completed (tests and logs).
        self.passes = 0

    def start(self) -> None:
        """Accept restart reports (recovery already told the current terms everything)."""
        self._running = True

    def stop(self) -> None:
        """Drop pending reports and stop a pass in flight."""
        self._running = False
        self._resmgr = self._hostmgr = False
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None

    def restarted(self, *, resmgr: bool = False, hostmgr: bool = False) -> None:
        """A peer began a new term; hand state back to it soon.  Callable from any greenlet."""
        if not self._running:
            return
        self._resmgr |= resmgr
        self._hostmgr |= hostmgr
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while self._running and (self._resmgr or self._hostmgr):
            resmgr, hostmgr = self._resmgr, self._hostmgr
            self._resmgr = self._hostmgr = False
            try:
                self.recovery.hand_back(to_resmgr=resmgr, to_hostmgr=hostmgr)
                self.passes += 1
            except Exception:
                log.warning("handing state back failed; retrying in %.0fs", RETRY_SECONDS,
                            exc_info=True)
                self._resmgr |= resmgr
                self._hostmgr |= hostmgr
                gevent.sleep(RETRY_SECONDS)
