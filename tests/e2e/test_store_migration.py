"""`peloton migrate copy|verify` on a live cluster's state: SQLite → Cassandra → PostgreSQL.

A `peloton up` on SQLite runs the README's batch tour and keeps a service running; its state
is copied to a real Cassandra keyspace while it runs, the copy catches up after the cluster
stops, and then Cassandra's copy goes on to PostgreSQL.  `verify` must find all three equal.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.stores import migrated_store
from tests.e2e.test_readme_tour import tour_blocks
from tests.harness.cluster import UpCluster
from tests.harness.procs import PELOTON, REPO

pytestmark = [pytest.mark.e2e, pytest.mark.cassandra, pytest.mark.postgres,
              pytest.mark.timeout(300)]


@pytest.fixture
def up(tmp_path: Path) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path, agents=1,
                        extra=["--agent-cpus", "2", "--agent-mem-mb", "4096"]).start()
    try:
        yield cluster
    finally:
        cluster.close()


def migrate(*args: str) -> subprocess.CompletedProcess[str]:
    """One `peloton migrate ...` command (no progress bars)."""
    return subprocess.run([PELOTON, "migrate", *args], capture_output=True, text=True,
                          timeout=180, cwd=REPO)


def test_live_state_moves_sqlite_to_cassandra_to_postgresql(
        up: UpCluster, request: pytest.FixtureRequest) -> None:
    env = {**os.environ, "JOBMGR_URL": f"127.0.0.1:{up.jobmgr_port}",
           "RESMGR_URL": f"127.0.0.1:{up.resmgr_port}", "HOSTMGR_URL": f"127.0.0.1:{up.hostmgr_port}"}
    tour = subprocess.run(["bash", "-euo", "pipefail", "-c", tour_blocks()["batch"]], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=240)
    assert tour.returncode == 0, tour.stdout + tour.stderr
    up.cli("job", "stateless", "create", "/DefaultResPool",
           str(REPO / "docs" / "examples" / "web-service.yaml"), "2")

    sqlite = f"sqlite:///{up.base / 'data' / 'state.db'}"
    cassandra, postgresql = migrated_store(request, "cassandra"), migrated_store(request, "postgresql")
    live = migrate("copy", "--from", sqlite, "--to", cassandra, "--no-progress")
    assert live.returncode == 0, live.stdout + live.stderr  # while the cluster writes
    assert up.stop() == 0
    for source, target in ((sqlite, cassandra), (cassandra, postgresql)):
        done = migrate("copy", "--from", source, "--to", target, "--no-progress")
        assert done.returncode == 0, done.stdout + done.stderr
    for source, target in ((sqlite, cassandra), (cassandra, postgresql), (sqlite, postgresql)):
        check = migrate("verify", "--from", source, "--to", target)
        assert check.returncode == 0, f"{source} -> {target}: {check.stdout}{check.stderr}"
        assert "task_runtime" in check.stdout
