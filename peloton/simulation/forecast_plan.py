"""A forecast snapshot as a simulation scenario (pure: values in, a scenario out).

The scenario replays *now* forward.  Its first `WARMUP` simulated seconds rebuild
the present: every running task is submitted at t = 0, pinned to its host by a HOST
constraint on a label only that host carries (`PIN`), with preemption off, so the
real scheduler admits and places exactly what runs now (the running tasks fit the
cluster, so the demand-driven entitlement covers every pool's use).  At t = WARMUP
(which is `now`) preemption returns to its live setting, the queued tasks are
submitted in queue order, and the pins are released: every host is announced again
with the label `RELEASED`, which the pin accepts as well as its own host (a task
preempted after now runs again wherever placement puts it, as it would live).  What
the jobs cannot carry (how long each queued gang has been refused, the gang holding
its pool's room, each task's failed placements and retry timer, the host order placement
breaks ties by) is in `ForecastScenario`, and forecast_resume.py puts it back into the
daemons at now.

Times here are relative to the scenario's origin (`Scenario.origin`): where the snapshot
has the live resource manager's clock, now in the run is that clock's reading and t = 0 is
`WARMUP` before it, so what the daemons compute from times after now (a retry due time, the
admission loop's next pass: sums and quotients of floats, which round by their magnitude)
comes out as live; else the origin is 0 and now is `WARMUP`.

A running task ends at WARMUP + its remaining time whenever it was placed
(`ForecastScenario.end_at`, applied by the engine's duration policy); run again after a
preemption, it runs its whole expected duration; a queued task runs its expected
duration once started.  The running tasks are submitted in the order they started,
spread over the warm-up, so the preemptor (most recently started first) ranks them
as it ranks the live ones.

Hosts in maintenance take no work: they are left out, and their running tasks are
queued again at the head of the queue (they move off, as a drain would move them).

The unknown durations vary between runs: variation 0 takes every estimate as it is;
variation k > 0 scales each estimated duration by a factor drawn from an RNG seeded
with (seed, k), in snapshot order: within ±50% for a duration from the job's history,
between a quarter and twice for a default.  Given durations never vary.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from peloton.core.forecast.model import (
    DurationSource,
    QueuedTask,
    RunningTask,
    Snapshot,
)
from peloton.core.model.constraints import (
    Condition,
    Constraint,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.respool.queues import QueueKind
from peloton.core.states import JobType
from peloton.simulation.cluster import SimHost
from peloton.simulation.pools import PoolSpec, PoolsSpec
from peloton.simulation.scenario import AddHosts, Scenario, SetPreemption
from peloton.simulation.trace import Trace, TraceHeader, TraceJob

#: Simulated seconds the present takes to rebuild before `now` (t = WARMUP is now).  A
#: whole number of every daemon's period (1 s, 2 s for preemption), so their passes fall at
#: now + whole periods, as they do live when now is one of the live passes (the benchmark's
#: instants are; a daemon's phase is otherwise not in the snapshot).  The queue arrives
#: just after the passes at now, so forecast_resume.py recomputes the entitlements once it
#: is in: live, they count it already.
WARMUP = 6.0
#: Seconds the last running task submitted in the warm-up has to start before now, and the
#: distinct submit times the running tasks are spread over before that (each costs an instant).
STARTS_SETTLE = 2.0
START_STEPS = 35
#: Host label pinning a running task to the host it runs on (during the warm-up).
PIN = "peloton.forecast/host"
#: Host label every host gets at now, which every pin accepts: the pins are released.
RELEASED = Label("peloton.forecast/released", "true")
#: How far each kind of estimate varies between runs (factor range).
SPREAD = {DurationSource.HISTORY: (0.5, 1.5), DurationSource.DEFAULT: (0.25, 2.0)}
#: A sampling interval longer than any horizon: the forecast reads no samples.
NO_SAMPLES = 1e12

Target = tuple[str, int]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ForecastScenario:
    """The scenario, and how to read its events back as the snapshot's tasks."""

    scenario: Scenario
    #: (trace job, instance) -> (live job id, instance), for every queued task.
    tasks: dict[tuple[str, int], Target]
    #: Trace job -> each instance's absolute simulated end (running tasks only).
    end_at: dict[str, tuple[float | None, ...]]
    #: The (trace job, instance) keys of the targets.
    targets: frozenset[tuple[str, int]]
    #: (trace job, instance) -> the live queued task it stands for, for every queued task
    #: with a history in the resource manager (refused, holding room, failed placement).
    waited: dict[tuple[str, int], QueuedTask] = field(default_factory=dict)
    #: The snapshot it was built from: the live scheduler state forecast_resume.py puts
    #: back at now (host order, entitlements, preemption counts, admission phase).
    live: Snapshot | None = None
    #: Simulated time of now in the run: `WARMUP` after the scenario's origin (the live
    #: resource manager's clock at now where the snapshot has it, else `WARMUP`).
    now: float = WARMUP


