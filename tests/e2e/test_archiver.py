"""The archiver end to end: a real `peloton up`, a batch job run to completion, one archive pass.

After the pass the job is gone from hot storage (`peloton job get` says
not found) and `peloton archive get` prints all of it: config, runtime,
every task and every pod event.  A second pass finds nothing to do.
The daemon form archives jobs that finish after it started (into SQLite)
and exits cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from cli.exit_codes import ExitCode
from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import create, job_state
from tests.harness.cluster import UpCluster, eventually
from tests.harness.procs import PELOTON, OutputTail, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_a_finished_batch_job_moves_from_hot_storage_to_the_archive(cluster: UpCluster,
                                                                    tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    job_id = create(cluster, "/e2e", write_job(tmp_path, "to-archive", 'echo "run $PELOTON_INSTANCE_ID"',
                                               count=2, cpu=0.05))
    running = create(cluster, "/e2e", write_job(tmp_path, "still-running", "sleep 300", cpu=0.05))
    eventually(lambda: job_state(cluster, job_id) == "SUCCEEDED", 60, "job SUCCEEDED")
    archive = f"dir://{tmp_path / 'archive'}"

    # Stream-only first: the state an archiver killed between append and delete leaves behind.
    streamed = cluster.cli("archiver", "--archive", archive, "--age", "0", "--once", "--stream-only")
    assert "1 archived (0 already), 0 deleted" in streamed.stdout, streamed.stdout + streamed.stderr
    assert job_state(cluster, job_id) == "SUCCEEDED"
    # The rerun rebuilds the same bytes from hot storage (deduplicated), then deletes.
    done = cluster.cli("archiver", "--archive", archive, "--age", "0", "--once")
    assert "0 archived (1 already), 1 deleted" in done.stdout, done.stdout + done.stderr

    gone = cluster.cli("job", "get", job_id, check=False)
    assert gone.returncode == ExitCode.NOT_FOUND, gone.stdout + gone.stderr
    assert job_state(cluster, running) in ("PENDING", "RUNNING")  # untouched

    doc = yaml.safe_load(cluster.cli("archive", "get", job_id, "--archive", archive).stdout)
    assert doc["job_id"] == job_id and doc["summary"]["state"] == "SUCCEEDED"
    assert doc["job"]["config"]["name"] == "to-archive"
    assert doc["job"]["runtime"]["state"] == "SUCCEEDED"
    assert sorted(doc["tasks"]) == ["0", "1"]
    assert {t["runtime"]["state"] for t in doc["tasks"].values()} == {"SUCCEEDED"}
    states = {e["actualState"] for e in doc["pod_events"]["1"]}
    assert {"RUNNING", "SUCCEEDED"} <= states, doc["pod_events"]

    table = cluster.cli("archive", "query", "--archive", archive, "--owner", "e2e").stdout
    assert job_id[:8] in table and "to-archive" in table and "SUCCEEDED" in table
    listed = json.loads(cluster.cli("-j", "archive", "query", "--archive", archive,
                                    "--states", "SUCCEEDED", "--since", "1h").stdout)
    assert [s["job_id"] for s in listed] == [job_id]
    assert "every checksum matches" in cluster.cli("archive", "verify", "--archive", archive).stdout

    again = cluster.cli("archiver", "--archive", archive, "--age", "0", "--once")
    assert "0 archived (0 already), 0 deleted" in again.stdout, again.stdout


def test_the_archiver_daemon_follows_new_completions_and_stops_on_sigterm(cluster: UpCluster,
                                                                         tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    archive = f"sqlite:///{tmp_path / 'archive.db'}"
    proc = subprocess.Popen([PELOTON, "-m", f"127.0.0.1:{cluster.jobmgr_port}", "archiver",
                             "--archive", archive, "--age", "0", "--interval", "300ms",
                             "--bootstrap-delay", "0"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    tail = OutputTail(proc)
    try:
        tail.wait_for("archiver: archiving terminal batch jobs", 30)
        job_id = create(cluster, "/e2e", write_job(tmp_path, "later", "true", cpu=0.05))
        eventually(lambda: cluster.cli("job", "get", job_id, check=False).returncode
                   == ExitCode.NOT_FOUND, 60, "the job archived and deleted")
        doc = json.loads(cluster.cli("-j", "archive", "get", job_id, "--archive", archive).stdout)
        assert doc["summary"]["name"] == "later" and doc["tasks"]["0"]["runtime"]["state"] == "SUCCEEDED"
    finally:
        code = stop(proc)
    assert code == 0, tail.lines[-20:]
