"""The placement engine's composition root: a loop of placement rounds between two ports.

Each round (Peloton's engine.go, batched):

1. take up to `batch_limit` tasks of READY gangs from the resource manager
   (they become PLACING there), waiting up to `dequeue_timeout` for work;
2. lease every host with free resources from the host manager;
3. place the gangs with the core placer (round.py);
4. commit the lease with a reservation per placed run, which frees the
   leased hosts for the next round at once; with nothing placed, release it;
5. report placements and failures (with the placer's reasons) to the
   resource manager.

Started as a daemon (`start`), rounds overlap their calls to the resource
manager with each other's work; both were waits for a busy daemon, at the
100,000-task scale shape under load 9 % (report) and 14 % (dequeue) of a
round's time:

* a round's report is sent in its own greenlet while the next round
  dequeues, leases and places (its hosts are already booked by the commit,
  and the next round's tasks are others).  At most one report is in
  flight, so they land in order, and a round's own report waits for the
  last one before it is sent; a failed background report is logged, and
  its tasks come back by the resource manager's placing timeout, as when a
  round's report failed before;
* once a round holds its lease, the next round's gangs are dequeued (without
  waiting) while it places; the next round starts with them, or, if there
  were none, waits for work as usual.  Gangs taken ahead when the engine
  stops are reported unplaced, so they are retried at once.

Stepped (`run_due`), a round does each step itself, in order.

If the host manager cannot be reached, or refuses the commit, every task
of the round is reported failed with that reason, so the resource manager
retries it; if the resource manager cannot be reached, its placing timeout
brings the tasks back.  The engine keeps no state between rounds that
matters (Peloton runs it active-active), so stopping it at any point loses
nothing: only a cache, the placer's host index, which each round syncs to
its own lease (rebuilding the hosts whose offer changed or that it placed
on) and which a failed round throws away.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import gevent

from peloton.common.loop import Loop
from peloton.common.metrics import Metrics
from peloton.core.model.host import HostOffer
from peloton.core.model.sched import PlacementFailure, PlacementGang
from peloton.core.placement.hosts import HostIndex, IndexLayout
from peloton.core.placement.stack import PlacementConfig, Placer
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.placement.config import PlacementEngineConfig
from peloton.placement.round import RoundResult, fail_all, place_round

log = logging.getLogger(__name__)
#: Seconds `stop` waits for a report in flight to land, and for gangs being taken ahead.
REPORT_WAIT = 1.0


@dataclass(frozen=True, slots=True)
class RoundStats:
    """What one round did."""

    tasks: int = 0
    placed: int = 0
    hosts: int = 0


class PlacementEngine:
    """Places ready gangs on leased hosts in a loop; see the module docstring."""

    name = "placement"

    def __init__(self, resmgr: ResourceManagerPort, hostmgr: HostManagerPort,
                 config: PlacementEngineConfig | None = None,
                 metrics: Metrics | None = None) -> None:
        self.config = config or PlacementEngineConfig()
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self._placer_config = PlacementConfig(scarce_gpu=self.config.scarce_gpu)
        #: The host index kept between rounds (a cache; see the module docstring).
        self._placer: Placer | None = None
        # Each round blocks up to `dequeue_timeout` waiting for work, so the loop only yields.
        self._loop = Loop("placement",
                          lambda: self.run_once(self.config.dequeue_timeout, overlap=True),
                          retry_delay=self.config.error_backoff, log=log)
        #: The last round's report while it is being sent, and the next round's gangs while
        #: they are dequeued (see the module docstring).
        self._reporting: gevent.Greenlet | None = None
        self._ahead: gevent.Greenlet | None = None
        self.metrics = metrics or Metrics("placement")
        self._rounds = self.metrics.counter("rounds", "Placement rounds that had work")
        self._placed = self.metrics.counter("tasks_placed", "Tasks placed")
        self._failed = self.metrics.counter("tasks_unplaced", "Tasks reported unplaced")
        self._seconds = self.metrics.histogram("round_seconds", "Time to place one round")

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the placement loop."""
        self._loop.start()

    def stop(self) -> None:
        """Stop the loop (a round in flight is abandoned; its tasks time out back to READY);
        a report in flight gets up to REPORT_WAIT seconds to land."""
        self._loop.stop()
        reporting, self._reporting = self._reporting, None
        if reporting is not None:
            reporting.join(REPORT_WAIT)
            reporting.kill()  # (a no-op once it landed)
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        ahead.join(REPORT_WAIT)
        ahead.kill()
        if ahead.successful() and ahead.value:
            # In its own greenlet: stopping waits for no call.
            gevent.spawn(self._report_in_background, RoundResult(
                (), tuple(fail_all(ahead.value, "placement engine stopped")), ()))

    # -- stepped by the caller (the simulator), never started ---------------------------------
    def run_due(self) -> RoundStats:
        """One round with what is ready now, waiting for nothing."""
        return self.run_once(0.0)

    def next_due(self) -> float | None:
        """Always None: the engine keeps no timers; its work is what the resource manager
        has ready (whose `next_due` covers placement retries)."""
        return None

    # -- its host order (the forecast copies it: ties between hosts break by it) ---------------
    def host_layout(self) -> IndexLayout | None:
        """Where each host sits in the kept host index (None: no round kept one yet)."""
        return self._placer.index.layout() if self._placer is not None else None

    def restore_host_layout(self, layout: IndexLayout, offers: Mapping[str, HostOffer]) -> None:
        """Keep an index with `layout` (a simulation resuming another cluster's state);
        the next round rebuilds every host from its lease, at these positions."""
        self._placer = Placer((), self._placer_config, HostIndex.arranged(layout, offers))

    # -- one round ----------------------------------------------------------------------------
    def run_once(self, timeout: float = 0.0, overlap: bool = False) -> RoundStats:
        """Dequeue, lease, place, commit, report; returns what the round did.  With
        `overlap` the report may still be in flight when it returns (the module docstring);
        a round that failed reports before it raises; the next round's gangs may be on
        their way (taken ahead)."""
        gangs = self._taken_ahead() or self.resmgr.dequeue_gangs(self.config.batch_limit,
                                                                 timeout)
        if not gangs:
            return RoundStats()
        tasks = sum(len(g.run_ids) for g in gangs)
        self._rounds.inc()
        try:
            lease = self.hostmgr.acquire_hosts(self.config.lease_size(tasks))
        except Exception as exc:
            self._await_report()
            self._report(RoundResult((), tuple(fail_all(gangs, f"no host lease: {exc}")), ()))
            raise
        if overlap:
            self._ahead = gevent.spawn(self._dequeue_ahead)
        committed = False
        try:
            if self._placer is None:
                self._placer = Placer((), self._placer_config)
            with self._seconds.time():
                result = place_round(gangs, lease.offers, self._placer_config, self._placer)
            if result.reservations:
                self.hostmgr.commit_lease(lease.lease_id, result.reservations)
                committed = True
        except Exception as exc:
            self._placer = None  # its index may hold debits the host manager never booked
            result = RoundResult((), tuple(fail_all(gangs, f"placement round failed: {exc}")),
                                 ())
            self._await_report()
            self._report(result)
            raise
        finally:
            if not committed:
                self._release(lease.lease_id)
        self._await_report()
        if overlap:
            self._reporting = gevent.spawn(self._report_in_background, result)
        else:
            self._report(result)
        return RoundStats(tasks, result.placed, len(lease.offers))

    def _dequeue_ahead(self) -> Sequence[PlacementGang]:
        try:
            return self.resmgr.dequeue_gangs(self.config.batch_limit, 0.0)
        except Exception:
            log.warning("could not dequeue the next round's gangs ahead", exc_info=True)
            return ()

    def _taken_ahead(self) -> Sequence[PlacementGang]:
        """The gangs dequeued ahead for this round (none if none were).  Forgotten only
        once they are here: a loop stopped while it waits leaves them to `stop`."""
        ahead = self._ahead
        if ahead is None:
            return ()
        gangs: Sequence[PlacementGang] = ahead.get()
        self._ahead = None
        return gangs

    def _await_report(self) -> None:
        """Wait for the last round's report still in flight (reports land in order)."""
        reporting = self._reporting
        if reporting is not None:
            reporting.join()
            self._reporting = None

    def _report_in_background(self, result: RoundResult) -> None:
        try:
            self._report(result)
        except Exception:
            log.warning("could not report a round of %d placed and %d unplaced task(s); the "
                        "resource manager's placing timeout brings them back", result.placed,
                        len(result.failures), exc_info=True)

    def _report(self, result: RoundResult) -> None:
        self.resmgr.set_placements(result.placements, result.failures)
        self._placed.inc(result.placed)
        self._failed.inc(len(result.failures))
        if result.failures:
            self._log_failures(result.failures)

    def _release(self, lease_id: str) -> None:
        try:
            self.hostmgr.release_lease(lease_id)
        except Exception:
            log.warning("could not release lease %s (it expires)", lease_id, exc_info=True)

    @staticmethod
    def _log_failures(failures: tuple[PlacementFailure, ...]) -> None:
        if log.isEnabledFor(logging.DEBUG):
            first = failures[0]
            log.debug("%d task(s) unplaced, e.g. %s: %s", len(failures), first.task_id,
                      first.reason)
