"""The forecast: a snapshot run forward through the real scheduler, within stated bounds.

`forecast(snapshot, job_id, instances)` answers for the job's queued instances (all
of them, or those named): when the last of them starts (p50/p90 over the seeded
variations of the unknown durations, `forecast_plan`), what binds now
(`core.forecast.binding`), and what would start them sooner, each change with its
own estimate (`core.forecast.changes`).

Bounded twice, and the answer says so: the simulation looks at most `bounds.horizon`
seconds past now (a target not started by then is "not within the horizon"), and
the whole answer spends at most `bounds.wall` seconds of wall time — every run
checks the deadline on each event, and runs not made in time are reported as not
made (`Forecast.truncated`, and a note naming each change not run).

The wall time is shared seed by seed: a round runs the baseline's variation k, then each
change's variation k, so a small cap tries every change once before any second variation
(not the baseline's five, then whatever is left).  Each change is compared with the
baseline over the same seeds (paired): the answer keeps the complete rounds only (or, if
not even the first finished, the first round's runs that did), so a change that cannot
help comes out exactly equal to the baseline.  Only the changes that start the targets
earlier (p50, then p90, in whole seconds) are offered; the others are noted as not helping.

This module is an edge of the simulation package: it runs the engine (driver.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.forecast.binding import binding
from peloton.core.forecast.changes import Change, candidates, named
from peloton.core.forecast.model import (
    Bounds,
    Counterfactual,
    Estimate,
    Forecast,
    Snapshot,
)
from peloton.core.forecast.render import starts
from peloton.core.model.resources import Resources
from peloton.simulation.driver import PelotonSimulator
from peloton.simulation.forecast_plan import ForecastScenario, build, has_unknowns
from peloton.simulation.forecast_resume import Resume
from peloton.simulation.result import TaskEventKind
from peloton.simulation.trace import TraceJob

Target = tuple[str, int]

#: What every forecast assumes (future arrivals are unknown: a busy cluster's answer is the
#: earliest the task could start if nothing else came).
NO_ARRIVALS = "assumes no job arrives after now"
#: Why a forecast made one run only.
ONE_RUN = "every duration is known: one run, no variations"


class _OutOfTime(Exception):
    """The wall deadline passed before a run answered."""


@dataclass(slots=True)
class _Watch:
    """A `SimulationRecorder` that only listens for the targets' first starts; as the
    engine's `stop_when`, it ends the run once every target started or time is up."""

    targets: frozenset[tuple[str, int]]
    deadline: float
    clock: Callable[[], float]
    started: dict[tuple[str, int], float] = field(default_factory=dict)
    out_of_time: bool = False

    def stop(self) -> bool:
        """Every target started, or the wall deadline passed (then `out_of_time`)."""
        if len(self.started) == len(self.targets):
            return True
        self.out_of_time = self.clock() > self.deadline
        return self.out_of_time

    def pool_sample(self, t: float, pool: str, *, demand: Resources, entitlement: Resources,
                    allocation: Resources, pending: int) -> None:
        """Not read (the forecast takes no samples)."""

    def cluster_sample(self, t: float, *, capacity: Resources, used: Resources,
                       hosts: int) -> None:
        """Not read."""

    def task_event(self, t: float, kind: TaskEventKind, job: str, instance: int, *,
                   reason: str = "") -> None:
        """Keep each target's first start."""
        key = (job, instance)
        if kind is TaskEventKind.STARTED and key in self.targets and key not in self.started:
            self.started[key] = t

    def finish(self, end: float) -> None:
        """The run reached its horizon, ran out of work, or was stopped."""


def duration_policy(fs: ForecastScenario) -> Callable[[TraceJob, int, float], float | None]:
    """A running task's first run ends at its absolute time; any other run (a queued task's,
    a running task's again after preemption) lasts its duration."""
    launched: set[tuple[str, int]] = set()

    def duration(job: TraceJob, instance: int, now: float) -> float | None:
        ends = fs.end_at.get(job.job)
        key = (job.job, instance)
        if ends is None or key in launched:
            return job.duration_of(instance)
        launched.add(key)
        end = ends[instance]
        return None if end is None else max(end - now, 1e-3)
    return duration


def start_times(fs: ForecastScenario, deadline: float,
                clock: Callable[[], float] = time.monotonic) -> dict[Target, float]:
    """Each target's first start in the run of `fs`, in seconds after now, by (live job id,
    instance); targets that did not start within the horizon are absent.

    Raises `_OutOfTime` when the wall deadline passes first.
    """
    watch = _Watch(fs.targets, deadline, clock)
    PelotonSimulator(duration=duration_policy(fs), stop_when=watch.stop,
                     after_round=Resume(fs)).run(fs.scenario, watch)
    if watch.out_of_time:
        raise _OutOfTime
    return {fs.tasks[key]: max(0.0, t - fs.now) for key, t in watch.started.items()}


def run_once(fs: ForecastScenario, deadline: float,
             clock: Callable[[], float] = time.monotonic) -> float | None:
    """When the last target starts, in seconds after now (None: not within the horizon).

    Raises `_OutOfTime` when the wall deadline passes first.
    """
    started = start_times(fs, deadline, clock)
    if len(started) < len(fs.targets):
        return None
    return max(started.values())


