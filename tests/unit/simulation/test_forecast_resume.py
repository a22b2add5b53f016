"""The forecast resumes the live scheduler's state at now: the host order placement breaks
ties by, pins released so a preempted task runs again anywhere, and how long each queued
gang has been refused admission.  Each case is one where getting it wrong changes when a
task starts."""

from __future__ import annotations

import math

from peloton.core.forecast.model import (
    HostRotation,
    LiveHost,
    PoolState,
    QueuedTask,
    RunningTask,
    Snapshot,
)
from peloton.core.model.host import HostOffer
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ResourceConfig, ResourcePoolConfig
from peloton.core.placement.hosts import HostIndex, IndexLayout
from peloton.hostmgr.registry import HostRegistry
from peloton.simulation.daemons import SimulatedCluster
from peloton.simulation.driver import PelotonSimulator
from peloton.simulation.forecast_plan import WARMUP, build
from peloton.simulation.forecast_resume import Resume
from peloton.simulation.forecast_run import duration_policy, start_times
from peloton.simulation.result import TaskEventKind

NOW = 1_750_000_000.0
HOST = Resources(cpu=4, mem_mb=8192)


def cpu(n: float) -> Resources:
    return Resources(cpu=n, mem_mb=n * 512)


def pool(path: str, *, share: float = 1.0, reservation: float = 0.0) -> PoolState:
    config = ResourcePoolConfig(name=path[1:], parent_id="root", resources=(
        ResourceConfig(ResourceKind.CPU, reservation=reservation, limit=64, share=share),
        ResourceConfig(ResourceKind.MEMORY, reservation=reservation * 512, limit=64 * 512,
                       share=share)))
    return PoolState(path, config)


def layout(*names: str) -> IndexLayout:
    return IndexLayout(tuple((n, i) for i, n in enumerate(names)), len(names), ())


# -- the host order ----------------------------------------------------------------------
def tied(rotation: HostRotation | None) -> Snapshot:
    """h0 and h1 each run a 2-cpu task (h0's ends in 100 s, h1's in 300 s), so each has 2
    cpu free: a tie.  Queued: `a` (2 cpu, 1000 s), then `b` (4 cpu).  Placement puts `a` on
    the host first in its order; `b` needs a whole host: the one `a` did not take frees
    first only if `a` went to h1 (b at 100 s), else b waits for h1 (300 s)."""
    return Snapshot(
        now=NOW, pools=(pool("/p"),),
        hosts=(LiveHost("h0", HOST), LiveHost("h1", HOST)),
        running=(RunningTask("r0", 0, "/p", cpu(2), "h0", 100.0),
                 RunningTask("r1", 0, "/p", cpu(2), "h1", 300.0)),
        queued=(QueuedTask("a", 0, "/p", cpu(2), 1000.0), QueuedTask("b", 0, "/p", cpu(4), 50.0)),
        preemption=False, rotation=rotation)


def b_starts(snapshot: Snapshot) -> float:
    fs = build(snapshot, frozenset({("a", 0), ("b", 0)}), horizon=3600.0)
    return start_times(fs, deadline=math.inf)[("b", 0)]


def test_the_live_host_order_decides_which_of_two_equal_hosts_a_task_takes() -> None:
    h1_first = HostRotation(("h1", "h0"), layout("h1", "h0"))
    h0_first = HostRotation(("h0", "h1"), layout("h0", "h1"))
    # Within a second of when the host frees (an admission or placement retry's cadence).
    assert 100.0 <= b_starts(tied(h1_first)) < 101.0
    assert 300.0 <= b_starts(tied(h0_first)) < 301.0


def test_an_index_arranged_from_a_layout_breaks_ties_as_the_live_one_did() -> None:
    def offer(name: str) -> HostOffer:
        return HostOffer(hostname=name, agent_id=f"{name}-agent", capacity=HOST, available=HOST)
    live = HostIndex([offer("x"), offer("y"), offer("z")])
    live.remove("x")  # x left the lease (full): its position is reused by the next newcomer
    copy = HostIndex.arranged(live.layout(), {n: offer(n) for n in "xyz"})
    assert copy.layout() == live.layout()
    assert copy.upsert(offer("w")).idx == live.upsert(offer("w")).idx == 0


def test_the_offer_order_is_restored_for_the_hosts_both_know() -> None:
    reg = HostRegistry()
    reg.offerable.update(dict.fromkeys(["a", "b", "c"]))
    reg.restore_offer_order(("c", "gone", "a"))
    assert reg.offer_order() == ("c", "a", "b")


