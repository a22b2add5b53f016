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
from pathlib import Path

import pytest
from hypothesis import settings

from tests.harness.cassandra import CassandraServer, CassandraUnavailable
from tests.harness.kube import KubeControlPlane, cache_bin_dir, ensure_binaries, running_control_plane
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


@pytest.fixture(scope="session")
def cassandra_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraServer | None]:
    """A real Cassandra node for the whole run (tests/harness/cassandra.py); None when
    PELOTON_TEST_CASSANDRA=host:port names a running server instead.

    PELOTON_TEST_CASSANDRA=off skips the tests that need one (a loud line ends the run).
    Jars Maven could not resolve are an error naming them, not a skip.
    """
    given = os.environ.get("PELOTON_TEST_CASSANDRA", "")
    if given == "off":
        pytest.skip("CASSANDRA TESTS SKIPPED: PELOTON_TEST_CASSANDRA=off")
    if given:
        yield None
        return
    try:
        server = CassandraServer(tmp_path_factory.mktemp("cassandra")).start()
    except CassandraUnavailable as exc:
        pytest.fail(f"no Cassandra server for the Cassandra tests: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def cassandra(cassandra_server: CassandraServer | None) -> str:
    """`host:port` of the run's Cassandra node."""
    if cassandra_server is None:
        return os.environ["PELOTON_TEST_CASSANDRA"]
    return cassandra_server.hosts


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say loudly when the Cassandra tests did not run against a real server."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "cassandra" in getattr(r, "keywords", {})]
    if skipped:
        terminalreporter.write_sep(
            "!", f"CASSANDRA TESTS SKIPPED ({len(skipped)} tests): "
            "PELOTON_TEST_CASSANDRA=off", red=True, bold=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the Kubernetes binaries before any test runs when a selected test needs the control
    plane (tests/k8s, the k8s host-backend contract): a first build takes minutes, and inside
    the `kube` fixture it would count against the per-test timeout.  `make test` builds them
    before pytest starts; this covers a plain `pytest`."""
    if not any("kube" in getattr(item, "fixturenames", ()) or "[k8s" in item.nodeid
               for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not (cache_bin_dir() / "kube-apiserver").exists():
        reporter.write_line(f"building the Kubernetes test binaries into {cache_bin_dir()} "
                            "(scripts/k8s_binaries.sh, about 6 minutes, once)")
    ensure_binaries()


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeControlPlane]:
    """A real Kubernetes control plane for the whole run (tests/harness/kube.py): etcd,
    kube-apiserver with RBAC on, kwok for fake nodes; on 127.0.0.1, stopped by PID.

    Its binaries are built from pinned versions the first time (scripts/k8s_binaries.sh, into a
    cache outside the repository); a machine without Go fails here naming what to install.
    """
    with running_control_plane(tmp_path_factory.mktemp("kube")) as plane:
        yield plane


@pytest.fixture(scope="session")
def kube_scheduler(kube: KubeControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig signed in as the scheduler's service account, bound to exactly the role of
    docs/deploy/kubernetes/rbac.yaml (which this applies, with the namespace)."""
    from tests.k8s.manifests import scheduler_kubeconfig

    return scheduler_kubeconfig(kube, tmp_path_factory.mktemp("kube-scheduler"))
