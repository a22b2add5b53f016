"""Batch jobs end to end: `peloton up`, the CLI and real processes (issue 4/6, item 9)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.e2e.conftest import write_job, write_pool
from tests.harness.cluster import UpCluster, alive, eventually, task_pids

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
S = task_pb2.TaskState


def job_id_of(output: str) -> str:
    """The job id `peloton job create` printed."""
    match = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", output)
    assert match, output
    return match.group(0)


def job_state(up: UpCluster, job_id: str) -> str:
    from peloton.api.gen.peloton.api.v0.job import job_pb2

    runtime = up.client.get_job(job_id).jobInfo.runtime
    return str(job_pb2.JobState.Name(runtime.state))


def task_states(up: UpCluster, job_id: str) -> dict[int, str]:
    tasks = up.client.list_tasks(job_id).result.value
    return {i: S.Name(t.runtime.state) for i, t in tasks.items()}


def create(up: UpCluster, pool: str, job: Path) -> str:
    return job_id_of(up.cli("job", "create", pool, str(job)).stdout)


def test_hundred_task_batch_job_completes_and_logs_are_readable(cluster: UpCluster,
                                                               tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    job = write_job(tmp_path, "hundred", 'echo "hello from $PELOTON_INSTANCE_ID"', count=100,
                    cpu=0.01, mem=8)
    job_id = create(cluster, "/e2e", job)
    eventually(lambda: job_state(cluster, job_id) == "SUCCEEDED", 120, "job SUCCEEDED")
    states = task_states(cluster, job_id)
    assert len(states) == 100 and set(states.values()) == {"SUCCEEDED"}
    logs = cluster.cli("task", "logs", job_id, "42").stdout
    assert "hello from 42" in logs


def test_failed_tasks_are_retried_up_to_max_failures_then_job_fails(cluster: UpCluster,
                                                                     tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    job_id = create(cluster, "/e2e", write_job(tmp_path, "failing", "exit 3", count=2,
                                               max_failures=3))
    eventually(lambda: job_state(cluster, job_id) == "FAILED", 120, "job FAILED")
    for inst in (0, 1):
        info = cluster.client.get_task(job_id, inst).result
        assert S.Name(info.runtime.state) == "FAILED"
        assert info.runtime.failureCount == 3
        assert "exited with code 3" in info.runtime.message
        runs = {e.taskId.value.rsplit("-", 1)[1]
                for e in cluster.client.get_pod_events(job_id, inst).result}
        assert runs == {"1", "2", "3"}


def test_kill_stops_the_real_processes(cluster: UpCluster, tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    job_id = create(cluster, "/e2e", write_job(tmp_path, "sleepers", "sleep 300", count=3))
    eventually(lambda: set(task_states(cluster, job_id).values()) == {"RUNNING"}, 60,
               "all RUNNING")
    pids = eventually(lambda: (p := {k: v for k, v in task_pids(tmp_path).items()
                                     if k.startswith(job_id)}) and len(p) == 3 and p, 30,
                      "task pids recorded")
    assert all(alive(pid) for pid in pids.values())
    cluster.cli("job", "stop", job_id)
    eventually(lambda: job_state(cluster, job_id) == "KILLED", 60, "job KILLED")
    eventually(lambda: not any(alive(pid) for pid in pids.values()), 30, "processes gone")


def test_running_tasks_never_exceed_the_pools_limit(cluster: UpCluster, tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/small",
                str(write_pool(tmp_path, "small", cpu_limit=1)))
    job_id = create(cluster, "/small", write_job(tmp_path, "capped", "sleep 2", count=6,
                                                 cpu=0.5))
    peak = 0
    def done() -> bool:
        nonlocal peak
        states = task_states(cluster, job_id)
        peak = max(peak, sum(1 for s in states.values() if s in ("RUNNING", "LAUNCHED",
                                                                  "STARTING")))
        return job_state(cluster, job_id) == "SUCCEEDED"
    eventually(done, 120, "capped job SUCCEEDED", interval=0.1)
    assert 1 <= peak <= 2, f"{peak} tasks of 0.5 cpu ran at once in a pool limited to 1 cpu"


def test_preemption_frees_room_for_non_preemptible_work(cluster: UpCluster,
                                                        tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/elastic", str(write_pool(tmp_path, "elastic")))
    cluster.cli("respool", "create", "/reserved", str(write_pool(
        tmp_path, "reserved", cpu_res=1, mem_res=1024, disk_res=1000, cpu_limit=2)))
    hog = create(cluster, "/elastic", write_job(tmp_path, "hog", "sleep 300", count=4, cpu=0.5))
    eventually(lambda: list(task_states(cluster, hog).values()).count("RUNNING") == 4, 60,
               "the preemptible job fills the cluster")
    vip = create(cluster, "/reserved", write_job(tmp_path, "vip", "sleep 300", count=2, cpu=0.5,
                                                 preemptible=False, priority=10))
    eventually(lambda: list(task_states(cluster, vip).values()).count("RUNNING") == 2, 90,
               "the non-preemptible job runs after preemption")
    running_hog = list(task_states(cluster, hog).values()).count("RUNNING")
    assert running_hog <= 2
    preempted = [e for i in range(4) for e in cluster.client.get_pod_events(hog, i).result
                 if "PREEMPT" in e.reason or "preempt" in e.message.lower()]
    assert preempted or running_hog < 4


def test_bad_requests_get_clear_errors_and_change_nothing(cluster: UpCluster,
                                                          tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    before = cluster.cli("-j", "job", "query").stdout
    unknown_pool = cluster.cli("job", "create", "/nope",
                               str(write_job(tmp_path, "x", "true")), check=False)
    assert unknown_pool.returncode != 0 and "nope" in (unknown_pool.stderr + unknown_pool.stdout)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("name: [unclosed\n")
    invalid = cluster.cli("job", "create", "/e2e", str(bad_yaml), check=False)
    assert invalid.returncode == 4, invalid  # INVALID_ARGUMENT
    # The message names the file and the problem (with its place in the file).
    assert str(bad_yaml) in invalid.stderr and "invalid YAML" in invalid.stderr, invalid.stderr
    assert f"{bad_yaml}:2:" in invalid.stderr and "expected ',' or ']'" in invalid.stderr
    negative = write_job(tmp_path, "neg", "true", cpu=-1)
    neg = cluster.cli("job", "create", "/e2e", str(negative), check=False)
    assert neg.returncode != 0 and "cpuLimit" in (neg.stderr + neg.stdout)
    missing = cluster.cli("job", "get", "00000000-0000-4000-8000-000000000000", check=False)
    assert missing.returncode != 0 and "not found" in (missing.stderr + missing.stdout).lower()
    assert cluster.cli("-j", "job", "query").stdout == before


def test_maximum_running_instances_caps_a_batch_job(cluster: UpCluster, tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    job = write_job(tmp_path, "capped-sla", "sleep 1", count=6)
    job.write_text(job.read_text().replace("  preemptible: true\n",
                                           "  preemptible: true\n  maximumrunninginstances: 2\n"))
    job_id = create(cluster, "/e2e", job)
    peak = 0

    def done() -> bool:
        nonlocal peak
        states = task_states(cluster, job_id)
        peak = max(peak, sum(1 for s in states.values() if s not in ("INITIALIZED",
                                                                      "SUCCEEDED")))
        return job_state(cluster, job_id) == "SUCCEEDED"

    eventually(done, 120, "job SUCCEEDED", interval=0.1)
    assert 1 <= peak <= 2, f"{peak} instances in flight with maximumRunningInstances 2"


def test_max_running_time_kills_overdue_tasks(cluster: UpCluster, tmp_path: Path) -> None:
    cluster.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
    job = write_job(tmp_path, "slow", "sleep 300", count=2)
    job.write_text(job.read_text().replace("  preemptible: true\n",
                                           "  preemptible: true\n  maxrunningtime: 2\n"))
    job_id = create(cluster, "/e2e", job)
    eventually(lambda: job_state(cluster, job_id) == "KILLED", 60, "job KILLED by its deadline")
    info = cluster.client.get_task(job_id, 0).result.runtime
    assert info.reason == "DEADLINE_TIMEOUT_EXCEEDED" or "DEADLINE" in info.message.upper() \
        or S.Name(info.state) == "KILLED"
