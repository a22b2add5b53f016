"""The host manager's composition root: registry, leases, stream, routing and maintenance
wired to one backend and one store, plus the greenlets that keep them moving.

`HostManager` implements `HostManagerPort` for the placement engine and the job manager,
the `HostAdmin` the v0 HostService needs, and is a lifecycle `Component`:

    start(): `connect()` (load maintenance records -> start the backend: hosts and runs are
             reported -> queue a reconciliation of every run) -> start the maintenance
             engine, the deferred-work greenlet, the pruner (leases, reservations, pending
             kills) and the periodic reconciler.  A caller that steps the host manager
             itself (the simulator) calls only `connect()`.
    stop():  the reverse; running tasks keep running, unacknowledged updates are
             re-delivered by the backend at the next start.

One lock guards the books (registry, leases, pending kills); it is held only for short
in-memory sections, never across a backend or store call or a wait.  See README.md here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from peloton.api.grpc_server import ServiceHost
from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.common.loop import Loop
from peloton.common.metrics import Metrics
from peloton.core.errors import InvalidArgument, NotFound, Unavailable
from peloton.core.feasibility import HostShape
from peloton.core.model.host import HostInfo
from peloton.core.model.resources import Resources
from peloton.core.model.sched import HostLease, HostReservation, LaunchFailure, LaunchSpec
from peloton.core.model.sla_policy import DrainRequest
from peloton.core.ports import HostSummary
from peloton.core.states import HostState, TaskState
from peloton.hostmgr.backends.base import CordoningBackend, HostBackend, VolumeBackend
from peloton.hostmgr.config import HostManagerConfig
from peloton.hostmgr.events import ConsumerStream, EventLog, Offered
from peloton.hostmgr.intake import Intake
from peloton.hostmgr.leases import LeaseBook
from peloton.hostmgr.maintenance import Maintenance
from peloton.hostmgr.registry import HostRegistry
from peloton.hostmgr.routing import Router
from peloton.hostmgr.servicers import serve_host_service
from peloton.hostmgr.worker import Acker, Deferred
from peloton.storage.cluster_store import HostStore

log = logging.getLogger(__name__)


class HostManager:
    """The host manager daemon; see the module docstring."""

    name = "hostmgr"

    def __init__(self, store: HostStore, backend: HostBackend,
                 config: HostManagerConfig | None = None, *,
                 grpc_server: ServiceHost | None = None,
                 clock: Clock = SYSTEM_CLOCK,
                 metrics: Metrics | None = None) -> None:
        self.config = cfg = config or HostManagerConfig()
        self.backend = backend
        self._clock = clock
        self._lock = threading.Lock()
        self.metrics = metrics or Metrics("hostmgr")
        self.registry = HostRegistry()
        self.leases = LeaseBook(self.registry, clock.monotonic, cfg.lease_timeout, cfg.reservation_timeout)
        self.deferred = Deferred()
        self.acker = Acker(backend, self.deferred)
        self.events = EventLog(cfg.event_buffer_size, cfg.consumers, self.acker,
                               member_idle=cfg.member_idle_timeout, now=clock.monotonic)
        self.maintenance = Maintenance(self.registry, self.leases, store, self._lock, clock,
                                       cfg.recovery_grace, on_state=self._maintenance_state)
        self.router = Router(self.registry, self.leases, backend, self._lock, self.deferred,
                             clock.monotonic, cfg.pending_kill_ttl, cfg.unreached_hold)
        self.intake = Intake(self.registry, self.leases, self.events, self.router, self._lock,
                             self.deferred, self.maintenance.enqueue, self._count_update())
        self._launched = self.metrics.counter("launched_runs", "Runs handed to hosts")
        self._launch_failed = self.metrics.counter("launch_failures", "Runs that could not be launched")
        self._loops: list[Loop] = []
        self._started = False
        self._export_gauges()
        if grpc_server is not None:
            serve_host_service(grpc_server, self)

    def _maintenance_state(self, hostname: str, state: HostState) -> None:
        """A host's maintenance state was written: a cordoning backend follows it (off the
        caller's path, since it is a call to the cluster)."""
        backend = self.backend
        if isinstance(backend, CordoningBackend):
            unschedulable = state is not HostState.UP
            self.deferred.defer(lambda: backend.cordon(hostname, unschedulable))

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        """Recover, connect to the backend and start the background greenlets."""
        if self._started:
            return
        self.connect()
        self.maintenance.engine.start()
        self.deferred.start()
        # Both wait one period first: `connect()` has just queued a full reconciliation.
        self._loops = [self._periodic("prune", self.config.prune_interval, self.prune)]
        if self.config.reconcile_interval > 0:
            self._loops.append(self._periodic("reconcile", self.config.reconcile_interval,
                                              lambda: self.reconcile(None)))
        for loop in self._loops:
            loop.start()
        log.info("host manager started (backend %s)", self.backend.name)

    def connect(self) -> None:
        """Load maintenance records, start the backend and queue a reconciliation of every
        run, without starting any greenlet (`start` does this, then starts them).

        A caller that drives the host manager itself (the simulator, on a simulated clock)
        calls this instead of `start`, then `settle()` whenever work may be due, `prune()`
        every `prune_interval`, and `reconcile(None)` every `reconcile_interval`.
        """
        self.maintenance.load()
        self.backend.start(self.intake)
        self._started = True
        self.deferred.defer(lambda: self.reconcile(None))

    def stop(self) -> None:
        """Stop the greenlets and the backend; tasks keep running."""
        if not self._started:
            return
        self._started = False
        for loop in self._loops:
            loop.stop()
        self._loops = []
        try:
            self.backend.stop()
        finally:
            self.acker.flush()
            self.deferred.stop()
            self.maintenance.engine.stop()
        log.info("host manager stopped")

    @staticmethod
    def _periodic(name: str, interval: float, job: Callable[[], object]) -> Loop:
        return Loop(name, job, interval=interval, retry_delay=interval, delay_first=True,
                    log=log)

    def prune(self) -> None:
        """Expire leases, reservations, holds on unreached hosts and pending kills (the
        pruner greenlet's work)."""
        with self._lock:
            self.leases.prune()
            offered = self.registry.expire_holds(self._clock.monotonic())
        if offered:
            log.info("%s: not heard from %g s after a launch failed to reach it; no longer "
                     "held from placement", ", ".join(offered), self.config.unreached_hold)
        self.router.prune()

    def reconcile(self, run_ids: Sequence[str] | None = None,
                  expected: Sequence[TaskState | None] | None = None) -> None:
        """Ask the backend to re-report runs (all of them if None).  The re-report of a run
        named here is streamed even if it repeats an update streamed already (events.py):
        the job manager taking the runs over may not have applied it.  A run whose
        `expected` state (one per run id) is the one we last heard is left out: the caller
        holds that report already, and streaming a million of them again after a job
        manager restart cost every consumer as much as the recovery itself."""
        if run_ids and expected is not None:
            if len(expected) != len(run_ids):
                raise InvalidArgument(f"{len(expected)} expected states for {len(run_ids)} "
                                      "runs", field="expected")
            with self._lock:
                runs = self.registry.runs
                changed = [run_id for run_id, state in zip(run_ids, expected, strict=True)
                           if state is None or (run := runs.get(run_id)) is None
                           or run.state is not state]
            if not changed:
                return
            run_ids = changed
        if run_ids:
            self.events.redeliver(list(run_ids))
        try:
            self.backend.reconcile(None if run_ids is None else list(run_ids))
        except Exception:
            log.warning("reconciliation failed", exc_info=True)

    # -- stepped by the caller (tests, tools, the simulator) after `connect()` ---------------
    def run_due(self) -> int:
        """One pass of the work due now, in the caller: the deferred work queued (acks,
        reconciliations, cordons) and the maintenance steps due.  Returns how much ran."""
        return self.deferred.run_pending() + self.maintenance.engine.run_due()

    def next_due(self) -> float | None:
        """The earliest monotonic time a maintenance step comes due (None: none scheduled).
        Deferred work is always due at once; the periodic passes (`prune`, `reconcile`) are
        the caller's to pace."""
        return self.maintenance.schedule.next_deadline()

    def settle(self) -> None:
        """`run_due` until a pass runs nothing (at most 100 passes)."""
        for _ in range(100):
            if not self.run_due():
                return

    def offer_order(self) -> tuple[str, ...]:
        """The hosts a lease would take now, in the order it takes them (the forecast copies
        it: placement breaks ties between hosts by it)."""
        with self._lock:
            return self.registry.offer_order()

    def restore_offer_order(self, names: tuple[str, ...]) -> None:
        """Offer the hosts named first, in that order (a simulation resuming a live order)."""
        with self._lock:
            self.registry.restore_offer_order(names)

    # -- HostManagerPort: placement engine side --------------------------------------------
    def acquire_hosts(self, max_hosts: int = 0) -> HostLease:
        """Lease every offerable host (or the first `max_hosts`)."""
        with self._lock:
            return self.leases.acquire(max_hosts)

    def commit_lease(self, lease_id: str, reservations: Sequence[HostReservation]) -> None:
        """Reserve room for placed runs and free the rest of the lease."""
        with self._lock:
            self.leases.commit(lease_id, reservations)

    def release_lease(self, lease_id: str) -> None:
        """Give a lease back unused; idempotent."""
        with self._lock:
            self.leases.release(lease_id)

    # -- HostManagerPort: job manager side -------------------------------------------------
    def launch(self, hostname: str, tasks: Sequence[LaunchSpec]) -> list[LaunchFailure]:
        """Start runs on a host; returns those that could not be handed to it."""
        failures = self.router.launch(hostname, tasks)
        self._launched.inc(len(tasks) - len(failures))
        if failures:
            self._launch_failed.inc(len(failures))
        return failures

    def launch_hosts(self, launches: Mapping[str, Sequence[LaunchSpec]]
                     ) -> dict[str, list[LaunchFailure]]:
        """`launch` on many hosts in one call; the failures by hostname."""
        failures = self.router.launch_hosts(launches)
        failed = sum(len(f) for f in failures.values())
        self._launched.inc(sum(len(t) for t in launches.values()) - failed)
        if failed:
            self._launch_failed.inc(failed)
        return failures

    def kill(self, run_ids: Sequence[str], grace_secs: float = 5.0) -> None:
        """Stop runs wherever they are; idempotent."""
        self.router.kill(run_ids, grace_secs)

    def destroy_volumes(self, hostname: str, volume_ids: Sequence[str]) -> list[str]:
        """Remove persistent volumes from a host; returns those a live run still uses.  A
        backend that keeps no volumes has none to remove; a host that is not registered
        now is Unavailable (ask again once it is back)."""
        if not isinstance(self.backend, VolumeBackend) or not volume_ids:
            return []
        try:
            return self.backend.destroy_volumes(hostname, volume_ids)
        except NotFound as exc:
            raise Unavailable(f"host {hostname!r} is not registered: {exc}",
                              field="hostname") from None

    def adopt(self, hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        """Book runs already running on `hostname` (the job manager's recovery), so their
        resources, ports and labels count again after a host manager restart."""
        self.router.adopt(hostname, tasks)

    def adopt_hosts(self, runs: Mapping[str, Sequence[LaunchSpec]]) -> None:
        """`adopt` for many hosts in one call (a job manager's recovery)."""
        self.router.adopt_hosts(runs)

    def sandbox_files(self, hostname: str, run_id: str,
                      path: str = "") -> tuple[str, list[tuple[str, int]]]:
        """The host's file-server address and the entries of a run's sandbox directory."""
        if not self.host_known(hostname):
            raise NotFound(f"host {hostname!r} is not known", field="hostname")
        listing = getattr(self.backend, "sandbox_listing", None)
        if listing is not None:
            # Our agents serve files only under a capability (peloton/agent/caps.py): it
            # goes in front of every name, so the paths BrowseSandbox answers carry it.
            cap, files = listing(hostname, run_id, path)
            if cap:
                files = [(f"{cap}/{name}", size) for name, size in files]
        else:
            files = self.backend.list_sandbox(hostname, run_id, path)
        with self._lock:
            rec = self.registry.hosts.get(hostname)
            address = rec.file_address if rec is not None else ""
        return address or hostname, files

    def read_sandbox(self, hostname: str, run_id: str, path: str, offset: int = 0,
                     length: int = 1 << 20) -> bytes:
        """Bytes of a file in a run's sandbox."""
        if not self.host_known(hostname):
            raise NotFound(f"host {hostname!r} is not known", field="hostname")
        return self.backend.read_sandbox(hostname, run_id, path, offset, length)

    def subscribe(self, consumer: str) -> ConsumerStream:
        """The status stream for one named consumer, after its acknowledged offset."""
        return ConsumerStream(self.events, consumer)

    @property
    def stream_id(self) -> str:
        """Identity of this process's status stream (a remote consumer re-subscribes on change)."""
        return self.events.stream_id

    def cluster_capacity(self) -> tuple[Resources, float]:
        """Non-revocable capacity of connected UP hosts, and their slack cpu."""
        with self._lock:
            return self.registry.capacity()

    def host_states(self) -> dict[str, HostState]:
        """Maintenance state of every known host."""
        with self._lock:
            return self.registry.states()

    def draining_runs(self) -> list[tuple[str, str]]:
        """(hostname, run id) of every run on a DRAINING host."""
        with self._lock:
            return self.registry.draining_runs()

    def drain_requests(self) -> dict[str, DrainRequest]:
        """How each DRAINING host is drained (see maintenance.py)."""
        return self.maintenance.drain_requests()

    # -- maintenance and queries (HostService) ----------------------------------------------
    def host_known(self, hostname: str) -> bool:
        """The backend reported this host, or storage has a record of it."""
        with self._lock:
            return self.registry.known(hostname)

    def start_maintenance(self, hostname: str, drain: DrainRequest | None = None) -> HostInfo:
        """Drain a host (UP -> DRAINING now, DRAINED then DOWN once empty), within each job's
        maximum unavailable instances or as `drain` says.  NotFound if unknown."""
        return self.maintenance.start_maintenance(hostname, drain)

    def complete_maintenance(self, hostname: str) -> HostInfo:
        """Bring a DOWN host back UP.  NotFound if unknown, FailedPrecondition if not DOWN."""
        return self.maintenance.complete_maintenance(hostname)

    def end_maintenance(self, hostname: str) -> HostInfo:
        """Bring a host back UP from any maintenance state, stopping a drain in progress
        (Aurora's endMaintenance).  NotFound if unknown; idempotent."""
        return self.maintenance.end_maintenance(hostname)

    def query_hosts(self, states: Sequence[HostState] = ()) -> list[HostInfo]:
        """Known hosts (or those in `states`), sorted by hostname."""
        return self.maintenance.query(states)

    def host_summaries(self) -> list[HostSummary]:
        """Every known host with capacity, allocation and connection, sorted by hostname."""
        with self._lock:
            return self.registry.summaries()

    def leased_hosts(self) -> set[str]:
        """Hosts a placement engine holds a lease on now."""
        with self._lock:
            return self.leases.leased_hosts()

    def host_shapes(self) -> list[HostShape]:
        """What every known host could ever hold, sorted by hostname (cached until a host
        registers, goes, or changes its maintenance state)."""
        with self._lock:
            return self.registry.shapes()

    # -- metrics ---------------------------------------------------------------------------
    def _count_update(self) -> Callable[[Offered, int], None]:
        counter = self.metrics.counter("status_updates", "Status updates by what the stream did",
                                       ["verdict"])
        children = {v: counter.labels(verdict=v.value) for v in Offered}
        return lambda verdict, n: children[verdict].inc(n)

    def _export_gauges(self) -> None:
        # Read at scrape time only: nothing on the hot paths.
        gauges: dict[str, tuple[str, Callable[[], float]]] = {
            "event_buffer_events": ("Events buffered, not yet acknowledged by every consumer",
                                    lambda: len(self.events)),
            "leases_open": ("Host leases open", lambda: self.leases.lease_count),
            "reservations_held": ("Reservations held", lambda: self.leases.reservation_count),
            "runs_booked": ("Runs booked on hosts", lambda: len(self.registry.runs)),
            "hosts_offerable": ("Hosts that can be leased now", lambda: len(self.registry.offerable)),
        }
        for name, (doc, fn) in gauges.items():
            self.metrics.gauge(name, doc).set_function(fn)
