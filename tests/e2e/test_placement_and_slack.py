"""Placement and slack as Peloton, end to end: `peloton up` with three local agents that
offer revocable cpus, the CLI, real processes.

- a SPREAD_JOB job of three tasks on three hosts runs one task per host;
- a HOST constraint on `hostname` (a label of every host) picks that host;
- a revocable batch job and a revocable service run side by side on one host, on the
  slack the agents offer, although the pool's regular cpu is all taken.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.e2e.conftest import host_label, write_job, write_pool
from tests.e2e.test_batch_jobs import create
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
S = task_pb2.TaskState


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    base = tmp_path_factory.mktemp("slack")
    cluster = UpCluster(base, agents=3, extra=[
        "--agent-cpus", "1", "--agent-mem-mb", "2048", "--agent-disk-mb", "100000",
        "--agent-revocable-cpus", "2"]).start()
    try:
        # Regular cpu of the pool: 1 (of 3).  Revocable tasks take their memory and disk
        # from the pool's reservation, up to the slack limit (20% by default): 400 MB of
        # memory, 200 MB of disk.
        cluster.cli("respool", "create", "/e2e", str(write_pool(
            base, "e2e", cpu_limit=1, mem_res=2000, disk_res=1000)))
        yield cluster
    finally:
        cluster.close()


def running_hosts(up: UpCluster, job_id: str, count: int) -> list[str]:
    """The hosts of the job's tasks once all `count` run."""
    def hosts() -> list[str] | None:
        tasks = up.client.list_tasks(job_id).result.value
        if len(tasks) == count and all(t.runtime.state == S.RUNNING for t in tasks.values()):
            return [tasks[i].runtime.host for i in range(count)]
        return None
    found: list[str] = eventually(hosts, 90, f"{count} tasks of {job_id} RUNNING")
    return found



def test_spread_job_runs_one_task_per_host(up: UpCluster, tmp_path: Path) -> None:
    job = write_job(tmp_path, "spread", "sleep 300", count=3, cpu=0.1, mem=16,
                    extra="placementstrategy: PLACEMENT_STRATEGY_SPREAD_JOB\n")
    job_id = create(up, "/e2e", job)
    hosts = running_hosts(up, job_id, 3)
    assert sorted(hosts) == ["localhost-0", "localhost-1", "localhost-2"]
    up.cli("job", "stop", job_id)


def test_a_constraint_on_hostname_picks_that_host(up: UpCluster, tmp_path: Path) -> None:
    job = write_job(tmp_path, "pinned", "sleep 300", count=2, cpu=0.1, mem=16,
                    extra=host_label("hostname", "localhost-2"))
    job_id = create(up, "/e2e", job)
    assert running_hosts(up, job_id, 2) == ["localhost-2", "localhost-2"]
    up.cli("job", "stop", job_id)


def test_revocable_batch_and_service_share_a_host_on_slack(up: UpCluster,
                                                           tmp_path: Path) -> None:
    # The pool's regular cpu (1) is taken by a regular job first.
    regular = create(up, "/e2e", write_job(tmp_path, "regular", "sleep 300", count=1, cpu=1,
                                           mem=16, extra=host_label("hostname", "localhost-1")))
    running_hosts(up, regular, 1)
    revocable = "  revocable: true\n" + host_label("hostname", "localhost-1")
    batch = create(up, "/e2e", write_job(tmp_path, "rbatch", "sleep 300", count=2, cpu=0.5,
                                         mem=16, extra=revocable))
    service_yaml = write_job(tmp_path, "rservice", "sleep 300", count=2, cpu=0.5, mem=16,
                             extra=revocable + "type: 1\n")
    service = create(up, "/e2e", service_yaml)
    # 4 x 0.5 revocable cpus on localhost-1's 2 slack cpus, beside the regular task.
    assert running_hosts(up, batch, 2) == ["localhost-1"] * 2
    assert running_hosts(up, service, 2) == ["localhost-1"] * 2
    # The pool shows the revocable work as slack usage, exactly (4 x 0.5 cpus, 4 x 16 MB).
    pools = json.loads(up.cli("respool", "dump", "--format", "json").stdout)
    (pool,) = [p for p in pools if p["path"]["value"] == "/e2e"]
    usage = {u["kind"]: (u["allocation"], u["slack"]) for u in pool["usage"]}
    assert usage["cpu"] == (1.0, 2.0) and usage["memory"] == (16.0, 64.0)
    for job_id in (regular, batch, service):
        up.cli("job", "stop", job_id)
