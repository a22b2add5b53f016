"""`peloton job forecast` end to end: `peloton up`, real processes, the resource manager's
ForecastService reading live state and running the scheduler forward in its worker process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import write_job, write_pool
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def job_id_of(output: str) -> str:
    match = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", output)
    assert match, output
    return match.group(0)


def test_a_task_waiting_on_its_pools_limit_gets_a_bounded_forecast(cluster: UpCluster,
                                                                   tmp_path: Path) -> None:
    """Pool /fc may use 1 cpu; `busy` holds it (one 1-cpu task sleeping), `waiting` queues
    behind.  busy has no finished run, so it is taken to run the default hour; with
    `--duration` given for waiting, the only unknown is busy's end."""
    cluster.cli("respool", "create", "/fc", str(write_pool(tmp_path, "fc", cpu_limit=1)))
    busy = job_id_of(cluster.cli("job", "create", "/fc", str(
        write_job(tmp_path, "busy", "sleep 600", cpu=1))).stdout)
    eventually(lambda: "RUNNING" in cluster.cli("task", "list", busy).stdout, 60, "busy runs")
    waiting = job_id_of(cluster.cli("job", "create", "/fc", str(
        write_job(tmp_path, "waiting", "true", cpu=1))).stdout)
    eventually(lambda: "PENDING" in cluster.cli("task", "list", waiting).stdout, 60,
               "waiting is queued")

    text = cluster.cli("job", "forecast", waiting, "0", "--duration", "5", "--wall", "20",
                       timeout=90).stdout
    assert text.startswith(f"job {waiting} instance 0: starts ")
    assert "binding now (pool-limit): pool /fc is at its limit: needs 1 cpu, 1 of 1 cpu in use" \
        in text
    assert "what would start it sooner:" in text
    assert "bounds: looked 1d00h ahead over 5 run(s)" in text and "of 20 s wall time" in text

    got = json.loads(cluster.cli("job", "forecast", waiting, "--json", "--variations", "3",
                                 "--wall", "20", timeout=90).stdout)
    est = got["estimate"]
    # busy's default hour, varied between a quarter and twice: p50 within that.
    assert est["runs"] == 3 and 900 * 0.9 <= est["p50_secs"] <= 7200
    assert got["bounds"] == {"horizon_secs": 86400.0, "wall_secs": 20.0, "variations": 3}
    # Only more reservation (the limit raised with it) starts it sooner: a host added, or half
    # the cpu, leaves /fc at its limit, so each is noted as not helping (or as not run, if
    # the wall time ran out first); nothing runs below its priority to stop.
    assert {c["kind"] for c in got["counterfactuals"]} == {"reservation"}
    for change in ("1 host like ", "half the resources per task "):
        assert any(n.startswith((f"would not help: {change}",
                                 f"not run within the wall time: {change}"))
                   for n in got["notes"]), (change, got["notes"])

    nothing = cluster.cli("job", "forecast", busy, check=False)
    assert nothing.returncode != 0 and "has no pending task" in nothing.stdout + nothing.stderr
    cluster.cli("job", "stop", busy)
    cluster.cli("job", "stop", waiting)
