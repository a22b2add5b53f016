"""The forecast served from live state: a snapshot of the resource manager, the host manager
and the store, run forward by the real scheduler in a worker process.

`LiveState.snapshot()` copies, under the resource manager's lock, what it knows (pools with
config, entitlement and allocation; the queues in admission order; the admitted and running
records with their hosts; and the state that decides what it does next: how long each
queued gang has been refused and which holds its queue's room, each task's failed
placements and when its placement retry is due, when entitlements were computed and
whether demand changed since, the preemption counts, the admission loop's last pass, and
the clock all of these are read on), then reads outside the lock the hosts (the host
manager's summaries: capacity, labels, maintenance), the host order placement breaks ties
by where this process can read it (`rotation_of`), and, per job involved, its newest config
(type, priority, gang size) and its runtimes (when each running task started; the
durations of its finished runs, its history: `core.forecast.durations`).

`run_in_worker` runs `peloton.simulation.forecast_worker` in a child process: the
simulation builds its own daemons and store, which must not share this daemon's metrics,
threads or GIL-time, and a child can be killed, so the wall-time cap is a hard one (the
child gets the cap; the parent kills it after the cap plus `WORKER_GRACE`).

`ForecastServicer` is pelotonpy.api.forecast.ForecastService (proto/pelotonpy/api/forecast);
the composition roots register it beside the resource manager (`serve_forecast`).
"""

from __future__ import annotations

import logging
import math
import pickle  # between this process and its own child: both run this code, nothing else
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from peloton.api.convert.ext_forecast import forecast_to_pb
from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2 as pb
from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2_grpc
from peloton.api.grpc_server import ServiceHost
from peloton.api.service_registry import register
from peloton.core.errors import (
    DataCorruption,
    InvalidArgument,
    NotFound,
    PelotonError,
    ResourceExhausted,
    Unavailable,
)
from peloton.core.forecast import durations
from peloton.core.forecast.model import (
    Bounds,
    DurationSource,
    Forecast,
    HostRotation,
    LiveHost,
    PoolState,
    QueuedTask,
    RunningTask,
    Snapshot,
)
from peloton.core.model.job import JobSpec
from peloton.core.ports import HostManagerPort
from peloton.core.respool.queues import QueueKind
from peloton.core.states import HostState, JobType, TaskState
from peloton.hostmgr.app import HostManager
from peloton.placement.app import PlacementEngine
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.pools import view_of
from peloton.storage import Store

log = logging.getLogger(__name__)

#: Largest bounds a caller may ask for (a week ahead, a minute of wall time, 20 runs).
MAX_BOUNDS = Bounds(horizon=7 * 86400.0, wall=60.0, variations=20)
#: Seconds the worker may take beyond its wall cap (starting, importing) before it is killed.
WORKER_GRACE = 10.0
#: Forecasts computed at once by this process (each child takes a core while it runs).
MAX_WORKERS = 2
_WORKERS = threading.BoundedSemaphore(MAX_WORKERS)

#: Resource manager states of a task that holds resources on a host (or is about to).
_ON_HOST = frozenset({TaskState.PLACED, TaskState.LAUNCHING, TaskState.LAUNCHED,
                      TaskState.STARTING, TaskState.RUNNING, TaskState.PREEMPTING,
                      TaskState.KILLING})
#: Admitted, waiting for a host.
_ADMITTED = frozenset({TaskState.READY, TaskState.PLACING, TaskState.RESERVED})


@dataclass(frozen=True, slots=True)
class _Job:
    """What the forecast needs of one job."""

    service: bool
    gang: int
    duration: float | None
    source: DurationSource
    #: Wall-clock start of each instance's current run (0: unknown).
    started: dict[int, float]


