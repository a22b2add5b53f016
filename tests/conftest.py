"""Shared fixtures: real servers the tests start themselves (logic in tests/harness/).

The test process is made cooperative first, with the same function every daemon calls
(peloton.common.geventsetup): gevent monkey-patching and gRPC's gevent mode.  Component
tests then run exactly as `peloton up` runs: one hub, greenlets for every "thread",
blocking database work on the store's thread pool.
"""

# ruff: noqa: E402  (the imports below must come after patching)
from __future__ import annotations

from peloton.common import geventsetup

geventsetup.setup()  # before anything below imports socket, threading, grpc users

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.harness.postgres import PostgresServer
from tests.harness.zookeeper import ZooKeeperServer, running_zookeeper

# `make test` (what CI runs) draws the same examples every run, so a red CI means the code
# changed, not that a new random draw came up.  `make fuzz` draws fresh examples, many rounds.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("fuzz", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the whole run, on 127.0.0.1 and a free port."""
    with running_zookeeper(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture(scope="session")
def zookeeper(zookeeper_server: ZooKeeperServer) -> str:
    """The shared ZooKeeper's connection string, `127.0.0.1:<port>`."""
    return zookeeper_server.hosts


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL for the whole run (127.0.0.1, free port, stopped by PID).

    Tests get their own databases from it (see tests/contract/conftest.py).
    """
    try:
        server = PostgresServer().start()
    except FileNotFoundError as exc:
        pytest.skip(f"POSTGRES TESTS SKIPPED: {exc}")
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say loudly when the Cassandra contract suite did not run (no server here)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "cassandra" in getattr(r, "keywords", {})]
    if skipped and not os.environ.get("PELOTON_TEST_CASSANDRA"):
        terminalreporter.write_sep(
            "!", f"CASSANDRA CONTRACT SUITE SKIPPED ({len(skipped)} tests): "
            "set PELOTON_TEST_CASSANDRA=host:port to run it", red=True, bold=True)
