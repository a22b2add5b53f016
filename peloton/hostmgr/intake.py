"""What the backend reports, applied: hosts coming and going, and status updates.

`Intake` is the `HostEventListener` the host manager gives its backend.  Each status
update is offered to the event stream first; only an update the stream accepted (not a
duplicate, buffer not full) changes the books, so a refused update re-delivered later is
applied exactly as if it had arrived then.  Both happen under the host manager's lock,
so a consumer that reacts to an event (say, launching on the host a run just left) finds
the books already updated.

Per update the cost is a few dict operations: the run index gives the host directly.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence

from peloton.hostmgr.backends.base import BackendHost, StatusUpdate
from peloton.hostmgr.events import EventLog, Offered
from peloton.hostmgr.hosts import UNKNOWN_CLAIM
from peloton.hostmgr.leases import LeaseBook
from peloton.hostmgr.registry import HostRegistry
from peloton.hostmgr.routing import Router
from peloton.hostmgr.worker import Deferred

log = logging.getLogger(__name__)


class Intake:
    """The backend's listener; see the module docstring."""

    def __init__(self, registry: HostRegistry, leases: LeaseBook, events: EventLog,
                 router: Router, lock: threading.Lock, deferred: Deferred,
                 host_emptied: Callable[[str], None],
                 counted: Callable[[Offered, int], None] = lambda verdict, n: None) -> None:
        self._registry = registry
        self._leases = leases
        self._events = events
        self._router = router
        self._lock = lock
        self._deferred = deferred
        self._host_emptied = host_emptied
        self._counted = counted
        self._full_logged = False

    def host_up(self, host: BackendHost) -> None:
        """A host (re-)registered: book its capacity; resend kills it missed."""
        with self._lock:
            rec = self._registry.upsert(host)
            missed = any(run.kill_grace is not None for run in rec.runs.values())
        log.info("host %s up (agent %s, %s)", host.hostname, host.agent_id, host.capacity)
        if missed:
            self._deferred.defer(lambda: self._router.resend_kills(host.hostname))

    def host_gone(self, hostname: str, reason: str) -> None:
        """A host went away: stop offering it; its reservations are freed, its runs kept."""
        with self._lock:
            self._registry.disconnect(hostname)
            self._leases.drop_host(hostname)
        log.warning("host %s gone: %s", hostname, reason)

    def host_seen(self, hostname: str) -> None:
        """A host gave a sign of life: if a launch could not get to it, offer it again."""
        with self._lock:
            offered = self._registry.heard(hostname)
        if offered:
            log.info("host %s heard from again: no longer held from placement", hostname)

    def status_update(self, update: StatusUpdate) -> None:
        """A run changed state: append it to the stream and apply it to the books."""
        self.status_updates((update,))

    def status_updates(self, updates: Sequence[StatusUpdate]) -> None:
        """Several updates in order, under one hold of the lock (a simulated host's wave
        of thousands, an agent's report): the same as `status_update` for each."""
        with self._lock:
            # Every update is offered, then those the stream added are applied, in order:
            # the books read nothing the stream changes, and both happen before the lock
            # is let go, so a consumer reacting to an event still finds the books updated.
            offered = self._events.offer_many(updates)
            for update, verdict in zip(updates, offered, strict=True):
                if verdict is Offered.ADDED:
                    self._apply(update)
        verdicts = Counter(offered)
        for verdict, n in verdicts.items():
            self._counted(verdict, n)
        if verdicts[Offered.FULL] and not self._full_logged:
            self._full_logged = True
            log.warning("status stream full (%d events): refusing updates until consumers "
                        "acknowledge; the backend re-delivers them", self._events.capacity)
        elif verdicts[Offered.ADDED]:
            self._full_logged = False

    def _apply(self, update: StatusUpdate) -> None:
        reg = self._registry
        run_id = update.run_id
        run = reg.runs.get(run_id)
        if update.state.terminal:
            reg.mark_ended(run_id)
            self._router.ended(run_id)
            if run is None:
                self._leases.drop(run_id)
                return
            reg.remove_run(run_id)
            rec = reg.hosts[run.hostname]
            if run.hostname in reg.draining and not rec.runs:
                self._host_emptied(run.hostname)
            return
        if run_id in reg.ended:
            return  # a late re-delivery of an earlier state of a run that has ended
        if run is None:
            # Reported but never launched by us: a run adopted after a restart.
            self._leases.drop(run_id)
            run = reg.add_run(reg.host(update.hostname), run_id, UNKNOWN_CLAIM, update.state)
            self._router.seen(run)
        elif update.hostname and run.hostname != update.hostname:
            log.warning("run %s reported on %s, booked on %s; moving it", run_id,
                        update.hostname, run.hostname)
            reg.remove_run(run_id)
            grace = run.kill_grace
            run = reg.add_run(reg.host(update.hostname), run_id, run.claim, update.state)
            run.kill_grace = grace
        run.state = update.state
