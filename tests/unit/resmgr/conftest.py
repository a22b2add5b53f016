"""Fixtures for resource manager tests: a SQLite store, a fake host manager, a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.resmgr.app import ResourceManager
from peloton.storage import Store, StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.harness.ports_wire import over_grpc
from tests.unit.resmgr.helpers import FakeClock, make_rm


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where the test's SQLite store lives (a restart opens the same file)."""
    return tmp_path / "resmgr.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    """A store over a fresh SQLite file."""
    s = open_store(f"sqlite:///{db_path}", StoreOptions(bootstrap=True))
    yield s
    s.close()


@pytest.fixture
def clock() -> FakeClock:
    """Time the test moves by hand."""
    return FakeClock()


@pytest.fixture
def hostmgr() -> FakeHostManager:
    """Four 4-cpu hosts (16 cpus)."""
    fake = FakeHostManager()
    for i in range(4):
        fake.add_host(f"host-{i}", cpu=4)
    return fake


@pytest.fixture(params=["direct", "grpc"])
def rm(request: pytest.FixtureRequest, store: Store, hostmgr: FakeHostManager,
       clock: FakeClock) -> Iterator[ResourceManager]:
    """A loaded (not started) resource manager: tests drive its loops by hand.  Its port
    is reached directly (`peloton up`) or through its private gRPC service (multi-process)."""
    manager = make_rm(store, hostmgr, clock)
    if request.param == "grpc":
        wired = over_grpc(manager)
        yield wired  # type: ignore[misc]
        wired.close()
    else:
        yield manager
    manager.stop()
