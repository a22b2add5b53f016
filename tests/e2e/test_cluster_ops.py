"""Recovery after kill -9, host maintenance, GPU hosts and per-host limits (issue 4/6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import create, job_state, task_states
from tests.harness.cluster import UpCluster, alive, eventually, task_pids

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
S = task_pb2.TaskState
RESOURCES = ["--agent-cpus", "2", "--agent-mem-mb", "4096", "--agent-disk-mb", "100000"]

HOST_LIMIT = """\
  labels:
  - key: app
    value: {app}
  constraint:
    type: 1
    labelconstraint:
      kind: 1
      condition: 1
      requirement: 1
      label:
        key: app
        value: {app}
"""


def hosts_of(up: UpCluster, job_id: str) -> dict[int, str]:
    tasks = up.client.list_tasks(job_id).result.value
    return {i: t.runtime.host for i, t in tasks.items()}


def test_kill_9_of_peloton_up_recovers_jobs_and_adopts_running_tasks(tmp_path: Path) -> None:
    up = UpCluster(tmp_path, agents=1, extra=RESOURCES).start()
    try:
        up.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
        job_id = create(up, "/e2e", write_job(tmp_path, "survivor", "sleep 8", count=3))
        eventually(lambda: set(task_states(up, job_id).values()) == {"RUNNING"}, 60,
                   "all RUNNING")
        before = eventually(lambda: (p := {k: v for k, v in task_pids(tmp_path).items()
                                           if k.startswith(job_id)}) and len(p) == 3 and p,
                            30, "pids recorded")
        up.kill9()
        assert all(alive(pid) for pid in before.values()), "tasks must outlive the scheduler"
        up.start()
        eventually(lambda: job_state(up, job_id) == "SUCCEEDED", 90, "job SUCCEEDED after restart")
        after = {k: v for k, v in task_pids(tmp_path).items() if k.startswith(job_id)}
        assert after == before, "adopted tasks must not be started again"
        for inst in range(3):
            runs = {e.taskId.value for e in up.client.get_pod_events(job_id, inst).result}
            assert runs == {f"{job_id}-{inst}-1"}, runs
    finally:
        up.close()


def test_host_maintenance_drains_tasks_then_host_goes_down_and_comes_back(tmp_path: Path) -> None:
    up = UpCluster(tmp_path, agents=2, extra=RESOURCES).start()
    try:
        up.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
        job_id = create(up, "/e2e", write_job(tmp_path, "movers", "sleep 300", count=2,
                                              extra=HOST_LIMIT.format(app="movers")))
        eventually(lambda: set(task_states(up, job_id).values()) == {"RUNNING"}, 60,
                   "all RUNNING")
        victim = hosts_of(up, job_id)[0]
        up.cli("host", "maintenance", "start", victim)
        eventually(lambda: victim in up.cli("host", "query", "-s", "HOST_STATE_DOWN").stdout,
                   90, "host DOWN")
        placed = eventually(lambda: (h := hosts_of(up, job_id)) and victim not in h.values()
                            and set(task_states(up, job_id).values()) <= {"RUNNING", "PENDING"}
                            and h, 60, "tasks moved off the host")
        assert victim not in placed.values()
        up.cli("host", "maintenance", "complete", victim)
        eventually(lambda: victim in up.cli("host", "query", "-s", "HOST_STATE_UP").stdout, 30,
                   "host UP again")
        eventually(lambda: set(task_states(up, job_id).values()) == {"RUNNING"}, 60,
                   "both instances running again, one per host")
        assert len(set(hosts_of(up, job_id).values())) == 2
    finally:
        up.close()


def test_gpu_hosts_only_run_gpu_tasks(tmp_path: Path) -> None:
    up = UpCluster(tmp_path, agents=1, extra=RESOURCES).start()
    try:
        up.add_agent("gpuhost", "--cpus", "2", "--mem-mb", "4096", "--disk-mb", "100000",
                     "--gpus", "1")
        eventually(lambda: "gpuhost" in up.cli("host", "query").stdout, 30, "gpu host joined")
        up.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e", gpu_limit=4)))
        plain = create(up, "/e2e", write_job(tmp_path, "plain", "sleep 60", count=6, cpu=0.2))
        gpu = create(up, "/e2e", write_job(tmp_path, "gpu", "sleep 60", count=1, cpu=0.2, gpu=1))
        eventually(lambda: set(task_states(up, gpu).values()) == {"RUNNING"}, 60, "gpu task runs")
        eventually(lambda: set(task_states(up, plain).values()) == {"RUNNING"}, 60,
                   "plain tasks run")
        assert set(hosts_of(up, gpu).values()) == {"gpuhost"}
        assert "gpuhost" not in set(hosts_of(up, plain).values())
    finally:
        up.close()


def test_at_most_one_instance_per_host(tmp_path: Path) -> None:
    up = UpCluster(tmp_path, agents=3, extra=RESOURCES).start()
    try:
        up.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e")))
        job_id = create(up, "/e2e", write_job(tmp_path, "spread", "sleep 60", count=4, cpu=0.1,
                                              extra=HOST_LIMIT.format(app="spread")))
        eventually(lambda: list(task_states(up, job_id).values()).count("RUNNING") == 3, 60,
                   "three instances running")
        hosts = [h for i, h in hosts_of(up, job_id).items()
                 if task_states(up, job_id)[i] == "RUNNING"]
        assert len(hosts) == len(set(hosts)) == 3
        pending = [i for i, s in task_states(up, job_id).items() if s != "RUNNING"]
        assert len(pending) == 1
    finally:
        up.close()
