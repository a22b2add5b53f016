"""`peloton up --jobmgrs 2`: a one-machine cluster of daemon processes with two all-active
job managers and a ZooKeeper it starts itself (peloton/cluster/processes.py).

The test starts it as a user would, creates a pool and a batch job with the CLI (which
finds a job manager through ZooKeeper), checks that both job managers hold partitions and
that the job's runs each ran once, then stops it with SIGTERM: every process it started
is gone.  Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from peloton.core.states import TaskState
from peloton.storage import StoreOptions, open_store
from tests.harness.procs import PELOTON, OutputTail, stop, wait_for
from tests.harness.zookeeper import ensure_installed
from tests.integration.test_multiprocess import JOB, POOL

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]


def test_up_with_two_job_managers_runs_a_job_and_stops_everything(tmp_path: Path) -> None:
    ensure_installed()
    data = tmp_path / "data"
    up = subprocess.Popen([PELOTON, "up", "--jobmgrs", "2", "--partitions", "8",
                           "--data-dir", str(data), "--jobmgr-port", "0", "--resmgr-port", "0",
                           "--hostmgr-port", "0", "--zk-root", "/up-test"],
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    tail = OutputTail(up)
    try:
        ready = tail.wait_for("peloton up: ready", 120)
        zk = re.search(r"-z (\S+)", ready)
        assert zk is not None, ready
        where = ["-z", zk.group(1), "--zkroot", "/up-test", "-t", "20s"]

        def cli(*args: str) -> str:
            result = subprocess.run([PELOTON, *where, *args], cwd=tmp_path, text=True,
                                    capture_output=True, timeout=90)
            assert result.returncode == 0, result.stdout + result.stderr + "\n".join(tail.lines)
            return result.stdout

        (tmp_path / "pool.yaml").write_text(POOL)
        cli("respool", "create", "/DefaultResPool", str(tmp_path / "pool.yaml"))
        (tmp_path / "job.yaml").write_text(JOB.format(name="up-jobmgrs", count=4))
        out = cli("job", "create", "/DefaultResPool", str(tmp_path / "job.yaml"), "--wait",
                  "--wait-timeout", "60s")
        assert "SUCCEEDED" in out, out
        job_id = next(w for w in out.split() if re.fullmatch(r"[0-9a-f-]{36}", w))
        store = open_store(f"sqlite:///{(data / 'state.db').resolve()}", StoreOptions())
        try:
            runtimes = store.get_task_runtimes(job_id)
            assert {(rt.state, rt.run_id) for rt in runtimes.values()} == {
                (TaskState.SUCCEEDED, 1)}
        finally:
            store.close()
        logs = data / "procs"
        for member in ("jobmgr-1", "jobmgr-2"):  # both are members holding partitions
            assert "acquired partition" in (logs / f"{member}.log").read_text(), member
        assert json.loads(cli("-j", "job", "get", job_id) or "{}")
    finally:
        code = stop(up, signal.SIGTERM, timeout=60)
    assert code == 0, "\n".join(tail.lines)
    assert tail.lines[-1] == "peloton up: stopped"
    # Every process it started has exited: the daemons logged their stop.
    wait_for(lambda: all("stopped" in (data / "procs" / f"{n}.log").read_text()
                         for n in ("jobmgr-1", "jobmgr-2", "resmgr", "hostmgr")), 10,
             "the daemons' stop lines")
