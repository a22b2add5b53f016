"""The README's tour works as written: its shell blocks run against a real `peloton up`,
once on each store: SQLite (the default), PostgreSQL and Cassandra (the harness' real servers).

The CLI reads $JOBMGR_URL, $RESMGR_URL and $HOSTMGR_URL (as Peloton's does), so the blocks run
verbatim against a cluster on free ports instead of the default ones `make run` uses.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e.stores import migrated_store
from tests.harness.cluster import UpCluster
from tests.harness.procs import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
#: How long one block may take (a block takes 10-20 s on an idle machine).
BLOCK_SECS = 200
BLOCK = re.compile(r"<!-- tour:begin (\w+) -->\s*```sh\n(.*?)```\s*<!-- tour:end -->", re.S)


def tour_blocks() -> dict[str, str]:
    """name -> shell text of every tour block in the README."""
    return {m.group(1): m.group(2) for m in BLOCK.finditer((REPO / "README.md").read_text())}


@pytest.fixture(scope="module", params=[
    "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("cassandra", marks=pytest.mark.cassandra)])
def up(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[UpCluster]:
    store = migrated_store(request, request.param)
    cluster = UpCluster(tmp_path_factory.mktemp(f"tour-{request.param}"), agents=1,
                        extra=["--agent-cpus", "2", "--agent-mem-mb", "4096",
                               *(["--store", store] if store else [])]).start()
    try:
        yield cluster
    finally:
        cluster.close()


def run_block(up: UpCluster, text: str) -> subprocess.CompletedProcess[str]:
    """Run one tour block in its own session; on the deadline the whole session is killed
    (the CLI's waits included) and the test fails with what the block printed so far, so a
    hang names the step it hung in."""
    env = {**os.environ, "JOBMGR_URL": f"127.0.0.1:{up.jobmgr_port}",
           "RESMGR_URL": f"127.0.0.1:{up.resmgr_port}",
           "HOSTMGR_URL": f"127.0.0.1:{up.hostmgr_port}",
           "PS4": "+ $(date +%T.%3N) "}  # the trace stamps each step: a slow one shows
    proc = subprocess.Popen(["bash", "-xeuo", "pipefail", "-c", text], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=BLOCK_SECS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the block did not finish in {BLOCK_SECS} s; it printed:\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_readme_has_both_tour_blocks() -> None:
    assert set(tour_blocks()) == {"batch", "service", "waiting"}


def test_batch_tour_runs_as_written(up: UpCluster) -> None:
    result = run_block(up, tour_blocks()["batch"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCEEDED" in result.stdout
    assert "hello from instance 3 of job" in result.stdout


def test_service_tour_runs_as_written(up: UpCluster) -> None:
    result = run_block(up, tour_blocks()["service"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCEEDED" in result.stdout or "ROLLED_FORWARD" in result.stdout


def test_waiting_tour_refuses_explains_and_backfills(up: UpCluster) -> None:
    result = run_block(up, tour_blocks()["waiting"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the job can never run: it asks for 500 cpu at once" in result.stderr
    assert "SUCCEEDED" in result.stdout  # the hello job ran past the queued 500-cpu one
    assert "unplaceable: no UP host could hold it now: it asks for 500 cpu" in result.stdout
    assert "Pool /DefaultResPool: entitled to" in result.stdout
    assert "largest host localhost" in result.stdout
    assert "Cluster (1 UP host):" in result.stdout and "CPU" in result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
