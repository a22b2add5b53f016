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
                         "every duration is known: one run, no variations",
                         "would not help: half the resources per task (0.5 cpu, 512 MiB "
                         "memory): starts 3m20s, as without it")


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
    # Half the cpu (0.5) still puts /b over its 5: qb starts at 200 s either way, so it is
    # not offered as starting it sooner, but noted as not helping.
    assert CounterfactualKind.SMALLER_RESOURCES not in by_kind
    assert "would not help: half the resources per task (0.5 cpu, 512 MiB memory): starts " \
        "3m20s, as without it" in got.notes
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
    got = forecast(snap, "qb")
    # ja and jb both run 5 cpu at priority 0; the tie goes to the first by name.  Stopping ja
    # frees h0 now, but /a's queue takes it and /b is still at its 5: qb waits for jb, so
    # stopping ja would not start it sooner.
    assert CounterfactualKind.STOP_JOB not in {c.kind for c in got.counterfactuals}
    assert "would not help: job ja (priority 0, holding 5 cpu, 5 GiB memory) stopped: " \
        "starts 3m20s, as without it" in got.notes


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
    assert all(c.estimate is not None for c in got.counterfactuals)
    assert any(n.startswith("not run within the wall time: ") for n in got.notes)


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
    with pytest.raises(NotFound, match=r"^instance 3 of job qb has no pending task"):
        forecast(two_pools(), "qb", (3,))
    with pytest.raises(NotFound, match=r"^instances 3, 4 of job qb have no pending task"):
        forecast(two_pools(), "qb", (4, 3))
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


class Ticks:
    """A clock that moves one second per reading (each simulated event reads it once)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def base_runs_cost(snap: Snapshot, target: str, variations: int) -> float:
    """The `Ticks` seconds the baseline's `variations` runs take alone."""
    from peloton.simulation.forecast_run import run_once

    ticks = Ticks()
    targets = frozenset((q.job_id, q.instance) for q in snap.queued if q.job_id == target)
    for k in range(variations):
        run_once(build(snap, targets, variation=k, horizon=86_400.0), float("inf"), ticks)
    return ticks.now


def limit_bound() -> Snapshot:
    """One 4-cpu host, pool /p limited (and reserving) 4 cpu, all in use by job r (history
    durations, so they vary); q's one task waits for the limit: a host added cannot help."""
    config = ResourcePoolConfig(name="p", parent_id="root", resources=(
        ResourceConfig(ResourceKind.CPU, reservation=4, limit=4, share=1),
        ResourceConfig(ResourceKind.MEMORY, reservation=4096, limit=4096, share=1)))
    return Snapshot(NOW, (PoolState("/p", config, Resources(cpu=4, mem_mb=4096),
                                    Resources(cpu=4, mem_mb=4096)),),
                    (LiveHost("h0", Resources(cpu=4, mem_mb=4096)),),
                    tuple(RunningTask("r", i, "/p", CPU, "h0", 600.0 + 300 * i,
                                      DurationSource.HISTORY) for i in range(4)),
                    (QueuedTask("q", 0, "/p", CPU, 60.0, DurationSource.HISTORY),),
                    preemption=False)


def test_a_small_wall_cap_tries_every_change_before_more_variations() -> None:
    """The wall time of the baseline's five variations alone: the baseline used to spend it
    all and leave the changes none; shared round by round, every change runs, over the same
    seeds as the baseline."""
    snap = two_pools(source=DurationSource.HISTORY)
    wall = base_runs_cost(snap, "qb", 5)
    got = forecast(snap, "qb", bounds=Bounds(wall=wall, variations=5), clock=Ticks())
    assert got.truncated and 1 <= got.estimate.runs < 5
    assert not [n for n in got.notes if n.startswith("not run within the wall time")]
    by_kind = {c.kind: c for c in got.counterfactuals}
    more = by_kind[CounterfactualKind.RESERVATION].estimate
    assert more is not None and more.p50 == 0.0
    assert {c.estimate.runs for c in got.counterfactuals if c.estimate} == {got.estimate.runs}


def test_a_change_that_cannot_help_comes_out_equal_over_the_same_seeds() -> None:
    """The pool's limit binds: a host added cannot start q sooner.  Cut short after the
    first round and part of the second, the answer compares over the first round only
    (paired), so the host added starts q exactly when the baseline does and is not offered."""
    snap = limit_bound()
    wall = base_runs_cost(snap, "q", 5) * 1.2  # about 6 runs of 20
    got = forecast(snap, "q", bounds=Bounds(wall=wall, variations=5), clock=Ticks())
    assert got.truncated
    assert CounterfactualKind.ADD_HOSTS not in {c.kind for c in got.counterfactuals}
    (added,) = [n for n in got.notes if n.startswith("would not help: 1 host like h0")]
    assert added.endswith(", as without it"), added
    assert {c.estimate.runs for c in got.counterfactuals if c.estimate} <= {got.estimate.runs}
    # With time for every variation, the same.
    full = forecast(snap, "q", bounds=Bounds(variations=5))
    assert full.estimate.runs == 5
    assert CounterfactualKind.ADD_HOSTS not in {c.kind for c in full.counterfactuals}
    assert all(c.estimate is not None and c.estimate.p50 is not None
               and full.estimate.p50 is not None and c.estimate.p50 < full.estimate.p50
               for c in full.counterfactuals)


def test_an_instance_forecast_offers_only_changes_for_that_instance() -> None:
    """Asked about qa's instance 3 alone: dropping half the job's pending instances is not
    its change to make, and half the resources are for instance 3 only."""
    from peloton.core.forecast.changes import candidates

    snap = two_pools()
    one = {c.kind: c for c in candidates(snap, frozenset({("qa", 3)}))}
    assert CounterfactualKind.FEWER_INSTANCES not in one
    smaller = one[CounterfactualKind.SMALLER_RESOURCES]
    assert smaller.description == "half the resources for instance 3 (0.5 cpu, 512 MiB memory)"
    assert {(q.instance, q.resources.cpu) for q in smaller.snapshot.queued
            if q.job_id == "qa" and q.resources.cpu != 1} == {(3, 0.5)}
    whole = {c.kind: c for c in candidates(
        snap, frozenset(("qa", i) for i in range(10)))}
    assert whole[CounterfactualKind.FEWER_INSTANCES].description == \
        "5 of the job's 10 pending instances"
    got = forecast(snap, "qa", (3,))
    assert CounterfactualKind.FEWER_INSTANCES not in {c.kind for c in got.counterfactuals}
    assert not [n for n in got.notes if "pending instances" in n]