def _factor(rng: random.Random, source: DurationSource, variation: int) -> float:
    spread = SPREAD.get(source)
    if spread is None:
        return 1.0
    draw = rng.uniform(*spread)  # drawn for every estimate, so the sequence is stable
    return 1.0 if variation == 0 else draw


def _pools(snapshot: Snapshot) -> PoolsSpec:
    """The pools, parents first and siblings in the snapshot's (the live tree's) order:
    admission visits the leaves in tree order, which orders the tasks of one pass (and so
    of one placement round) across pools."""
    specs = []
    for state in sorted(snapshot.pools, key=lambda p: p.path.count("/")):
        parent = state.path.rsplit("/", 1)[0]
        config = replace(state.config, name=state.path.rsplit("/", 1)[1],
                         parent_id=parent or ROOT_POOL_ID)
        specs.append(PoolSpec(state.path, config))
    pools = PoolsSpec(tuple(specs))
    pools.tree()  # every rule of the resource manager, before anything runs
    return pools


def _pin(hostname: str) -> Constraint:
    """On `hostname` until the hosts carry `RELEASED` (now), then anywhere."""
    return OrConstraint((LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label(PIN, hostname), 1),
                         LabelConstraint(LabelKind.HOST, Condition.EQUAL, RELEASED, 1)))


def _runs(items: Iterable[T], key: Callable[[T], object]) -> list[list[T]]:
    """Consecutive items with equal `key(item)`, in order (the given order is kept)."""
    out: list[list[T]] = []
    last: object = object()
    for item in items:
        k = key(item)
        if not out or k != last:
            out.append([])
            last = k
        out[-1].append(item)
    return out


