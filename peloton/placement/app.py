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
from collections.abc import Mapping
from dataclasses import dataclass

from peloton.common.loop import Loop
from peloton.common.metrics import Metrics
from peloton.core.model.host import HostOffer
from peloton.core.model.sched import PlacementFailure
from peloton.core.placement.hosts import HostIndex, IndexLayout
from peloton.core.placement.stack import PlacementConfig, Placer
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.placement.config import PlacementEngineConfig
from peloton.placement.round import RoundResult, fail_all, place_round

log = logging.getLogger(__name__)


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
        self._loop = Loop("placement", lambda: self.run_once(self.config.dequeue_timeout),
                          retry_delay=self.config.error_backoff, log=log)
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
        """Stop the loop (a round in flight is abandoned; its tasks time out back to READY)."""
        self._loop.stop()

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
    def run_once(self, timeout: float = 0.0) -> RoundStats:
        """Dequeue, lease, place, commit, report; returns what the round did."""
        gangs = self.resmgr.dequeue_gangs(self.config.batch_limit, timeout)
        if not gangs:
            return RoundStats()
        tasks = sum(len(g.run_ids) for g in gangs)
        self._rounds.inc()
        try:
            lease = self.hostmgr.acquire_hosts(self.config.lease_size(tasks))
        except Exception as exc:
            self._report(RoundResult((), tuple(fail_all(gangs, f"no host lease: {exc}")), ()))
            raise
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
            self._report(result)
            raise
        finally:
            if not committed:
                self._release(lease.lease_id)
        self._report(result)
        return RoundStats(tasks, result.placed, len(lease.offers))

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