# -- pins released at now -----------------------------------------------------------------
class Starts:
    """Every STARTED and PREEMPTED event by trace job."""

    def __init__(self) -> None:
        self.events: list[tuple[float, TaskEventKind, str]] = []

    def pool_sample(self, *args: object, **kw: object) -> None:
        """Not used."""

    def cluster_sample(self, *args: object, **kw: object) -> None:
        """Not used."""

    def task_event(self, t: float, kind: TaskEventKind, job: str, instance: int, *,
                   reason: str = "") -> None:
        """Keep starts and preemptions."""
        if kind in (TaskEventKind.STARTED, TaskEventKind.PREEMPTED):
            self.events.append((t - WARMUP, kind, job))

    def finish(self, end: float) -> None:
        """Not used."""


def test_a_task_preempted_after_now_runs_again_on_another_host() -> None:
    """/low's task runs on h0 and /high's on h1 (ends in 100 s); /high reserves the whole
    cluster and queues `q`, so at now /low is entitled to nothing and its task is preempted;
    `q` takes h0.  When /high's task ends, /low is entitled again and its task runs again
    on h1 at about 100 s.  Pinned to h0, it would wait for `q` to end (1000 s)."""
    snap = Snapshot(
        now=NOW, pools=(pool("/low"), pool("/high", reservation=8)),
        hosts=(LiveHost("h0", HOST), LiveHost("h1", HOST)),
        running=(RunningTask("low", 0, "/low", cpu(4), "h0", 5000.0, elapsed=10.0,
                             duration=500.0),
                 RunningTask("high", 0, "/high", cpu(4), "h1", 100.0, priority=1,
                             preemptible=False)),
        queued=(QueuedTask("q", 0, "/high", cpu(4), 1000.0, priority=1, preemptible=False),),
        preemption=True)
    fs = build(snap, frozenset({("q", 0)}), horizon=3600.0)
    low = next(j.job for j in fs.scenario.trace.jobs if j.job.startswith("run-")
               and j.pool == "/low")
    seen = Starts()
    PelotonSimulator(duration=duration_policy(fs), after_round=Resume(fs)).run(fs.scenario, seen)
    after = [(t, kind) for t, kind, job in seen.events if job == low and t >= 0]
    assert [kind for _, kind in after] == [TaskEventKind.PREEMPTED, TaskEventKind.STARTED]
    again = after[1][0]
    assert 100.0 <= again < 110.0, again


# -- how long each queued gang has waited --------------------------------------------------
def aged(refused_for: float | None, holds: bool) -> Snapshot:
    """One 8-cpu host running a 4-cpu task (100 s left); queued: `big` (8 cpu, 50 s), then
    `small` (2 cpu).  `small` fits the pool beside what runs, `big` does not.  A `big` that
    admission has refused for a minute holds the pool's room: `small` is admitted only
    beside it, so after it (at 150 s).  Refused only from now, `small` starts now."""
    return Snapshot(
        now=NOW, pools=(pool("/p"),), hosts=(LiveHost("h0", Resources(cpu=8, mem_mb=8192)),),
        running=(RunningTask("r", 0, "/p", cpu(4), "h0", 100.0),),
        queued=(QueuedTask("big", 0, "/p", cpu(8), 50.0, refused_for=refused_for,
                           holds_room=holds),
                QueuedTask("small", 0, "/p", cpu(2), 50.0, refused_for=refused_for)),
        preemption=False)


def test_a_gang_refused_long_before_now_keeps_holding_its_pools_room() -> None:
    def starts(snapshot: Snapshot) -> dict[tuple[str, int], float]:
        fs = build(snapshot, frozenset({("big", 0), ("small", 0)}), horizon=3600.0)
        return start_times(fs, deadline=math.inf)
    old = starts(aged(60.0, True))
    assert 100.0 <= old[("big", 0)] < 101.0 and 150.0 <= old[("small", 0)] < 152.0
    fresh = starts(aged(None, False))
    assert fresh[("small", 0)] < 1.0


def fragmented(attempts: int) -> Snapshot:
    """Two 4-cpu hosts each half used (h0's task ends in 10 s, h1's in 1000 s); `q` (3 cpu)
    fits the pool but no host: admitted, it fails placement and retries, waiting longer
    after each failure, and gives its admission back after each cycle of attempts.  How many
    failures it has behind it decides when it looks again after h0 frees."""
    return Snapshot(
        now=NOW, pools=(pool("/p"),), hosts=(LiveHost("h0", HOST), LiveHost("h1", HOST)),
        running=(RunningTask("r0", 0, "/p", cpu(2), "h0", 10.0),
                 RunningTask("r1", 0, "/p", cpu(2), "h1", 1000.0)),
        queued=(QueuedTask("q", 0, "/p", cpu(3), 50.0, placement_attempts=attempts),),
        preemption=False)


