"""Goal-state engine: ordering, backoff, one evaluation per key, re-runs, stop; fake clock throughout.

The schedule holds only keys; the engine resolves a key to its actions with the `resolve`
function it was built with (here: a dict of scripted entities)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import gevent
import gevent.event
import pytest

from peloton.common.clock import FakeClock
from peloton.common.goalstate import Action, Engine, EngineObserver, Schedule
from peloton.common.metrics import GoalStateMetrics, Metrics
from peloton.common.retry import RetryPolicy

BACKOFF = RetryPolicy(initial_delay=10.0, max_delay=60.0, multiplier=2.0, jitter=0.0)


@dataclass
class Scripted:
    """An entity whose actions append to `log` and fail while `failing` is set."""

    id: str
    names: Sequence[str] = ("first", "second")
    failing: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)
    hook: Callable[[], None] | None = None

    def actions(self) -> Sequence[Action]:
        return [Action(name, self._runner(name)) for name in self.names]

    def _runner(self, name: str) -> Callable[[], None]:
        def run() -> None:
            self.log.append(name)
            if self.hook is not None:
                self.hook()
            if name in self.failing:
                raise RuntimeError(f"{name} failed")
        return run


class Harness:
    """An engine over scripted entities: `add` registers one and enqueues it."""

    def __init__(self, clock: FakeClock, *, backoff: RetryPolicy = BACKOFF,
                 rand: float = 0.5, observer: EngineObserver | None = None,
                 workers: int = 1) -> None:
        self.entities: dict[str, object] = {}
        self.schedule: Schedule[str] = Schedule(name="test", clock=clock, backoff=backoff,
                                                rand=lambda: rand, observer=observer)
        self.engine: Engine[str] = Engine(self.schedule, self._resolve, workers=workers)

    def _resolve(self, key: str) -> Sequence[Action]:
        return self.entities[key].actions()  # type: ignore[attr-defined, no-any-return]

    def add(self, entity: object, deadline: float | None = None) -> None:
        self.entities[entity.id] = entity  # type: ignore[attr-defined]
        self.schedule.enqueue(entity.id, deadline)  # type: ignore[attr-defined]

    def run_due(self) -> int:
        return self.engine.run_due()


def make_engine(clock: FakeClock, **kwargs: object) -> Harness:
    return Harness(clock, **kwargs)  # type: ignore[arg-type]


def test_actions_run_in_order_and_stop_at_the_first_failure() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    ok = Scripted("ok", names=("a", "b", "c"))
    bad = Scripted("bad", names=("a", "b", "c"), failing={"b"})
    engine.add(ok)
    engine.add(bad)
    assert engine.run_due() == 2
    assert ok.log == ["a", "b", "c"]
    assert bad.log == ["a", "b"]
    assert not engine.schedule.is_scheduled("ok") and engine.schedule.is_tracked("ok")
    assert engine.schedule.is_scheduled("bad")


def test_entities_wait_for_their_deadline_and_reenqueue_keeps_the_earlier_one() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    entity = Scripted("e")
    engine.add(entity, 50.0)
    engine.add(entity, 20.0)
    engine.add(entity, 80.0)
    assert engine.schedule.deadline("e") == 20.0
    clock.sleep(19.0)
    assert engine.run_due() == 0
    clock.sleep(1.0)
    assert engine.run_due() == 1
    assert engine.run_due() == 0  # evaluated once, not once per enqueue
    assert entity.log == ["first", "second"]


def test_backoff_doubles_per_failure_and_is_capped() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    entity = Scripted("e", failing={"first"})
    engine.add(entity)
    delays = []
    for _ in range(6):
        assert engine.run_due() == 1
        deadline = engine.schedule.deadline("e")
        assert deadline is not None
        delays.append(deadline - clock.monotonic())
        clock.sleep(deadline - clock.monotonic())
    assert delays == [10.0, 20.0, 40.0, 60.0, 60.0, 60.0]
    assert engine.schedule.failures("e") == 6


def test_success_resets_the_backoff() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    entity = Scripted("e", failing={"first"})
    engine.add(entity)
    for _ in range(3):
        engine.run_due()
        clock.sleep(100.0)
    assert engine.schedule.failures("e") == 3
    entity.failing.clear()
    engine.run_due()
    assert engine.schedule.failures("e") == 0 and not engine.schedule.is_scheduled("e")
    entity.failing.add("second")
    engine.add(entity)
    engine.run_due()
    assert engine.schedule.deadline("e") == clock.monotonic() + 10.0  # back to the first step


def test_jitter_comes_from_the_injected_randomness() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = Harness(clock, rand=0.0,
                     backoff=RetryPolicy(initial_delay=10.0, max_delay=60.0, jitter=0.2))
    engine.add(Scripted("e", failing={"first"}))
    engine.run_due()
    assert engine.schedule.deadline("e") == pytest.approx(8.0)


def test_enqueue_during_evaluation_reruns_after_it() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    entity = Scripted("e", names=("only",))
    runs = []

    def hook() -> None:
        runs.append(clock.monotonic())
        if len(runs) == 1:
            engine.add(entity, clock.monotonic() + 5.0)
            assert engine.schedule.is_scheduled("e")

    entity.hook = hook
    engine.add(entity)
    assert engine.run_due() == 1
    assert engine.schedule.deadline("e") == 5.0
    clock.sleep(5.0)
    assert engine.run_due() == 1
    assert runs == [0.0, 5.0]
    assert not engine.schedule.is_scheduled("e")


def test_enqueue_during_a_failing_evaluation_wins_over_a_later_retry() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    entity = Scripted("e", names=("only",), failing={"only"})
    entity.hook = lambda: engine.add(entity, clock.monotonic() + 1.0)
    engine.add(entity)
    engine.run_due()
    assert engine.schedule.deadline("e") == 1.0  # earlier than the 10 s backoff


def test_raising_resolve_counts_as_failure() -> None:
    class Broken:
        id = "broken"

        def actions(self) -> Sequence[Action]:
            raise ValueError("no table entry")

    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    engine.add(Broken())
    engine.run_due()
    assert engine.schedule.failures("broken") == 1 and engine.schedule.deadline("broken") == 10.0


def test_delete_untracks_queued_and_running_entities() -> None:
    clock = FakeClock(monotonic=0.0)
    engine = make_engine(clock)
    queued = Scripted("queued")
    running = Scripted("running", failing={"first"})
    running.hook = lambda: engine.schedule.delete("running")
    engine.add(queued, 5.0)
    engine.add(running)
    engine.schedule.delete("queued")
    assert engine.run_due() == 1
    clock.sleep(100.0)
    assert engine.run_due() == 0
    assert queued.log == [] and running.log == ["first"]
    assert not engine.schedule.is_tracked("running") and not engine.schedule.is_scheduled("running")


def test_observer_sees_actions_and_queue_sizes() -> None:
    clock = FakeClock(monotonic=0.0)
    metrics = Metrics("jobmgr")
    engine = make_engine(clock, observer=GoalStateMetrics(metrics, "task"))
    engine.add(Scripted("a", failing={"second"}))
    engine.add(Scripted("b"), 100.0)
    engine.run_due()
    labels = {"engine": "task", "action": "second"}
    assert metrics.value("peloton_jobmgr_goalstate_action_failures_total", labels) == 1.0
    assert metrics.value("peloton_jobmgr_goalstate_action_seconds_count", labels) == 1.0
    assert metrics.value("peloton_jobmgr_goalstate_scheduled", {"engine": "task"}) == 2.0
    assert metrics.value("peloton_jobmgr_goalstate_tracked", {"engine": "task"}) == 2.0


# -- with gevent workers (no fake clock needed: every deadline is "now") ------------------


def gwait(predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        gevent.sleep(0.001)


class Blocking:
    """An entity whose single action blocks until released; counts concurrent evaluations."""

    def __init__(self, entity_id: str, stats: dict[str, int]) -> None:
        self.id = entity_id
        self.release = gevent.event.Event()
        self.runs = 0
        self._stats = stats

    def actions(self) -> Sequence[Action]:
        return [Action("block", self._block)]

    def _block(self) -> None:
        self.runs += 1
        self._stats["now"] += 1
        self._stats["max"] = max(self._stats["max"], self._stats["now"])
        try:
            self.release.wait()
        finally:
            self._stats["now"] -= 1


def test_workers_run_one_evaluation_per_entity_and_rerun_after() -> None:
    stats = {"now": 0, "max": 0}
    engine = Harness(FakeClock(), workers=4)
    a, b = Blocking("a", stats), Blocking("b", stats)
    engine.engine.start()
    try:
        engine.add(a)
        engine.add(b)
        gwait(lambda: a.runs == 1 and b.runs == 1, "both entities to be running")
        assert stats["max"] == 2  # different entities run in parallel
        for _ in range(5):
            engine.add(a)
            gevent.sleep(0.01)
        assert a.runs == 1 and engine.schedule.is_scheduled("a")  # queued behind its running evaluation
        a.release.set()
        gwait(lambda: a.runs == 2, "the re-run after the evaluation")
        assert not engine.schedule.is_scheduled("a")
        b.release.set()
        gwait(lambda: stats["now"] == 0, "evaluations to finish")
        assert a.runs == 2 and b.runs == 1
        assert stats["max"] == 2
    finally:
        a.release.set()
        b.release.set()
        engine.engine.stop()


def test_stop_waits_for_running_evaluations_and_start_resumes() -> None:
    stats = {"now": 0, "max": 0}
    engine = Harness(FakeClock(), workers=1)
    first, second = Blocking("first", stats), Blocking("second", stats)
    engine.engine.start()
    engine.add(first)
    engine.add(second)
    gwait(lambda: first.runs == 1, "the first evaluation")
    stopper = gevent.spawn(engine.engine.stop)
    gevent.sleep(0.01)
    assert not stopper.ready()  # waits for the running evaluation
    first.release.set()
    stopper.join(5)
    assert stopper.ready() and second.runs == 0  # nothing new started
    assert engine.schedule.is_scheduled("second")
    second.release.set()
    engine.engine.start()
    try:
        gwait(lambda: second.runs == 1 and stats["now"] == 0, "the resumed evaluation")
    finally:
        engine.engine.stop()


def test_stop_kills_evaluations_that_outlive_the_timeout() -> None:
    stats = {"now": 0, "max": 0}
    engine = Harness(FakeClock(), workers=1)
    stuck = Blocking("stuck", stats)
    engine.engine.start()
    engine.add(stuck)
    gwait(lambda: stuck.runs == 1, "the evaluation")
    engine.engine.stop(timeout=0.05)
    assert stats["now"] == 0
    # Interrupted, not failed:
    assert engine.schedule.is_scheduled("stuck") and engine.schedule.failures("stuck") == 0
