"""The served forecast: live state read from real daemons, the forecast computed in a worker
process, the answer as ForecastResponse and back, and as the CLI prints it."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.api.convert.ext_forecast import forecast_from_pb, forecast_to_pb
from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2 as pb
from peloton.cluster.forecast import ForecastServicer, LiveState, bounds_of, run_in_worker
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.forecast.model import BindingKind, Bounds, DurationSource
from peloton.core.forecast.render import text, to_json
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.simulation.cluster import SimHost
from peloton.simulation.daemons import SimulatedCluster
from peloton.simulation.driver import job_id_for
from peloton.simulation.jobs import job_spec_for
from peloton.simulation.trace import TraceJob

CPU = Resources(cpu=1, mem_mb=256)
JOB_A = TraceJob("a", 10.0, "/p", 8, CPU, 100.0)
JOB_B = TraceJob("b", 150.0, "/p", 1, CPU, 30.0)


@pytest.fixture
def live() -> Iterator[SimulatedCluster]:
    """One 4-cpu host, pool /p (4 cpu): job a's 8 tasks of 100 s, submitted at t=10, run
    four at a time, so at t=150 four have finished (its history: 100 s each) and four run
    since t=110; job b's task, submitted at t=150, waits for a cpu."""
    jobs = {job_id_for(0): JOB_A, job_id_for(1): JOB_B}

    def duration(job_id: str, instance: int) -> float:
        return jobs[job_id].duration_of(instance) or math.inf

    cluster = SimulatedCluster(epoch=1_700_000_000.0, durations=duration, preemption=False)
    config = ResourcePoolConfig(name="p", parent_id="root", resources=(
        ResourceConfig(ResourceKind.CPU, reservation=4, limit=4),
        ResourceConfig(ResourceKind.MEMORY, reservation=4096, limit=4096)))
    cluster.start([SimHost("h0", "g", Resources(cpu=4, mem_mb=4096))], [("/p", config)])
    cluster.advance_to(10.0)
    cluster.submit(job_spec_for(JOB_A, "/p"), job_id_for(0))
    t = 10.0
    while t < 150.0:
        cluster.advance_to(t)
        cluster.run_instant()
        due = cluster.next_due()
        t = min(due if due is not None else 150.0, 150.0)
    cluster.advance_to(150.0)
    cluster.submit(job_spec_for(JOB_B, "/p"), job_id_for(1))
    cluster.run_instant()
    yield cluster
    cluster.close()


def state(cluster: SimulatedCluster) -> LiveState:
    return LiveState(cluster.resmgr, cluster.hostmgr, cluster.store, now=cluster.clock.now)


def test_live_state_is_what_the_daemons_hold(live: SimulatedCluster) -> None:
    snap = state(live).snapshot(job_id_for(1))
    assert snap.now == 150.0 and snap.monotonic == 150.0  # the resource manager's clock
    assert [(p.path, p.allocation.cpu) for p in snap.pools] == [("/p", 4.0)]
    assert [(h.hostname, h.capacity.cpu, h.maintenance) for h in snap.hosts] == [("h0", 4, False)]
    a = job_id_for(0)
    assert sorted((r.job_id, r.instance, r.hostname, r.remaining, r.source)
                  for r in snap.running) == [
        (a, i, "h0", 60.0, DurationSource.HISTORY) for i in range(4, 8)]
    (queued,) = snap.queued
    assert (queued.job_id, queued.instance, queued.pool, queued.duration, queued.source) == \
        (job_id_for(1), 0, "/p", 3600.0, DurationSource.DEFAULT)
    assert queued.reason.startswith("waiting for admission in pool /p (1st of 1 queued)")
    assert queued.retry_in is None  # not admitted: no placement retry
    given = state(live).snapshot(job_id_for(1), duration=30.0).queued[0]
    assert (given.duration, given.source) == (30.0, DurationSource.GIVEN)


def test_the_service_answers_from_a_worker_process(live: SimulatedCluster) -> None:
    """Job a's last four end 60 s from now (their history says 100 s, they ran 40): b, at
    the head of /p's queue, starts then."""
    servicer = ForecastServicer(state(live))
    got = servicer.Forecast(pb.ForecastRequest(job_id=job_id_for(1), variations=1,
                                               duration_secs=30.0), None)
    forecast = forecast_from_pb(got)
    assert (forecast.estimate.p50, forecast.estimate.p90) == (60.0, 60.0)
    assert forecast.binding.kind is BindingKind.POOL_LIMIT
    assert forecast.binding.summary == "pool /p is at its limit: needs 1 cpu, 4 of 4 cpu in use"
    assert forecast.bounds == Bounds(variations=1)
    assert forecast_from_pb(forecast_to_pb(forecast)) == forecast
    printed = text(forecast)
    assert printed.startswith(f"job {job_id_for(1)} instance 0: starts 1m00s\n")
    assert "bounds: looked 1d00h ahead over 1 run(s)" in printed
    assert json.loads(json.dumps(to_json(forecast)))["estimate"]["p50_secs"] == 60.0


def test_refusals_come_back_from_the_worker_typed(live: SimulatedCluster) -> None:
    snap = state(live).snapshot(job_id_for(0))
    with pytest.raises(NotFound, match="has no pending task"):
        run_in_worker(snap, job_id_for(0), (), Bounds(variations=1))
    with pytest.raises(InvalidArgument, match=r"must be in \(0, 60\]"):
        bounds_of(pb.ForecastRequest(job_id="x", wall_secs=61))
    with pytest.raises(InvalidArgument, match="job id is required"):
        ForecastServicer(state(live)).Forecast(pb.ForecastRequest(), None)


def test_at_most_two_forecasts_run_at_once(live: SimulatedCluster) -> None:
    from peloton.cluster import forecast as served
    from peloton.core.errors import ResourceExhausted

    snap = state(live).snapshot(job_id_for(1))
    held = [served._WORKERS.acquire(blocking=False) for _ in range(served.MAX_WORKERS)]
    try:
        assert all(held)
        with pytest.raises(ResourceExhausted, match="2 forecasts are running"):
            run_in_worker(snap, job_id_for(1), (), Bounds(variations=1))
    finally:
        for _ in held:
            served._WORKERS.release()


def test_the_all_in_one_forecast_carries_the_host_order(tmp_path: Path) -> None:
    """`peloton up` runs the host manager and the placement engine in the serving process, so
    its forecast copies their host order (offer order, index layout) into every snapshot."""
    from peloton.cluster.allinone import AllInOne, UpConfig

    umask = os.umask(0o022)  # the cluster makes its data dir private for the whole process
    cluster = AllInOne(UpConfig(jobmgr_port=0, resmgr_port=0, hostmgr_port=0, aurora_port=-1,
                                ui_port=-1, data_dir=tmp_path, agents=0, backend="sim:2"))
    try:
        cluster.start()
        assert cluster.forecast is not None
        deadline = time.monotonic() + 10.0
        while True:
            rotation = cluster.forecast.snapshot("no-such-job").rotation
            assert rotation is not None
            if len(rotation.offer_order) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(rotation.offer_order) == 2
    finally:
        cluster.stop()
        os.umask(umask)