def test_a_task_that_failed_placement_before_now_keeps_its_longer_retry_wait() -> None:
    def start(attempts: int) -> float:
        fs = build(fragmented(attempts), frozenset({("q", 0)}), horizon=3600.0)
        return start_times(fs, deadline=math.inf)[("q", 0)]
    # Fresh, it retries every 0.2-0.4 s and takes h0 just after it frees; with two failures
    # behind it, its next ones end a cycle and it then waits 1.6 s between tries.
    fresh, tried = start(0), start(2)
    assert 10.0 <= fresh < 10.5 and 11.0 <= tried < 12.5, (fresh, tried)


def test_an_admitted_task_waiting_for_a_placement_retry_is_not_placed_before_it() -> None:
    """`q` was admitted, failed placement once and is due to be tried again in 1.5 s; a host
    is free now.  Live, placement looks at it only then; admitted afresh, it would be
    placed at once."""
    def start(retry_in: float | None) -> float:
        snap = Snapshot(now=NOW, pools=(pool("/p"),), hosts=(LiveHost("h0", HOST),),
                        queued=(QueuedTask("q", 0, "/p", cpu(1), 50.0, admitted=True,
                                           placement_attempts=1, retry_in=retry_in),),
                        preemption=False)
        fs = build(snap, frozenset({("q", 0)}), horizon=600.0)
        return start_times(fs, deadline=math.inf)[("q", 0)]
    waiting, fresh = start(1.5), start(None)
    assert 1.5 <= waiting < 2.0 and fresh < 1.0, (waiting, fresh)


def test_the_forecast_counts_time_on_the_live_clock_so_it_rounds_as_live() -> None:
    """Live, the resource manager's clock reads 9,186.1 s at now and its admission loop
    last passed at 9,186.0 s: the loop's next pass (9,186.0 + 0.1) is now, exactly.  Counted
    from another origin, the same 0.1 s apart round otherwise, and the forecast's loop
    would pass a hair before now and decide other passes than live (an admission pass 0.1 s
    late: `ceil((due - last) / period)` differs)."""
    mono, last, period = 9186.1, 9186.0, 0.1
    assert last + period == mono  # the live arithmetic
    snap = Snapshot(now=NOW, pools=(pool("/p"),), hosts=(LiveHost("h0", HOST),),
                    queued=(QueuedTask("q", 0, "/p", cpu(1), 50.0),), preemption=False,
                    admitted_for=mono - last, monotonic=mono)
    fs = build(snap, frozenset({("q", 0)}), horizon=60.0)
    resume = Resume(fs)
    seen: list[tuple[float, float]] = []

    def spy(cluster: SimulatedCluster) -> int:
        done = resume(cluster)
        if cluster.now == fs.now:
            seen.append((cluster.now, cluster.resmgr.loops.admitted_at))
        return done
    PelotonSimulator(duration=duration_policy(fs), after_round=spy).run(fs.scenario, Starts())
    assert seen and all(now == mono and at == last and at + period == now
                        for now, at in seen), seen


def test_the_pools_keep_the_live_trees_order_parents_first() -> None:
    snap = Snapshot(now=NOW, pools=(pool("/z"), pool("/a")), hosts=(LiveHost("h0", HOST),),
                    queued=(QueuedTask("q", 0, "/a", cpu(1), 1.0),))
    fs = build(snap, frozenset({("q", 0)}), horizon=60.0)
    # Admission visits the leaves in tree order: /z's tasks before /a's in one pass.
    assert [p.path for p in fs.scenario.pools] == ["/z", "/a"]


def test_running_tasks_that_started_together_start_together_again() -> None:
    """The preemptor takes the most recently started first and breaks ties by task id.
    a0..a2 started together 100 s ago (a1 on another host), b0 50 s ago: the a's are
    submitted together, b0 after them."""
    snap = Snapshot(
        now=NOW, pools=(pool("/p"),), hosts=(LiveHost("h0", HOST), LiveHost("h1", HOST)),
        running=(RunningTask("b", 0, "/p", cpu(1), "h1", 10.0, elapsed=50.0),
                 RunningTask("a", 0, "/p", cpu(1), "h0", 10.0, elapsed=100.0),
                 RunningTask("a", 1, "/p", cpu(1), "h1", 10.0, elapsed=100.0),
                 RunningTask("a", 2, "/p", cpu(1), "h0", 10.0, elapsed=100.0)),
        queued=(QueuedTask("q", 0, "/p", cpu(1), 1.0),), preemption=False)
    fs = build(snap, frozenset({("q", 0)}), horizon=60.0)
    runs = [j for j in fs.scenario.trace.jobs if j.job.startswith("run-")]
    assert [(j.instances, str(j.constraint).count("h1")) for j in runs] == [
        (2, 0), (1, 1), (1, 1)]
    assert runs[0].submit == runs[1].submit < runs[2].submit
