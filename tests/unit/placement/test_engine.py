"""The placement engine between a real resource manager and the fake host manager."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from peloton.core.errors import PelotonError
from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.host import HostOffer
from peloton.core.model.sched import HostLease, Placement
from peloton.core.placement.request import Strategy
from peloton.core.states import TaskState
from peloton.placement.app import PlacementEngine
from peloton.placement.config import PlacementEngineConfig
from peloton.placement.round import place_round
from peloton.resmgr.app import ResourceManager
from peloton.storage import Store, StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.harness.ports_wire import Wired, over_grpc
from tests.unit.resmgr.helpers import FakeClock, make_pool, make_rm, singles, state_of, tasks

S = TaskState


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'p.db'}", StoreOptions(bootstrap=True))
    yield s
    s.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def cluster(cpu_hosts: int = 4, gpu_hosts: int = 0) -> FakeHostManager:
    fake = FakeHostManager()
    for i in range(cpu_hosts):
        fake.add_host(f"cpu-{i}", cpu=4)
    for i in range(gpu_hosts):
        fake.add_host(f"gpu-{i}", cpu=4, gpu=2)
    return fake


@pytest.fixture(params=["direct", "grpc"])
def via(request: pytest.FixtureRequest) -> Iterator[Callable[[Any], Any]]:
    """How the engine reaches both daemons: directly (`peloton up`) or over their private
    gRPC services (multi-process mode)."""
    wired: list[Wired] = []

    def wrap(port: Any) -> Any:
        if request.param == "direct":
            return port
        wired.append(over_grpc(port))
        return wired[-1]

    yield wrap
    for w in wired:
        w.close()


def setup(store: Store, clock: FakeClock, fake: FakeHostManager, via: Callable[[Any], Any],
          **kw: object) -> tuple[ResourceManager, PlacementEngine, str]:
    rm = make_rm(store, fake, clock, retry_delay=0.0)
    pool = make_pool(rm, "a", cpu=(0, 1000), gpu=(0, 100))
    engine = PlacementEngine(via(rm), via(fake), PlacementEngineConfig(**kw))  # type: ignore[arg-type]
    return rm, engine, pool


def hosts_of(placements: list[Placement]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in placements:
        out[p.hostname] = out.get(p.hostname, 0) + len(p.tasks)
    return out


def test_a_round_places_commits_and_frees_the_lease(store: Store, clock: FakeClock,
        via: Callable[[Any], Any]) -> None:
    fake = cluster()
    rm, engine, pool = setup(store, clock, fake, via)
    ts = tasks(10)
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    stats = engine.run_once()
    assert (stats.tasks, stats.placed, stats.hosts) == (10, 10, 4)
    assert not fake.leases and not fake.leased  # hosts free for the next round at once
    assert len(fake.reservations()) == 10
    assert {state_of(rm, t) for t in ts} == {S.PLACED}
    placements = rm.get_placements(100, 0)
    assert sum(hosts_of(placements).values()) == 10
    assert all(n <= 4 for n in hosts_of(placements).values())
    assert engine.run_once() == engine.run_once().__class__()  # nothing left: an empty round


def test_unplaced_tasks_carry_the_placer_report(store: Store, clock: FakeClock,
        via: Callable[[Any], Any]) -> None:
    fake = cluster()
    rm, engine, pool = setup(store, clock, fake, via)
    ts = tasks(5, cpu=3)  # 15 of 16 cpus are entitled, but a 4-cpu host takes one each
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    stats = engine.run_once()
    assert (stats.tasks, stats.placed) == (5, 4)
    (left,) = [t for t in ts if state_of(rm, t) is S.READY]
    reason = rm.pending_reasons([left.task_id])[left.task_id]
    assert reason.endswith("last placement attempt: 0 of 4 hosts fit: 4 insufficient cpu")
    engine.run_once()
    assert state_of(rm, left) is S.READY


def test_gpu_hosts_only_get_gpu_tasks(store: Store, clock: FakeClock,
        via: Callable[[Any], Any]) -> None:
    fake = cluster(cpu_hosts=2, gpu_hosts=2)
    rm, engine, pool = setup(store, clock, fake, via)
    plain = tasks(12, strategy=Strategy.SPREAD)
    gpu = tasks(4, gpu=1)
    rm.enqueue_gangs(pool, singles(plain + gpu))
    rm.loops.admit_once()
    engine.run_once()
    placements = rm.get_placements(100, 0)
    where = {t.task_id: p.hostname for p in placements for t in p.tasks}
    assert all(where[t.task_id].startswith("cpu-") for t in plain if t.task_id in where)
    assert sorted(where[t.task_id] for t in gpu) == ["gpu-0", "gpu-0", "gpu-1", "gpu-1"]
    unplaced = [t for t in plain if t.task_id not in where]
    assert len(unplaced) == 4  # the cpu hosts are full; the gpu hosts' cpus stay kept
    reason = rm.pending_reasons([unplaced[0].task_id])[unplaced[0].task_id]
    assert "gpu host kept for gpu tasks" in reason


def test_at_most_one_instance_per_host(store: Store, clock: FakeClock,
        via: Callable[[Any], Any]) -> None:
    fake = cluster()
    rm, engine, pool = setup(store, clock, fake, via)
    label = Label("peloton.job_id", "web")
    limit = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, label, 1)
    ts = tasks(6, labels=(label,), constraint=limit, strategy=Strategy.SPREAD)
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()
    engine.run_once()
    engine.run_once()  # a second round must see the first round's reservations
    where = hosts_of(rm.get_placements(100, 0))
    assert sorted(where) == ["cpu-0", "cpu-1", "cpu-2", "cpu-3"]
    assert set(where.values()) == {1}
    left = [t for t in ts if state_of(rm, t) is S.READY]
    assert len(left) == 2
    assert "already run a task labelled" in rm.pending_reasons([left[0].task_id])[left[0].task_id]


def test_host_manager_failure_returns_the_tasks(store: Store, clock: FakeClock,
        via: Callable[[Any], Any]) -> None:
    fake = cluster()
    rm, engine, pool = setup(store, clock, fake, via)
    ts = tasks(3)
    rm.enqueue_gangs(pool, singles(ts))
    rm.loops.admit_once()

    def down(max_hosts: int = 0) -> HostLease:
        raise ConnectionError("host manager unreachable")

    fake.acquire_hosts = down  # type: ignore[method-assign]
    with pytest.raises((ConnectionError, PelotonError)):  # PelotonError: INTERNAL over gRPC
        engine.run_once()
    assert {state_of(rm, t) for t in ts} == {S.READY}
    assert "no host lease" in rm.pending_reasons([ts[0].task_id])[ts[0].task_id]


def test_round_is_pure_and_batches_a_thousand_tasks_on_900_hosts() -> None:
    fake = cluster(cpu_hosts=900)
    offers: list[HostOffer] = list(fake.acquire_hosts().offers)
    from peloton.core.model.sched import PlacementGang
    from peloton.core.placement.request import GangRequest

    ts = tasks(1000, cpu=1)
    gangs = [PlacementGang(GangRequest((t.request,)), (1,)) for t in ts]
    result = place_round(gangs, offers)
    assert result.placed == 1000
    assert len(result.placements) == 250  # packed: four 1-cpu tasks per 4-cpu host
    assert not result.failures
