"""Fixtures for host manager tests: a SQLite store, a fake backend, a fake clock, and a
host manager wired to them but not started (tests drive its work with `settle()`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from peloton.common.clock import FakeClock
from peloton.core.model.constraints import Label
from peloton.core.model.ids import TaskId
from peloton.core.model.resources import Resources
from peloton.core.model.sched import HostReservation, LaunchSpec
from peloton.core.model.task import TaskSpec
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.config import HostManagerConfig
from peloton.storage import Store, StoreOptions, open_store
from tests.harness.fake_host_backend import FakeBackend
from tests.harness.ports_wire import Wired, over_grpc

JOB = "6d1b7c0e-0000-4000-8000-000000000001"
CONFIG = HostManagerConfig(consumers=("jobmgr",), recovery_grace=0.0, lease_timeout=30.0,
                           reservation_timeout=60.0)


def rid(instance: int, run: int = 1) -> str:
    """A run id of the test job."""
    return f"{JOB}-{instance}-{run}"


def spec(instance: int, cpu: float = 1.0, mem: float = 100.0, run: int = 1,
         ports: tuple[int, ...] = (), labels: tuple[Label, ...] = (),
         revocable: bool = False) -> LaunchSpec:
    """A launch of one run of the test job."""
    return LaunchSpec(rid(instance, run),
                      TaskSpec(resources=Resources(cpu, mem), labels=labels, revocable=revocable),
                      tuple((f"p{i}", p) for i, p in enumerate(ports)))


def reservation(hostname: str, instance: int, cpu: float = 1.0, mem: float = 100.0,
                ports: tuple[int, ...] = (), labels: tuple[Label, ...] = (),
                run: int = 1) -> HostReservation:
    """What placement reserves for one run."""
    return HostReservation(hostname, TaskId(JOB, instance), run, Resources(cpu, mem), ports,
                           labels=labels)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(monotonic=1000.0)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url, StoreOptions(bootstrap=True))
    yield s
    s.close()


@pytest.fixture
def backend() -> FakeBackend:
    b = FakeBackend()
    b.add_host("h1", cpu=4, mem_mb=4096)
    b.add_host("h2", cpu=2, mem_mb=2048)
    return b


def connect(hm: HostManager) -> HostManager:
    """What start() does, minus the greenlets: recover records, then hear from the backend."""
    hm.maintenance.load()
    hm.backend.start(hm.intake)
    return hm


@pytest.fixture(params=["direct", "grpc"])
def wire(request: pytest.FixtureRequest) -> str:
    """How tests reach the host manager's port: the object itself (`peloton up`), or its
    private gRPC service through the client adapter (multi-process mode)."""
    return str(request.param)


@pytest.fixture
def make_hm(store: Store, backend: FakeBackend, clock: FakeClock, wire: str
            ) -> Iterator[Callable[..., HostManager]]:
    wired: list[Wired] = []

    def make(config: HostManagerConfig = CONFIG, b: FakeBackend | None = None) -> HostManager:
        hm = connect(HostManager(store, b or backend, config, clock=clock))
        if wire == "grpc":
            wired.append(over_grpc(hm))
            return wired[-1]  # type: ignore[return-value]
        return hm

    yield make
    for w in wired:
        w.close()


@pytest.fixture
def hm(make_hm: Callable[..., HostManager]) -> HostManager:
    return make_hm()
