"""Recovery after kill -9 (on each store), host maintenance, GPU hosts and per-host limits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.e2e.conftest import write_job, write_pool
from tests.e2e.stores import migrated_store
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


@pytest.mark.parametrize("backend", [
    "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("cassandra", marks=pytest.mark.cassandra)])
def test_kill_9_of_peloton_up_recovers_jobs_and_adopts_running_tasks(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    store = migrated_store(request, backend)
    up = UpCluster(tmp_path, agents=1,
                   extra=[*RESOURCES, *(["--store", store] if store else [])]).start()
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


#: Instance 0's first run fails at once (its retry, run 2, succeeds); every other run sleeps.
FAIL_FIRST_RUN = ('if [ "$PELOTON_INSTANCE_ID" = 0 ] && [ "${PELOTON_TASK_ID##*-}" = 1 ]; '
                  'then echo "first run fails" >&2; exit 3; fi; sleep 7')


def runs_in_order(up: UpCluster, job_id: str, inst: int) -> list[int]:
    """Run numbers of an instance's pod events, oldest first, consecutive repeats merged."""
    events = list(up.client.get_pod_events(job_id, inst).result)  # newest first
    out: list[int] = []
    for ev in reversed(events):
        run = int(ev.taskId.value.rsplit("-", 1)[1])
        if not out or out[-1] != run:
            out.append(run)
    return out


@pytest.mark.timeout(90)
def test_kill_9_while_tasks_are_queued_and_retrying(tmp_path: Path) -> None:
    started = time.monotonic()
    up = UpCluster(tmp_path, agents=1, extra=RESOURCES).start()
    try:
        # 0.25 cpu tasks in a pool limited to 1 cpu: 4 of the 6 run at once, 2 wait.
        up.cli("respool", "create", "/capped", str(write_pool(tmp_path, "capped", cpu_limit=1)))
        job_id = create(up, "/capped", write_job(tmp_path, "queued", FAIL_FIRST_RUN, count=6,
                                                 cpu=0.25, max_failures=2))

        def crash_point() -> tuple[dict[int, str], list[int]] | None:
            tasks = up.client.list_tasks(job_id).result.value
            running = {i: t.runtime.mesosTaskId.value for i, t in tasks.items()
                       if S.Name(t.runtime.state) == "RUNNING"}
            queued = [i for i, t in tasks.items()
                      if S.Name(t.runtime.state) in ("INITIALIZED", "PENDING", "READY")]
            failed_once = tasks[0].runtime.failureCount == 1 if 0 in tasks else False
            ok = failed_once and len(running) == 4 and queued
            return (running, queued) if ok else None

        running, queued = eventually(crash_point, 30,
                                     "instance 0 failed once, 4 running, some queued",
                                     interval=0.1)
        pids = eventually(lambda: (p := {r: task_pids(tmp_path).get(r)
                                         for r in running.values()}) and all(p.values()) and p,
                          10, "pids of the running tasks")
        up.kill9()
        assert all(alive(pid) for pid in pids.values() if pid), "tasks outlive the scheduler"
        up.start()
        eventually(lambda: job_state(up, job_id) == "SUCCEEDED", 45, "job SUCCEEDED")

        final = up.client.list_tasks(job_id).result.value
        for inst, run_id in running.items():
            # Adopted: the run that was running at the crash is the one that finished.
            assert final[inst].runtime.mesosTaskId.value == run_id, (inst, run_id)
            assert S.Name(final[inst].runtime.state) == "SUCCEEDED"
        assert {r: task_pids(tmp_path).get(r) for r in running.values()} == pids, \
            "an adopted task was started again"
        for inst in range(6):
            runs = runs_in_order(up, job_id, inst)
            assert runs == sorted(set(runs)), f"instance {inst} reused a run id: {runs}"
            if inst in running:
                assert runs[-1] == int(running[inst].rsplit("-", 1)[1])
        zero = runs_in_order(up, job_id, 0)
        assert zero == [1, 2] and final[0].runtime.failureCount == 1
        first = [e for e in up.client.get_pod_events(job_id, 0).result
                 if e.taskId.value == f"{job_id}-0-1"]
        assert any(e.actualState == "FAILED" and "exited with code 3" in e.message
                   for e in first), first
        for inst in (i for i in queued if i != 0):
            # Queued at the crash (never launched): recovered with its first run, run once.
            assert runs_in_order(up, job_id, inst) == [1], inst
        assert time.monotonic() - started < 60
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


def pending_reasons(up: UpCluster, job_id: str) -> dict[int, str]:
    """instance -> why it waits (v1alpha QueryPods), for pods not running yet."""
    pods = up.client.query_pods(job_id, pod_pb2.QuerySpec(), summary_only=True).pods
    return {int(p.spec.pod_name.value.rsplit("-", 1)[1]): p.status.reason for p in pods
            if p.status.state != pod_pb2.POD_STATE_RUNNING}


def test_gpu_hosts_only_run_gpu_tasks(tmp_path: Path) -> None:
    up = UpCluster(tmp_path, agents=1, extra=RESOURCES).start()
    try:
        up.add_agent("gpuhost", "--cpus", "2", "--mem-mb", "4096", "--disk-mb", "100000",
                     "--gpus", "1")
        eventually(lambda: "gpuhost" in up.cli("host", "query").stdout, 30, "gpu host joined")
        up.cli("respool", "create", "/e2e", str(write_pool(tmp_path, "e2e", gpu_limit=4)))
        gpu = create(up, "/e2e", write_job(tmp_path, "gpu", "sleep 60", count=1, cpu=0.25, gpu=1))
        eventually(lambda: set(task_states(up, gpu).values()) == {"RUNNING"}, 60, "gpu task runs")
        # More plain work (10 x 0.25 cpu) than the plain host's 2 cpus hold, while the gpu
        # host has 1.75 cpus free: without GPU reservation 2 would land on the gpu host.
        plain = create(up, "/e2e", write_job(tmp_path, "plain", "sleep 60", count=10, cpu=0.25))
        eventually(lambda: list(task_states(up, plain).values()).count("RUNNING") == 8, 60,
                   "8 plain tasks run")
        why = eventually(lambda: (r := pending_reasons(up, plain)) and len(r) == 2 and all(
            "gpu host kept for gpu tasks" in m for m in r.values()) and r, 30,
            "the 2 others pending, refused by the gpu host")
        states = task_states(up, plain)
        assert [states[i] for i in sorted(why)] == ["PENDING", "PENDING"], states
        assert set(hosts_of(up, gpu).values()) == {"gpuhost"}
        placed = {h for i, h in hosts_of(up, plain).items() if i not in why}
        assert placed == {"localhost"}, "plain tasks must not use the gpu host"
        assert not any(hosts_of(up, plain)[i] for i in why), "pending tasks have no host"
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