class LiveState:
    """Reads a `Snapshot` from the live daemons and the store (module docstring)."""

    def __init__(self, resmgr: ResourceManager, hostmgr: HostManagerPort, store: Store,
                 now: Callable[[], float] = time.time,
                 rotation: Callable[[], HostRotation] | None = None) -> None:
        self.resmgr = resmgr
        self.hostmgr = hostmgr
        self.store = store
        #: The clock task runtimes' start and completion times are read against.
        self.now = now
        #: Reads the host order placement uses, where this process can (`rotation_of`: the
        #: host manager and placement engine in this process); None: not carried.
        self.rotation = rotation

    def snapshot(self, job_id: str, duration: float | None = None) -> Snapshot:
        """Live state now; `duration` is the caller's estimate for `job_id`'s tasks."""
        rm = self.resmgr
        now = self.now()
        mono = rm.clock.monotonic()
        with rm.lock:  # one consistent view: pools, queues and records under one lock
            book = rm.book
            views = [view_of(n) for n in book.tracker.tree.nodes() if n.parent is not None]
            paths = {v.pool_id: v.path for v in views}
            # Admitted tasks first (they are past admission), then each leaf's queue in
            # admission order.
            admitted: list[tuple[Any, bool, int]] = []
            waiting: list[tuple[Any, bool, int]] = []
            # Each waiting task's gang: how long admission has refused it, whether it holds
            # its queue's reservation (they decide what is admitted beside it).
            gangs: dict[Any, tuple[float | None, bool, QueueKind]] = {}
            for node in book.tracker.tree.leaves():
                if node.queues is None:
                    continue
                holders = {id(g) for g in node.queues.reserved.values()}
                for kind, gang in node.queues.gangs():
                    refused = None if gang.refused_since is None else mono - gang.refused_since
                    for rec in gang.tasks:
                        if rec.state is TaskState.PENDING:
                            waiting.append((rec, False, len(gang.tasks)))
                            gangs[rec.task_id] = (refused, id(gang) in holders, kind)
            running_raw = []
            for rec in book.tracker.records():
                if rec.state in _ADMITTED:
                    admitted.append((rec, True, 1))
                elif rec.state in _ON_HOST:
                    running_raw.append((rec, book.hosts.get(rec.task_id, ""),
                                        mono - rec.start_time))
            preemption = rm.config.preemption_enabled
            attempts_raw = [rec.placement_attempts for rec, _, _ in admitted + waiting]
            retries = book.ready.retries()
            entitled_for = mono - rm.entitled_at if rm.entitled_at > -math.inf else None
            stale = book.demand_changed
            admitted_at = rm.loops.admitted_at
            admitted_for = mono - admitted_at if admitted_at > -math.inf else None
            over = tuple(sorted((paths[pool_id], n) for pool_id, n in
                                (rm.preemptor.counter.counts.items() if rm.preemptor else ())
                                if pool_id in paths))
        queued_raw = admitted + waiting
        # The resource manager's own words (it takes its lock itself).
        reasons = rm.pending_reasons([rec.task_id for rec, _, _ in queued_raw])
        jobs = {rec.task_id.job_id for rec, _, _ in queued_raw} | \
            {rec.task_id.job_id for rec, _, _ in running_raw}
        facts = {j: self._job(j, duration if j == job_id else None) for j in sorted(jobs)}
        pools = tuple(PoolState(v.path, v.config, v.entitlement, v.allocation,
                                v.non_slack_entitlement, v.slack_entitlement) for v in views)
        never = (None, False, QueueKind.PENDING)
        queued = tuple(replace(self._queued(rec, admitted, gang, paths, facts, reasons),
                               refused_for=gangs.get(rec.task_id, never)[0],
                               holds_room=gangs.get(rec.task_id, never)[1],
                               queue=gangs.get(rec.task_id, never)[2],
                               placement_attempts=attempts,
                               retry_in=(retries[rec.task_id] - mono
                                         if rec.task_id in retries else None))
                       for (rec, admitted, gang), attempts in zip(queued_raw, attempts_raw,
                                                                  strict=True))
        running = tuple(self._running(rec, host, elapsed, paths, facts, now)
                        for rec, host, elapsed in running_raw if host)
        hosts = tuple(LiveHost(s.info.hostname, s.capacity, s.info.labels,
                                maintenance=not s.connected or s.info.state is not HostState.UP)
                      for s in self.hostmgr.host_summaries())
        return Snapshot(now=now, pools=pools, hosts=hosts, running=running, queued=queued,
                        preemption=preemption,
                        rotation=self.rotation() if self.rotation is not None else None,
                        entitled_for=entitled_for, entitlement_stale=stale,
                        admitted_for=admitted_for,
                        over_cycles=over, monotonic=mono)

    def _job(self, job_id: str, given: float | None) -> _Job:
        try:
            spec: JobSpec | None = self.store.get_job_config(job_id)
            runtimes = self.store.get_task_runtimes(job_id)
        except (NotFound, InvalidArgument, DataCorruption):
            spec, runtimes = None, {}
        service = spec is not None and spec.type is not JobType.BATCH
        gang = spec.sla.minimum_running_instances if spec is not None else 0
        history = [rt.completion_time - rt.start_time for rt in runtimes.values()
                   if rt.state is TaskState.SUCCEEDED and rt.start_time > 0]
        expected, source = durations.expected(service=service, given=given, history=history)
        return _Job(service, max(gang, 1), expected, source,
                    {i: rt.start_time for i, rt in runtimes.items()})

    @staticmethod
    def _queued(rec: Any, admitted: bool, gang: int, paths: dict[str, str],
                facts: dict[str, _Job], reasons: dict[Any, str]) -> QueuedTask:
        tid, task = rec.task_id, rec.task
        job = facts[tid.job_id]
        return QueuedTask(tid.job_id, tid.instance, rec.pool.path,
                          task.resources, job.duration, job.source, task.priority,
                          task.preemptible, task.request.needs.constraint, gang, admitted,
                          reasons.get(tid, ""))

    @staticmethod
    def _running(rec: Any, host: str, elapsed: float, paths: dict[str, str],
                 facts: dict[str, _Job], now: float) -> RunningTask:
        tid, task = rec.task_id, rec.task
        job = facts[tid.job_id]
        started = job.started.get(tid.instance, 0.0)
        if started > 0:
            elapsed = now - started
        return RunningTask(tid.job_id, tid.instance, rec.pool.path,
                           task.resources, host, durations.remaining(job.duration, elapsed),
                           job.source, task.priority, task.preemptible, max(elapsed, 0.0),
                           job.duration)


