"""The forecast end to end on the real scheduler: a hand-computed two-pool case (exact start
time, binding constraint, "+N reservation starts it at T"), the variations, and the bounds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.forecast.model import (
    BindingKind,
    Bounds,
    CounterfactualKind,
    DurationSource,
    LiveHost,
    PoolState,
    QueuedTask,
    RunningTask,
    Snapshot,
)
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.simulation.forecast_plan import WARMUP, build
from peloton.simulation.forecast_run import estimate, forecast

NOW = 1_750_000_000.0
CPU = Resources(cpu=1, mem_mb=1024)


def pool(path: str, *, share: float, reservation: float = 0.0, entitlement: float,
         allocation: float) -> PoolState:
    name = path.rsplit("/", 1)[1]
    config = ResourcePoolConfig(name=name, parent_id="root", resources=(
        ResourceConfig(ResourceKind.CPU, reservation=reservation, limit=10, share=share),
        ResourceConfig(ResourceKind.MEMORY, reservation=reservation * 1024, limit=16384,
                       share=share)))
    return PoolState(path, config, entitlement=Resources(cpu=entitlement, mem_mb=entitlement * 1024),
                     allocation=Resources(cpu=allocation, mem_mb=allocation * 1024))


def two_pools(*, source: DurationSource = DurationSource.GIVEN, b_reservation: float = 0.0,
              spare_host: bool = True) -> Snapshot:
    """The hand case.

    Hosts of 5 cpu and 8 GiB: h0 and h1 full, h2 just back from maintenance and empty.  Pool
    /a (share 3) runs 5 one-cpu tasks of job ja on h0, ending in 100 s, and queues 10 more
    (qa, 1000 s each); pool /b (share 1) runs 5 of jb on h1, ending in 200 s, and queues
    qb's one task (50 s) behind them.  Each pool is limited to 10 cpu and reserves
    `b_reservation` (/b) or nothing.  Demand: /a 15 (its limit caps it at 10), /b 6.
    15 cpu shared 3:1 is 11.25 for /a and 3.75 for /b; /a's limit gives 1.25 back, so /a
    is entitled to 10 and /b to 5.  /b uses 5: qb's 1 more is over its entitlement, and
    that binds it now, though h2 has room.

    So /a (5 of its 10 in use) takes h2 for qa now, and h0 again when ja ends at t=100;
    /b stays at its 5 until jb ends at t=200, when qb is admitted and a host has room:
    qb starts at exactly t=200.  With /b reserving 6 (its 5 in use + qb's 1), /b is
    entitled to 6 and /a to 9: qb is admitted now and placed on h2 beside 4 of qa: t=0.
    """
    hosts = [LiveHost(f"h{i}", Resources(cpu=5, mem_mb=8192)) for i in range(3)]
    return Snapshot(
        now=NOW,
        pools=(pool("/a", share=3, entitlement=10, allocation=5),
               pool("/b", share=1, reservation=b_reservation, entitlement=5, allocation=5)),
        hosts=tuple(hosts if spare_host else hosts[:2]),
        running=(*(RunningTask("ja", i, "/a", CPU, "h0", 100.0, source) for i in range(5)),
                 *(RunningTask("jb", i, "/b", CPU, "h1", 200.0, source) for i in range(5))),
        queued=(*(QueuedTask("qa", i, "/a", CPU, 1000.0, source) for i in range(10)),
                QueuedTask("qb", 0, "/b", CPU, 50.0, source)),
        preemption=False)


def test_the_hand_computed_case_starts_when_its_pool_frees_its_own_share() -> None:
    got = forecast(two_pools(), "qb")
    assert (got.estimate.p50, got.estimate.p90, got.estimate.runs) == (200.0, 200.0, 1)
    assert got.binding.kind is BindingKind.ENTITLEMENT
    assert got.binding.summary == ("pool /b is at its entitlement (share 1): needs 1 cpu, 5 of "
                                   "5 cpu in use; 1st of 1 queued in /b")
    assert (got.binding.hosts_fit, got.binding.hosts_total) == (1, 3)
    assert got.binding.rejections == (("insufficient cpu", 2),)
    assert not got.truncated and got.instances == (0,)
    assert got.notes == ("assumes no job arrives after now",
                         "every duration is known: one run, no variations")


def test_more_reservation_starts_it_now() -> None:
    got = forecast(two_pools(), "qb")
    by_kind = {c.kind: c for c in got.counterfactuals}
    more = by_kind[CounterfactualKind.RESERVATION]
    # /b uses 5 cpu and 5 GiB and qb needs 1 and 1 more: a reservation of 6 each, +6 on 0.
    assert more.change == "+6 cpu, 6 GiB memory reservation on pool /b"
    assert more.estimate is not None and (more.estimate.p50, more.estimate.p90) == (0.0, 0.0)
    # The same snapshot with that reservation taken live gives the same answer.
    assert forecast(two_pools(b_reservation=6), "qb").estimate.p50 == 0.0
    # A host added now makes 20 cpu: 15 for /a is capped at 10, so /b may have up to 10 and
    # is entitled to its demand, 6: qb starts now too.  Half the cpu (0.5) still puts /b
    # over its 5.
    added = by_kind[CounterfactualKind.ADD_HOSTS]
    assert added.change == "1 host like h2 (5 cpu, 8 GiB memory) added"
    assert added.estimate is not None and added.estimate.p50 == 0.0
    half = by_kind[CounterfactualKind.SMALLER_RESOURCES].estimate
    assert half is not None and half.p50 == 200.0
    # Nothing runs below qb's priority, and qb has one instance: those changes do not apply.
    assert CounterfactualKind.STOP_JOB not in by_kind
    assert CounterfactualKind.FEWER_INSTANCES not in by_kind


def test_in_a_full_cluster_more_reservation_waits_for_a_host_and_a_placement_retry() -> None:
    """Without h2, /b reserving 6 is admitted now but no host has room until ja ends at
    t=100; the resource manager retries a failed placement after at most `retry_delay_max`
    (2 s), so it starts in [100, 102]."""
    by_kind = {c.kind: c for c in forecast(two_pools(spare_host=False), "qb").counterfactuals}
    est = by_kind[CounterfactualKind.RESERVATION].estimate
    assert est is not None and est.p50 is not None and 100.0 <= est.p50 <= 102.0


def test_a_lower_priority_job_stopped_frees_its_cpu() -> None:
    snap = two_pools()
    snap = Snapshot(snap.now, snap.pools, snap.hosts, snap.running,
                    tuple(q if q.job_id != "qb" else QueuedTask("qb", 0, "/b", CPU, 50.0,
                                                                priority=5)
                          for q in snap.queued), preemption=False)
    stop = {c.kind: c for c in forecast(snap, "qb").counterfactuals}[CounterfactualKind.STOP_JOB]
    # ja and jb both run 5 cpu at priority 0; the tie goes to the first by name.  Stopping ja
    # frees h0 now, but /a's queue takes it and /b is still at its 5: qb waits for jb.
    assert stop.change == "job ja (priority 0, holding 5 cpu, 5 GiB memory) stopped"
    assert stop.estimate is not None and stop.estimate.p50 == 200.0


def test_estimated_durations_give_a_range_over_seeded_variations() -> None:
    snap = two_pools(source=DurationSource.HISTORY)
    first = forecast(snap, "qb", bounds=Bounds(variations=5), seed=7)
    again = forecast(snap, "qb", bounds=Bounds(variations=5), seed=7)
    est = first.estimate
    assert est.runs == 5 and est.started == 5
    assert est.p50 is not None and est.p90 is not None and est.p50 <= est.p90
    # jb's 200 s, varied within +-50%: qb starts between 100 and 300 s, and not always at 200.
    assert 100.0 <= est.p50 <= est.p90 <= 300.0 and (est.p50, est.p90) != (200.0, 200.0)
    assert first.estimate == again.estimate  # seeded: the same answer twice


def test_variation_zero_takes_every_estimate_as_it_is() -> None:
    snap = two_pools(source=DurationSource.HISTORY)
    fs = build(snap, frozenset({("qb", 0)}), variation=0, horizon=600)
    assert set(fs.end_at["run-0"]) == {WARMUP + 100.0}
    varied = build(snap, frozenset({("qb", 0)}), variation=1, horizon=600)
    assert set(varied.end_at["run-0"]) != {WARMUP + 100.0}


def test_a_target_not_started_within_the_horizon_says_so() -> None:
    got = forecast(two_pools(), "qb", bounds=Bounds(horizon=150))
    assert (got.estimate.p50, got.estimate.p90, got.estimate.started) == (None, None, 0)
    assert got.bounds.horizon == 150


def test_the_wall_time_cap_stops_the_forecast_and_says_so() -> None:
    """A clock that moves 1 s per reading runs out a 3 s budget within the first runs."""
    ticks = iter(range(1_000_000))
    got = forecast(two_pools(source=DurationSource.HISTORY), "qb",
                   bounds=Bounds(wall=3.0, variations=5), clock=lambda: float(next(ticks)))
    assert got.truncated
    assert got.estimate.runs < 5
    assert all(c.estimate is None for c in got.counterfactuals)


def test_a_big_snapshot_answers_within_its_wall_time() -> None:
    """200 hosts, 2,000 tasks running and 2,000 queued, 1 s of wall time.

    One whole run takes about 9 s here, and the forecast wants 30 (5 variations of the
    baseline and of 5 changes): ignoring the cap would take minutes.  The run checks the cap
    after each simulated instant, so the answer comes within the cap plus the instant under
    way (building the cluster and submitting what runs now: about 0.3 s on an idle machine;
    the margin allows for a loaded one) and says it was cut short."""
    hosts = tuple(LiveHost(f"h{i:03d}", Resources(cpu=10, mem_mb=65536)) for i in range(200))
    running = tuple(RunningTask(f"r{i % 50}", i, "/a", CPU, f"h{i % 200:03d}", 60.0 + i,
                                DurationSource.HISTORY) for i in range(2000))
    queued = tuple(QueuedTask(f"q{i // 50}", i, "/b", CPU, 300.0, DurationSource.DEFAULT)
                   for i in range(2000))
    snap = Snapshot(NOW, (pool("/a", share=1, entitlement=1000, allocation=2000),
                          pool("/b", share=1, entitlement=0, allocation=0)),
                    hosts, running, queued)
    snap = Snapshot(NOW, tuple(PoolState(p.path, ResourcePoolConfig(
        name=p.path[1:], parent_id="root",
        resources=(ResourceConfig(ResourceKind.CPU, limit=2000, share=1),
                   ResourceConfig(ResourceKind.MEMORY, limit=2000 * 1024, share=1))),
        p.entitlement, p.allocation) for p in snap.pools), hosts, running, queued)
    started = time.monotonic()
    got = forecast(snap, "q39", bounds=Bounds(wall=1.0))
    spent = time.monotonic() - started
    assert spent < 1.0 + 10.0, spent
    assert got.truncated and got.bounds.wall == 1.0


def test_estimate_is_nearest_rank_with_not_started_last() -> None:
    assert estimate([30.0, 10.0, 20.0, None]) == \
        type(estimate([1.0]))(p50=20.0, p90=None, runs=4, started=3)
    assert estimate([5.0]).p50 == 5.0


def test_asking_for_a_job_with_nothing_pending_or_bad_bounds_is_refused() -> None:
    with pytest.raises(NotFound, match="job ja has no pending task"):
        forecast(two_pools(), "ja")
    with pytest.raises(NotFound, match="instances 3 of job qb"):
        forecast(two_pools(), "qb", (3,))
    with pytest.raises(InvalidArgument):
        forecast(two_pools(), "qb", bounds=Bounds(wall=0))


def test_with_true_durations_and_no_arrivals_the_forecast_is_what_the_replay_does() -> None:
    """The accuracy benchmark's exact case, small: the two-pool trace replayed by the real
    scheduler, live state read at t=30 as the service reads it, durations made the true ones;
    the forecast of every pending task equals when the replay (cut at t=30) started it.  a2's
    four tasks wait for a1's end at t=100: 70 s; c1 (16 cpu) never fits: in neither."""
    from peloton.simulation.cluster import load_cluster
    from peloton.simulation.pools import load_pools
    from peloton.simulation.trace import Trace
    from peloton.simulation.trace_io import load_trace
    from tests.bench.bench_forecast import errors, forecast_all, replay

    data = Path(__file__).parent / "data"
    trace = load_trace(data / "two-pools.jsonl")
    cluster, pools = load_cluster(data / "two-pools-cluster.yaml"), load_pools(
        data / "two-pools-pools.yaml")
    _, exact = replay(trace, cluster, pools, [30.0], grace=60).snapshots[30.0]
    truth = replay(Trace(trace.header, tuple(j for j in trace.jobs if j.submit <= 30)),
                   cluster, pools, grace=60).next_starts(30.0)
    predicted = forecast_all(exact, horizon=300)
    assert sorted(predicted.values()) == [70.0] * 4
    errs, left = errors(predicted, truth, 30.0)
    assert (errs, left) == ([0.0] * 4, 0)
