"""A daemon's placement rounds overlap their resource manager calls (placement/app.py): a
round reports in the background while the next one runs (reports land in order, one at a
time), and dequeues the next round's gangs while it places (given back unplaced if the
engine stops); a stepped round (the simulator's) does each step itself."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest

from peloton.core.model.sched import Placement, PlacementFailure
from peloton.core.states import TaskState
from peloton.placement.app import PlacementEngine
from peloton.placement.config import PlacementEngineConfig
from peloton.resmgr.app import ResourceManager
from peloton.storage import Store, StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import FakeClock, make_pool, make_rm, singles, state_of, tasks

S = TaskState
DEADLINE = 10.0


class HeldReports:
    """The resource manager, with each `set_placements` held until the test lets it go."""

    def __init__(self, rm: ResourceManager) -> None:
        self.rm = rm
        self.release = gevent.event.Event()
        self.reported: list[int] = []  # tasks per report, in the order they landed
        self.dequeues = 0

    def dequeue_gangs(self, limit: int, timeout: float) -> Any:
        self.dequeues += 1
        return self.rm.dequeue_gangs(limit, timeout)

    def set_placements(self, placements: Sequence[Placement],
                       failures: Sequence[PlacementFailure]) -> None:
        self.release.wait(DEADLINE)
        self.rm.set_placements(placements, failures)
        self.reported.append(sum(len(p.tasks) for p in placements) + len(failures))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'p.db'}", StoreOptions(bootstrap=True))
    yield s
    s.close()


def until(probe: Any, what: str) -> None:
    with gevent.Timeout(DEADLINE, AssertionError(f"timed out waiting for {what}")):
        while not probe():
            gevent.sleep(0.005)


def setup(store: Store) -> tuple[ResourceManager, HeldReports, PlacementEngine, list[Any],
                               FakeHostManager]:
    fake = FakeHostManager()
    for i in range(4):
        fake.add_host(f"cpu-{i}", cpu=4)
    rm = make_rm(store, fake, FakeClock(), retry_delay=0.0)
    pool = make_pool(rm, "a", cpu=(0, 1000))
    ts = tasks(6)
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    held = HeldReports(rm)
    engine = PlacementEngine(held, fake, PlacementEngineConfig(batch_limit=3))  # type: ignore[arg-type]
    return rm, held, engine, ts, fake


def test_the_next_round_runs_while_the_last_report_is_in_flight(store: Store) -> None:
    rm, held, engine, ts, fake = setup(store)
    first = engine.run_once(overlap=True)  # returns with its report held
    assert first.placed == 3 and held.reported == []
    second = gevent.spawn(engine.run_once, 0.0, True)
    # The second round placed and committed while the first report was still held...
    until(lambda: len(fake.reservations()) == 6, "the second round's commit")
    assert held.reported == []
    # ...and its own report waits for the first: they land in order, one at a time.
    held.release.set()
    assert second.get(timeout=DEADLINE).placed == 3
    engine.stop()  # the second report lands before the engine lets go
    assert held.reported == [3, 3]
    assert {state_of(rm, t) for t in ts} == {S.PLACED}


def test_the_next_rounds_gangs_are_dequeued_while_a_round_places(store: Store) -> None:
    rm, held, engine, ts, _ = setup(store)
    held.release.set()
    engine.run_once(overlap=True)
    until(lambda: held.dequeues == 2, "the dequeue ahead")
    assert all(state_of(rm, t) in (S.PLACING, S.PLACED) for t in ts)  # none left READY
    assert engine.run_once(overlap=True).placed == 3  # with the gangs taken ahead
    engine.stop()
    assert held.reported == [3, 3]


def test_gangs_taken_ahead_are_given_back_when_the_engine_stops(store: Store) -> None:
    rm, held, engine, ts, _ = setup(store)
    held.release.set()
    engine.run_once(overlap=True)
    until(lambda: held.dequeues == 2, "the dequeue ahead")
    engine.stop()
    until(lambda: len(held.reported) == 2, "the gangs taken ahead given back")
    assert held.reported == [3, 3]  # the second: the three taken ahead, unplaced
    states = [state_of(rm, t) for t in ts]
    assert states.count(S.PLACED) == 3 and states.count(S.READY) == 3
    assert "placement engine stopped" in rm.pending_reasons(
        [t.task_id for t in ts if state_of(rm, t) is S.READY][:1]).popitem()[1]


def test_a_stepped_round_does_each_step_itself(store: Store) -> None:
    rm, held, engine, ts, _ = setup(store)
    held.release.set()
    assert engine.run_due().placed == 3
    assert held.reported == [3] and held.dequeues == 1
    assert sum(state_of(rm, t) is S.PLACED for t in ts) == 3