def build(snapshot: Snapshot, targets: frozenset[Target], *, variation: int = 0, seed: int = 0,
          horizon: float) -> ForecastScenario:
    """The scenario of `snapshot` (module docstring), looking `horizon` seconds past now."""
    rng = random.Random(f"{seed}:{variation}")
    # On the live clock where known (Scenario.origin): every time below is origin-based.
    origin = 0.0 if snapshot.monotonic is None else snapshot.monotonic - WARMUP
    now = origin + WARMUP
    up = tuple(h for h in snapshot.hosts if not h.maintenance)
    up_names = {h.hostname for h in up}
    hosts = tuple(SimHost(h.hostname, "live", h.capacity, (*h.labels, Label(PIN, h.hostname)))
                  for h in up)
    running = [r for r in snapshot.running if r.hostname in up_names]
    moved = [QueuedTask(r.job_id, r.instance, r.pool, r.resources,
                        r.remaining, r.source, r.priority, r.preemptible)
             for r in snapshot.running if r.hostname not in up_names]
    jobs: list[TraceJob] = []
    end_at: dict[str, tuple[float | None, ...]] = {}
    # One trace job per (start, job, host, shape), submitted in the order the tasks started
    # (the longest running first, spread over the warm-up), so the preemptor, which takes
    # the most recently started first, ranks them as it ranks the live ones.  Tasks that
    # started together live start together here; those the spread puts together anyway are
    # submitted newest first; and jobs that started together in job id order, as the
    # preemptor breaks its ties by task id (trace order numbers the jobs).  Within a job
    # the instances are numbered host by host (one trace job per host keeps the pins few).
    started = sorted({r.elapsed for r in running}, reverse=True)
    step = {e: math.floor(k * START_STEPS / max(len(started), START_STEPS))
            for k, e in enumerate(started)}
    by_key: dict[object, list[RunningTask]] = {}
    for r in sorted(running, key=lambda r: (step[r.elapsed], r.elapsed, r.job_id, r.instance)):
        by_key.setdefault((r.elapsed, r.job_id, r.pool, r.hostname, r.resources, r.priority,
                           r.preemptible, r.remaining is None), []).append(r)
    for runs in by_key.values():
        at = origin + step[runs[0].elapsed] * (WARMUP - STARTS_SETTLE) / START_STEPS
        first = runs[0]
        name = f"run-{len(jobs)}"
        ends: list[float | None] = []
        again: list[float] = []
        for r in runs:
            factor = _factor(rng, r.source, variation)
            ends.append(None if r.remaining is None else now + r.remaining * factor)
            whole = r.duration if r.duration is not None else r.remaining
            again.append(max((whole or 1.0) * factor, 1e-3))
        service = first.remaining is None
        jobs.append(TraceJob(name, at, first.pool, len(runs), first.resources,
                             duration=None if service else max(again),
                             durations=() if service else tuple(again),
                             priority=first.priority, preemptible=first.preemptible,
                             type=JobType.SERVICE if service else JobType.BATCH,
                             constraint=_pin(first.hostname)))
        end_at[name] = tuple(ends)
    tasks: dict[tuple[str, int], Target] = {}
    waited: dict[tuple[str, int], QueuedTask] = {}
    queued_jobs: list[TraceJob] = []
    for group in _runs([*moved, *snapshot.queued],
                       lambda q: (q.job_id, q.pool, q.resources, q.priority, q.preemptible,
                                  q.constraint, q.duration is None)):
        head = group[0]
        name = f"queued-{len(queued_jobs)}"
        durations = []
        for i, q in enumerate(group):
            tasks[(name, i)] = (q.job_id, q.instance)
            if (q.refused_for is not None or q.holds_room or q.placement_attempts
                    or q.retry_in is not None or q.queue is not QueueKind.PENDING):
                waited[(name, i)] = q
            if q.duration is not None:
                durations.append(max(q.duration * _factor(rng, q.source, variation), 1e-3))
        service = head.duration is None
        queued_jobs.append(TraceJob(
            name, now, head.pool, len(group), head.resources,
            duration=None if service else max(durations),
            durations=() if service else tuple(durations), priority=head.priority,
            preemptible=head.preemptible, type=JobType.SERVICE if service else JobType.BATCH,
            constraint=head.constraint))
    wanted = frozenset(k for k, v in tasks.items() if v in targets)
    released = tuple(replace(h, labels=(*h.labels, RELEASED)) for h in hosts)
    timeline = (SetPreemption(origin, False), SetPreemption(now, snapshot.preemption),
                AddHosts(now, released))
    scenario = Scenario(label="forecast", trace=Trace(TraceHeader(name="forecast"),
                                                      tuple(jobs + queued_jobs)),
                        hosts=hosts, pools=_pools(snapshot), preemption=False,
                        timeline=timeline, horizon=now + horizon,
                        sample_interval=NO_SAMPLES, seed=seed, epoch=snapshot.now - now,
                        origin=origin)
    return ForecastScenario(scenario, tasks, end_at, wanted, waited, snapshot, now)


def has_unknowns(snapshot: Snapshot) -> bool:
    """Whether any duration is an estimate (else every run is the same: one is enough)."""
    return any(r.source in SPREAD for r in snapshot.running) or \
        any(q.source in SPREAD for q in snapshot.queued)