def rotation_of(hostmgr: HostManager, placement: PlacementEngine) -> Callable[[], HostRotation]:
    """Reads the host order of a host manager and a placement engine of this process."""
    def read() -> HostRotation:
        return HostRotation(hostmgr.offer_order(), placement.host_layout())
    return read


def bounds_of(request: pb.ForecastRequest) -> Bounds:
    """The request's bounds, defaults for zeros; InvalidArgument beyond `MAX_BOUNDS`."""
    default = Bounds()
    out = Bounds(horizon=request.horizon_secs or default.horizon,
                 wall=request.wall_secs or default.wall,
                 variations=request.variations or default.variations)
    for name, value, cap in (("horizon_secs", out.horizon, MAX_BOUNDS.horizon),
                             ("wall_secs", out.wall, MAX_BOUNDS.wall),
                             ("variations", out.variations, MAX_BOUNDS.variations)):
        if not 0 < value <= cap:
            raise InvalidArgument(f"must be in (0, {cap:g}], got {value:g}", field=name)
    return out


def run_in_worker(snapshot: Snapshot, job_id: str, instances: tuple[int, ...],
                  bounds: Bounds) -> Forecast:
    """The forecast, computed in a child process killed after the wall cap plus grace; at
    most `MAX_WORKERS` at once (ResourceExhausted beyond: forecasts cost a core each)."""
    if not _WORKERS.acquire(blocking=False):
        raise ResourceExhausted(f"{MAX_WORKERS} forecasts are running; ask again shortly")
    payload = pickle.dumps((snapshot, job_id, instances, bounds))
    try:
        done = subprocess.run([sys.executable, "-m", "peloton.simulation.forecast_worker"],
                              input=payload, capture_output=True, check=False,
                              timeout=bounds.wall + WORKER_GRACE)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"the forecast did not answer within {bounds.wall:g} s "
                          f"(+{WORKER_GRACE:g} s to start)") from None
    finally:
        _WORKERS.release()
    if done.returncode != 0:
        log.error("forecast worker failed (%s): %s", done.returncode,
                  done.stderr.decode(errors="replace")[-2000:])
        raise Unavailable("the forecast worker failed; see the resource manager's log")
    result = pickle.loads(done.stdout)  # our own child's answer
    if isinstance(result, Forecast):
        return result
    kind, message, field = result
    raise {"not_found": NotFound, "invalid_argument": InvalidArgument}.get(
        kind, PelotonError)(message, field=field)


Runner = Callable[[Snapshot, str, tuple[int, ...], Bounds], Forecast]


class ForecastServicer(forecast_pb2_grpc.ForecastServiceServicer):  # type: ignore[misc]
    """pelotonpy.api.forecast.ForecastService over live state."""

    def __init__(self, live: LiveState, runner: Runner = run_in_worker) -> None:
        self.live = live
        self.runner = runner

    def Forecast(self, request: pb.ForecastRequest, context: Any) -> pb.ForecastResponse:
        """The forecast for the job's pending instances (or those named)."""
        if not request.job_id:
            raise InvalidArgument("a job id is required", field="job_id")
        bounds = bounds_of(request)
        snapshot = self.live.snapshot(request.job_id, request.duration_secs or None)
        return forecast_to_pb(self.runner(snapshot, request.job_id,
                                          tuple(request.instances), bounds))


def serve_forecast(grpc: ServiceHost, resmgr: ResourceManager, hostmgr: HostManagerPort,
                   store: Store, rotation: Callable[[], HostRotation] | None = None) -> LiveState:
    """Register ForecastService on `grpc`, over these daemons and store (`rotation`: where
    the host manager and placement engine run in this process, `rotation_of` them); returns
    the live state it reads."""
    live = LiveState(resmgr, hostmgr, store, rotation=rotation)
    register(grpc, forecast_pb2_grpc.add_ForecastServiceServicer_to_server,
             ForecastServicer(live))
    return live