def _rank(values: list[float], p: int) -> float:
    """Nearest rank: the value at rank ceil(p/100 n) (inf stands for not started)."""
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)), 1) - 1]


def estimate(values: list[float | None]) -> Estimate:
    """p50/p90 of the runs' start times (None counts as later than any)."""
    inf = [math.inf if v is None else v for v in values]
    p50, p90 = _rank(inf, 50), _rank(inf, 90)
    return Estimate(p50=None if math.isinf(p50) else p50, p90=None if math.isinf(p90) else p90,
                    runs=len(values), started=sum(v is not None for v in values))


def _earlier(change: Estimate, base: Estimate) -> bool:
    """Whether `change` starts the targets earlier than `base` (p50, then p90, in the whole
    seconds the answer is given in; not started within the horizon is later than any time)."""
    def key(est: Estimate) -> tuple[float, float]:
        return (math.inf if est.p50 is None else round(est.p50),
                math.inf if est.p90 is None else round(est.p90))
    return key(change) < key(base)


@dataclass(slots=True)
class _Runs:
    """The runs made so far: the baseline's, and each change's, by variation."""

    base: list[float | None] = field(default_factory=list)
    changes: dict[int, list[float | None]] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)


def _run_rounds(snapshot: Snapshot, targets: frozenset[Target], changes: list[Change],
                variations: int, seed: int, bounds: Bounds, deadline: float,
                clock: Callable[[], float]) -> _Runs:
    """Round k runs the baseline's variation k, then each change's, until the variations
    are done or the wall deadline passes (the run under way is dropped)."""
    runs = _Runs(changes={n: [] for n in range(len(changes))})
    for k in range(variations):
        plan: list[tuple[int, Snapshot, frozenset[Target]]] = [(-1, snapshot, targets)]
        plan += [(n, c.snapshot, c.targets) for n, c in enumerate(changes)
                 if n not in runs.refused]
        for n, snap, wanted in plan:
            if clock() >= deadline:
                return runs
            try:
                fs = build(snap, wanted, variation=k, seed=seed, horizon=bounds.horizon)
                value = run_once(fs, deadline, clock)
            except _OutOfTime:
                return runs
            except InvalidArgument as exc:  # the change breaks a pool rule (never the base's)
                if n < 0:
                    raise
                runs.refused[n] = exc.message
                continue
            (runs.base if n < 0 else runs.changes[n]).append(value)
    return runs


def forecast(snapshot: Snapshot, job_id: str, instances: tuple[int, ...] = (), *,
             bounds: Bounds = Bounds(), seed: int = 0,
             clock: Callable[[], float] = time.monotonic) -> Forecast:
    """The forecast for the queued `instances` of `job_id` (all queued ones if empty).

    NotFound if the job has no queued task (named); InvalidArgument for bad bounds.
    """
    if bounds.horizon <= 0 or bounds.wall <= 0 or bounds.variations < 1:
        raise InvalidArgument("horizon and wall time must be > 0, variations >= 1",
                              field="bounds")
    started = clock()
    deadline = started + bounds.wall
    queued = [q for q in snapshot.queued
              if q.job_id == job_id and (not instances or q.instance in instances)]
    if not queued:
        what = f"job {job_id} has"
        if instances:
            verb = "has" if len(set(instances)) == 1 else "have"
            what = f"{named(set(instances))} of job {job_id} {verb}"
        raise NotFound(f"{what} no pending task to forecast")
    targets = frozenset((q.job_id, q.instance) for q in queued)
    variations = bounds.variations if has_unknowns(snapshot) else 1
    notes = [NO_ARRIVALS]
    if variations == 1 and bounds.variations > 1:
        notes.append(ONE_RUN)
    if any(q.gang > 1 for q in snapshot.queued):
        notes.append("gangs are simulated task by task (their all-or-nothing start is not)")
    changes = candidates(snapshot, targets)
    runs = _run_rounds(snapshot, targets, changes, variations, seed, bounds, deadline, clock)
    tried = [n for n in range(len(changes)) if n not in runs.refused]
    # Paired: the complete rounds only, or the first round's runs if it did not complete.
    keep = max(min((len(runs.changes[n]) for n in tried), default=len(runs.base)), 1)
    base_values = runs.base[:keep]
    base = estimate(base_values) if base_values else None
    truncated = base is None or base.runs < variations
    counterfactuals = []
    for n, change in enumerate(changes):
        if n in runs.refused:
            notes.append(f"{change.description}: not possible ({runs.refused[n]})")
            continue
        values = runs.changes[n][:keep]
        if base is None or not values:
            truncated = True
            notes.append(f"not run within the wall time: {change.description}")
            continue
        est = estimate(values)
        if _earlier(est, base):
            counterfactuals.append(Counterfactual(change.kind, change.description, est))
        else:
            with_it, without = starts(est, bounds.horizon), starts(base, bounds.horizon)
            notes.append(f"would not help: {change.description}: starts {with_it}, "
                         + ("as without it" if with_it == without else f"without it {without}"))
    return Forecast(job_id=job_id, instances=tuple(sorted(i for _, i in targets)),
                    now=snapshot.now, estimate=base or Estimate(None, None, 0, 0),
                    binding=binding(snapshot, queued[0]), counterfactuals=tuple(counterfactuals),
                    bounds=bounds, wall_secs=clock() - started, truncated=truncated,
                    notes=tuple(notes))
