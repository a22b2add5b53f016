"""`peloton cron` against `peloton up`: schedule a batch job, start a run, survive a restart.

The scheduling rules (once per due time, collisions, missed runs, two leaders) are unit-tested
with a fake clock (tests/unit/jobmgr/test_cron_scheduler.py); this checks the whole path a user
takes: CLI -> CronService -> store -> scheduler -> a real batch job run by a real agent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from tests.e2e.conftest import write_job, write_pool
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_cron_schedule_start_restart_deschedule(cluster: UpCluster, tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    job = write_job(tmp_path, "nightly", "echo cron-ran", count=2)
    bad = cluster.cli("cron", "schedule", "nightly", "/e2e", str(job), "--schedule", "0 25 * * *",
                      check=False)
    assert bad.returncode != 0 and "schedule" in (bad.stdout + bad.stderr)
    assert "No cron jobs" in cluster.cli("cron", "list").stdout  # nothing stored
    out = cluster.cli("cron", "schedule", "nightly", "/e2e", str(job),
                      "--schedule", "0 3 * * MON-FRI").stdout
    assert "Cron job nightly scheduled: 0 3 * * MON-FRI" in out
    started = cluster.cli("cron", "start", "nightly").stdout
    run = started.strip().rsplit(" ", 1)[-1]
    client = cluster.client

    def succeeded() -> bool:
        return bool(client.get_job(run).jobInfo.runtime.state == job_pb2.SUCCEEDED)

    eventually(succeeded, 90, "the cron run's batch job SUCCEEDED")
    assert client.get_job(run).jobInfo.config.type == job_pb2.BATCH

    cluster.stop()
    cluster.start()  # the cron job and its last run survive a restart
    listed = cluster.cli("cron", "list").stdout
    assert "nightly" in listed and "0 3 * * MON-FRI" in listed and run in listed, listed
    assert "descheduled" in cluster.cli("cron", "deschedule", "nightly").stdout
    assert "not scheduled" in cluster.cli("cron", "deschedule", "nightly").stdout
