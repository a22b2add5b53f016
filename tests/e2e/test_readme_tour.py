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
#: Lines of `peloton up`'s output a hung block's failure shows.
LOG_TAIL = 60
#: Lines of a failed task's stderr it shows.
STDERR_TAIL = 5
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
    (the CLI's waits included) and the test fails with what the block printed so far (a
    wait logs each change off a terminal), so a hang names the step it hung in, and with
    the cluster's state (`cluster_state`), so it can say why."""
    env = {**os.environ, "JOBMGR_URL": f"127.0.0.1:{up.jobmgr_port}",
           "RESMGR_URL": f"127.0.0.1:{up.resmgr_port}",
           "HOSTMGR_URL": f"127.0.0.1:{up.hostmgr_port}"}
    # The trace stamps each step, so a slow one shows.  PS4 is set in the script: bash run
    # as root (CI) ignores a PS4 it inherits.
    script = f"PS4='+ $(date +%T.%3N) '; set -x\n{text}"
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=BLOCK_SECS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the block did not finish in {BLOCK_SECS} s; it printed:\n{out}\n{err}\n"
                    f"{cluster_state(up)}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def cluster_state(up: UpCluster) -> str:
    """What a hung block leaves to look at: every job's tasks (state, health, message: a
    task that keeps failing shows here), the end of each failed task's stderr, and the end
    of what `peloton up` printed (its warnings and errors)."""
    listed = _cli(up, "job", "list")
    parts = [listed]
    # `job list` shows ids cut to 8 characters, which the CLI takes back (cli/ids.py).
    for job_id in dict.fromkeys(re.findall(r"^([0-9a-f]{8}) ", listed, re.M)):
        tasks = _cli(up, "task", "list", job_id)
        parts.append(tasks)
        # A failed task's own words ("Address already in use") end its stderr.
        for inst in re.findall(r"^(\d+)\s+(?:FAILED|LOST)\b", tasks, re.M):
            logs = _cli(up, "task", "logs", job_id, inst, "-f", "stderr").splitlines()
            parts.append("\n".join([logs[0], *logs[1:][-STDERR_TAIL:]]))
    log = up.log().splitlines()[-LOG_TAIL:]
    parts.append(f"peloton up printed (last {LOG_TAIL} lines):\n" + "\n".join(log))
    return "\n".join(parts)


def _cli(up: UpCluster, *args: str) -> str:
    try:
        result = up.cli(*args, check=False, timeout=30)
        shown = result.stdout + result.stderr
    except subprocess.TimeoutExpired:
        shown = "(no answer in 30 s)\n"
    return f"$ peloton {' '.join(args)}\n{shown}"


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
