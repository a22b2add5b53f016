"""The resource manager's composition root: pools, entitlement, admission, preemption, the ports.

`ResourceManager` implements `ResourceManagerPort` for the job manager and
the placement engine, serves the v0 ResourceManager API, and runs four
greenlets while started (loops.py):

* admission, every `scheduling_period` and whenever work arrives or is
  freed: state timeouts, then admission of queued gangs (PENDING -> READY);
* entitlement, every `entitlement_period`: fresh cluster capacity from the
  host manager, then one entitlement cycle (also run at once on every pool
  change, and after new demand at most every `entitlement_min_interval`);
* preemption, every `preemption_period` (when enabled);
* the host manager's status stream: RUNNING and terminal events.

Time: everything reads the injected `Clock`'s monotonic reading, the task book's
timeouts and the long polls' deadlines alike (a fake clock does not move by itself, so
with one the long polls are called with a zero timeout, as the tests do).

Start order (Peloton's server.go): load the pool tree from storage (the
root always exists; no default pool is made), compute entitlements, then
start the loops.  A restart begins with no tasks: the job manager hands
them back (`recover_task` for runs on hosts, `enqueue_gangs` for the rest)
during its own recovery.  State lives behind one lock, never held across a
wait or a call to another daemon.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from peloton.api.gen.peloton.api.v0.respool import respool_pb2_grpc
from peloton.api.gen.pelotonpy.ext import capacity_pb2_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.service_registry import register
from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.common.metrics import Metrics
from peloton.core.errors import Unavailable
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import (
    EnqueueFailure,
    Placement,
    PlacementFailure,
    PlacementGang,
    Victim,
)
from peloton.core.partitions import PartitionSet
from peloton.core.ports import HostManagerPort, RecoveredRun
from peloton.core.respool.entitlement import compute_entitlements
from peloton.core.respool.records import RmTask
from peloton.core.states import TaskState
from peloton.resmgr.config import ResourceManagerConfig
from peloton.resmgr.loops import Counts, Loops
from peloton.resmgr.pools import PoolBook, load_tree
from peloton.resmgr.preemptor import Preemptor
from peloton.resmgr.reasons import pending_reasons
from peloton.resmgr.servicers import PoolStatusServicer, ResourcePoolServicer
from peloton.resmgr.taskbook import TaskBook
from peloton.resmgr.wakeup import Wakeup
from peloton.storage.cluster_store import ResourcePoolStore

log = logging.getLogger(__name__)
#: How often (seconds) the resource manager asks which host sizes are UP: a gang that no
#: UP host could hold is never admitted (core/respool/admission.py).
HOST_ROOM_PERIOD = 10.0


class ResourceManager:
    """Resource pools and the tasks queued in them; see the module docstring."""

    name = "resmgr"

    def __init__(self, store: ResourcePoolStore, hostmgr: HostManagerPort,
                 config: ResourceManagerConfig | None = None, grpc: ServiceHost | None = None,
                 clock: Clock = SYSTEM_CLOCK,
                 metrics: Metrics | None = None) -> None:
        self.config = config or ResourceManagerConfig()
        self.store = store
        self.hostmgr = hostmgr
        self.clock = clock
        self.lock = threading.Lock()
        #: Fired when admission may have work (enqueue, freed allocation, pool change).
        self.work = Wakeup()
        #: Fired when gangs became READY (dequeue waiters) or runs PLACED (launch waiters).
        self.ready_signal = Wakeup()
        self.placed_signal = Wakeup()
        self._pools: PoolBook | None = None
        self._book: TaskBook | None = None
        self.preemptor: Preemptor | None = None
        self.capacity = Resources()
        self._room_asked = -math.inf
        self.slack_cpu = 0.0
        self.entitled_at = float("-inf")
        self.metrics = metrics or Metrics("resmgr")
        self.counts = Counts(self.metrics)
        self._export_gauges()
        #: The greenlets; their one-pass methods (`admit_once`, ...) also serve tests.
        self.loops = Loops(self)
        self._running = False
        if grpc is not None:
            self.register(grpc)

    def register(self, grpc: ServiceHost) -> None:
        """Serve the v0 ResourceManager API (and its legacy name) on `grpc`."""
        register(grpc, respool_pb2_grpc.add_ResourceManagerServicer_to_server,
                 ResourcePoolServicer(lambda: self.pools))
        register(grpc, capacity_pb2_grpc.add_PoolStatusServiceServicer_to_server,
                 PoolStatusServicer(lambda: self.pools, lambda: (self.capacity, self.slack_cpu)))

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Load pools, compute entitlements, start the loops."""
        if self._running:
            return
        self.load()
        self.loops.start()
        self._running = True
        log.info("resource manager started with %d pools", len(self.book.tracker.tree))

    def stop(self) -> None:
        """Stop the loops (state stays readable until the next start reloads it)."""
        if self._running:
            self.loops.stop()
            self._running = False

    def run_due(self) -> int:
        """A caller stepping the resource manager itself (the simulator; after `load`, never
        `start`): the status events and signalled admission due now (Loops.run_due)."""
        return self.loops.run_due()

    def next_due(self) -> float | None:
        """The earliest monotonic time stepped work could change anything (Loops.next_due)."""
        return self.loops.next_due()

    def load(self) -> None:
        """Fresh state: the pool tree from storage, no tasks, entitlements from current capacity.

        `start` calls it; tests call it alone and drive the loops' one-pass methods.
        """
        tree = load_tree(self.store)
        with self.lock:
            self._book = TaskBook(tree, self.config)
            self._pools = PoolBook(self.store, tree, self.lock, self._pools_changed)
            self.preemptor = (Preemptor(self._book, self.config.sustained_over_allocation_count)
                              if self.config.preemption_enabled else None)
        self.refresh_capacity()

    def set_preemption(self, enabled: bool) -> None:
        """Turn preemption on or off from now on (the simulator's what-if; a daemon takes it
        from its config).  Turning it off drops the sustained over-allocation counts and the
        victims not yet taken; tasks already PREEMPTING still end."""
        with self.lock:
            if enabled == self.config.preemption_enabled:
                return
            self.config = replace(self.config, preemption_enabled=enabled)
            book = self.book
            book.config = self.config
            book.tracker.preemption_enabled = enabled
            self.preemptor = (Preemptor(book, self.config.sustained_over_allocation_count)
                              if enabled else None)

    @property
    def pools(self) -> PoolBook:
        """Pool CRUD (Unavailable until started)."""
        if self._pools is None:
            raise Unavailable("the resource manager is not started")
        return self._pools

    @property
    def book(self) -> TaskBook:
        """The task flow (Unavailable until started); use under `lock`."""
        if self._book is None:
            raise Unavailable("the resource manager is not started")
        return self._book

    def _export_gauges(self) -> None:
        # Read at scrape time only: nothing on the hot paths.
        def size(read: Callable[[TaskBook], int]) -> Callable[[], float]:
            return lambda: float(read(self._book)) if self._book is not None else 0.0

        gauges: dict[str, tuple[str, Callable[[], float]]] = {
            "tasks_tracked": ("Tasks the resource manager tracks", size(lambda b: len(b.tracker))),
            "ready_gangs": ("Ready gangs waiting for (or retrying) placement",
                            size(lambda b: len(b.ready))),
            "placements_waiting": ("Placements waiting for the job manager",
                                   size(lambda b: len(b.placed))),
            "timeouts_armed": ("Tasks in a timed state", size(lambda b: len(b.timeouts))),
        }
        for name, (doc, read) in gauges.items():
            self.metrics.gauge(name, doc).set_function(read)

    # -- entitlement --------------------------------------------------------------------------
    def refresh_capacity(self) -> None:
        """Ask the host manager for the cluster's capacity, then run an entitlement cycle;
        admission is woken if an entitlement changed (it has nothing new to look at
        otherwise, and passes every `scheduling_period` anyway)."""
        try:
            capacity, slack = self.hostmgr.cluster_capacity()
        except Exception:
            log.warning("cluster capacity unavailable; keeping %s", self.capacity, exc_info=True)
            capacity, slack = self.capacity, self.slack_cpu
        room = self._host_room()
        with self.lock:
            self.capacity, self.slack_cpu = capacity, slack
            changed = self.entitle_locked()
            if room is not None and room != self.book.tracker.host_room:
                # A gang no UP host could hold is never admitted (core admission.py); a host
                # that could has joined (or one went): look at the queues again.
                self.book.tracker.host_room = room
                changed = True
        if changed:
            self.work.fire()

    def _host_room(self) -> tuple[Resources, ...] | None:
        """The distinct total capacities of the UP hosts, asked at most every
        `HOST_ROOM_PERIOD` (None: not asked or unknown now; keep the last)."""
        now = self.clock.monotonic()
        if now < self._room_asked + HOST_ROOM_PERIOD:
            return None
        self._room_asked = now
        try:
            shapes = self.hostmgr.host_shapes()
        except Exception:
            log.warning("host shapes unavailable; keeping the last known", exc_info=True)
            return None
        return tuple(sorted({s.capacity for s in shapes if s.up}, key=lambda r: r.units))

    def entitle_locked(self) -> bool:
        """One entitlement cycle over the current tree and the last known capacity; whether
        any pool's entitlement changed."""
        book = self.book
        table = compute_entitlements(book.tracker.tree, self.capacity,
                                     Resources(cpu=self.slack_cpu))
        changed = table.apply(book.tracker.tree)
        book.demand_changed = False
        self.entitled_at = self.clock.monotonic()
        return changed

    def _pools_changed(self) -> None:
        self.entitle_locked()
        self.work.fire()

    # -- ResourceManagerPort: job manager side ------------------------------------------------
    def validate_pool(self, pool_id: str, need: Resources | None = None) -> None:
        """A job may be created in this pool (exists, leaf, not the root; `need` within limits)."""
        self.pools.validate_for_job(pool_id, need)

    def pool_id_for_path(self, path: str) -> str:
        """The id of the pool at `path`."""
        return self.pools.lookup(path)

    def enqueue_gangs(self, pool_id: str, gangs: Sequence[Sequence[RmTask]]) -> list[EnqueueFailure]:
        """Queue gangs, each all or nothing; returns the tasks refused."""
        with self.lock:
            failures = self.book.enqueue(pool_id, gangs)
        self.work.fire()
        return failures

    def kill_tasks(self, task_ids: Sequence[TaskId]) -> None:
        """Forget tasks and free what they hold; idempotent."""
        with self.lock:
            freed = self.book.kill(task_ids)
        if freed:
            self.work.fire()

    def get_placements(self, limit: int, timeout: float,
                       partitions: PartitionSet | None = None, *,
                       still_current: Callable[[], bool] | None = None) -> list[Placement]:
        """Placed runs to launch (PLACED -> LAUNCHING) of jobs in `partitions` (None: of any
        job), waiting up to `timeout` for the first; nothing once `still_current` says the
        caller's partitions moved (looked at before each take: a placement is made after
        its queueing, and the new owner's queueing call moved the epoch first)."""
        deadline = self.clock.monotonic() + timeout
        while True:
            token = self.placed_signal.token()
            with self.lock:
                if still_current is not None and not still_current():
                    return []
                now = self.clock.monotonic()
                out = self.book.get_placements(limit, now, partitions)
            left = deadline - now
            if out or left <= 0:
                return out
            self.placed_signal.wait(left, token)

    def recover_task(self, pool_id: str, task: RmTask, state: TaskState, hostname: str = "") -> None:
        """Re-track a run already placed, launched or running, with its allocation."""
        with self.lock:
            self.book.recover(pool_id, task, state, hostname, self.clock.monotonic())

    def recover_tasks(self, runs: Sequence[RecoveredRun]) -> None:
        """`recover_task` for each run, under one lock."""
        with self.lock:
            now = self.clock.monotonic()
            for run in runs:
                self.book.recover(run.pool_id, run.task, run.state, run.hostname, now)

    def take_victims(self, limit: int, partitions: PartitionSet | None = None) -> list[Victim]:
        """Running tasks of jobs in `partitions` (None: of any job) to stop so their pools
        get back within entitlement (each once)."""
        with self.lock:
            if self.preemptor is None:
                return []
            return self.preemptor.take(limit, self.clock.monotonic(), partitions)

    def pending_reasons(self, task_ids: Sequence[TaskId]) -> dict[TaskId, str]:
        """Why queued tasks are not running yet."""
        with self.lock:
            return pending_reasons(self.book, task_ids)

    # -- ResourceManagerPort: placement engine side --------------------------------------------
    def dequeue_gangs(self, limit: int, timeout: float) -> list[PlacementGang]:
        """Admitted gangs to place (READY -> PLACING), at most `limit` tasks."""
        deadline = self.clock.monotonic() + timeout
        while True:
            token = self.ready_signal.token()
            with self.lock:
                book = self.book
                now = self.clock.monotonic()
                out = book.dequeue(limit, now)
                due = book.ready.next_due()
            left = deadline - now
            if out or left <= 0:
                return out
            if due is not None:  # a retry comes due before the deadline: look again then
                left = min(left, max(0.001, due - now))
            self.ready_signal.wait(left, token)

    def set_placements(self, placements: Sequence[Placement],
                       failures: Sequence[PlacementFailure]) -> None:
        """Apply a placement round: PLACED runs wait for launch, failed ones retry later."""
        with self.lock:
            placed = self.book.set_placements(placements, failures, self.clock.monotonic())
        self.counts.placed.inc(placed)
        self.counts.unplaced.inc(len(failures))
        if placed:
            self.placed_signal.fire()
        if failures:
            self.work.fire()
