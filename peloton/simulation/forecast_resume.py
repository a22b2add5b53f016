"""Live scheduler state the forecast's jobs cannot carry, put back into its daemons at now.

The forecast rebuilds the present by submitting jobs (forecast_plan.py); what the live
daemons learned on the way there is lost in that rebuild, and each piece changes what
they do next:

* how long admission has refused each queued gang: a gang refused for
  `BackfillPolicy.reserve_after` seconds holds room in its pool, and nothing behind it
  is admitted unless it fits beside it (core/respool/admission.py).  Submitted afresh,
  every gang would start its wait at now, and smaller work behind an old gang would be
  admitted ahead of it for half a minute;
* which gang holds its queue's reservation now, and which of the pool's queues each gang
  waits in (a gang admission refused waits in the queue of its class);
* how many times placement failed to find each queued task a host: the wait before its
  next try, and when it gives its admission back, grow with them;
* when each admitted task placement failed for is due to be tried again: admitted afresh
  at now it would be placed at once, and its retry timer is set only by the failure
  itself, in a round no hook sees between; so it is given to the ready queue with the
  task (`ReadyQueue.defer`) before the admission pass that admits it;
* the host order placement breaks ties by (`HostRotation`): the host manager's offer
  order and the placement engine's index positions;
* how many preemption cycles in a row each pool has been over its entitlement
  (preemption acts after `sustained_over_allocation_count` of them);
* the entitlements: live, they were computed `entitled_for` seconds ago, from the demand
  then (the queue, unless it changed since: `entitlement_stale`).  The forecast's queue
  arrives just after its passes at now, so once it is in, the live figures are copied
  (or, where the snapshot has none, computed from the demand now) and dated as live;
* the admission loop's phase: it passes every scheduling period after its last pass,
  `admitted_for` seconds before now live (the forecast's queue woke it at now).

`Resume` is the simulation's `after_round` hook (daemons.py): after each reactive round
at now it dates and files the queued gangs the job manager has just handed to the
resource manager, sets the entitlements and the admission loop's phase as live (a round
runs admission before the job manager, so this happens before the first pass that sees
the gangs) and, once, restores the host order and the preemption counts (after the
periodic passes at now, which the live counts had seen too), before anything is placed
after now.  It touches only the simulated daemons it is given; the resource manager's
books it sets are those `cluster/forecast.py` reads live.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from peloton.core.forecast.model import QueuedTask
from peloton.core.model.ids import TaskId
from peloton.core.respool.queues import QueueKind
from peloton.core.respool.records import Gang
from peloton.simulation.daemons import SimulatedCluster
from peloton.simulation.driver import job_id_for
from peloton.simulation.forecast_plan import WARMUP, ForecastScenario


@dataclass(slots=True)
class Resume:
    """The hook (module docstring) for one run of `fs`."""

    fs: ForecastScenario
    #: Simulated time of now in the run (`fs.now`).
    at: float = field(init=False, default=WARMUP)
    #: The live queued tasks with a history, by simulated task id (from `fs.waited`).
    _waited: dict[TaskId, QueuedTask] = field(default_factory=dict)
    _rotated: bool = False
    #: Tasks the resource manager tracked after the last round (more: some were handed over).
    _tracked: int = -1

    def __post_init__(self) -> None:
        self.at = self.fs.now
        ids = {job.job: job_id_for(k) for k, job in enumerate(self.fs.scenario.trace.jobs)}
        self._waited = {TaskId(ids[name], i): live for (name, i), live in self.fs.waited.items()}

    def __call__(self, cluster: SimulatedCluster) -> int:
        """Resume what is due after this round; returns how much it changed."""
        if cluster.now < self.at:
            return 0
        done = 0
        if not self._rotated:
            self._rotated = True
            self._rotate(cluster)
            self._count_over(cluster)
        if cluster.now > self.at:
            return 0  # every queued task was handed over at now
        if self._waited:
            done += self._date(cluster)
        self._entitle(cluster)
        live = self.fs.live
        if live is not None and live.admitted_for is not None:
            # The queue arriving woke the admission loop at now; live, it had not been
            # woken by it, and passes every period after its own last pass.
            cluster.resmgr.loops.resume_admitted_at(cluster.now - live.admitted_for)
        return done

    # Restoring the host order, the counts and the entitlements is not counted as work:
    # nothing becomes due because of them by themselves.
    def _rotate(self, cluster: SimulatedCluster) -> None:
        rotation = self.fs.live.rotation if self.fs.live is not None else None
        if rotation is None:
            return
        cluster.hostmgr.restore_offer_order(rotation.offer_order)
        if rotation.layout is not None:
            offers = {name: rec.offer() for name, rec in cluster.hostmgr.registry.hosts.items()}
            cluster.placement.restore_host_layout(rotation.layout, offers)

    def _count_over(self, cluster: SimulatedCluster) -> None:
        if self.fs.live is None:
            return
        rm = cluster.resmgr
        counts = {rm.pool_id_for_path(path): n for path, n in self.fs.live.over_cycles}
        with rm.lock:
            if rm.preemptor is not None:
                rm.preemptor.counter.resume(counts)

    def _entitle(self, cluster: SimulatedCluster) -> None:
        """Tasks handed over this round (the queue): the entitlements as live, where the
        snapshot has them (else computed from the demand now, the queue counted), dated as
        live and as stale as live (a demand change not counted yet)."""
        rm = cluster.resmgr
        live = self.fs.live
        ids = {} if live is None else {p.path: rm.pool_id_for_path(p.path) for p in live.pools}
        with rm.lock:
            tracked = len(rm.book.tracker)
            if tracked == self._tracked:
                return
            self._tracked = tracked
            rm.entitle_locked()
            if live is None:
                return
            nodes = rm.book.tracker.tree.by_id
            for pool in live.pools:
                node = nodes.get(ids[pool.path])
                if node is None or pool.non_slack_entitlement is None \
                        or pool.slack_entitlement is None:
                    continue
                node.entitlement = list(pool.entitlement.units)
                node.non_slack_entitlement = list(pool.non_slack_entitlement.units)
                node.slack_entitlement = list(pool.slack_entitlement.units)
            rm.book.demand_changed = live.entitlement_stale
            if live.entitled_for is not None:
                rm.entitled_at = rm.clock.monotonic() - live.entitled_for

    def _date(self, cluster: SimulatedCluster) -> int:
        """The queue as live: each gang dated, in the queue it waits in live (admission
        moves a gang it refuses to the queue of its class, in the order it refuses them;
        the snapshot lists each queue in its order), holding the room it holds live."""
        rm = cluster.resmgr
        now = rm.clock.monotonic()
        done = 0
        with rm.lock:
            for node in rm.book.tracker.tree.leaves():
                queues = node.queues
                if queues is None:
                    continue
                pending = queues[QueueKind.PENDING]
                # Taken out and queued again in order, so each queue counts the gang with
                # its date (queues.py keeps counts by shape and first refusal).
                arrived = [pending.pop() for _ in range(len(pending))]
                for gang in arrived:
                    live = self._live(gang, rm.book.ready.defer, now)
                    kind = QueueKind.PENDING if live is None else live.queue
                    if live is not None:
                        done += 1
                        if live.refused_for is not None and gang.refused_since is None:
                            gang.refused_since = now - live.refused_for
                    queues[kind].push(gang)
                    if live is not None and live.holds_room and kind not in queues.reserved:
                        queues.reserved[kind] = gang
        return done

    def _live(self, gang: Gang, defer: Callable[[TaskId, float], None],
              now: float) -> QueuedTask | None:
        """The live task of `gang`'s first task with a history (each resumed once); every
        task of it takes its own count of failed placements and its retry timer."""
        first = None
        for rec in gang.tasks:
            live = self._waited.pop(rec.task_id, None)
            if live is None:
                continue
            rec.placement_attempts = live.placement_attempts
            if live.retry_in is not None:
                defer(rec.task_id, now + live.retry_in)
            first = first or live
        return first
