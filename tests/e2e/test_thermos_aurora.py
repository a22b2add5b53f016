"""Thermos semantics of Aurora tasks on a real `peloton up`, through the Aurora Thrift API
(issue 2/6, item 2): ordered processes and a final process run in order, and a process with
max_failures=2 is retried once before the task fails.  The order is read where users read
it: the task's log (`peloton task logs`, which the runner's prefixed lines go to) and the
per-process logs in the sandbox (.logs/<process>/<run>/, as Thermos lays them out)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.aurora_apache_client import connect, generate
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
RESOURCES = ["--agent-cpus", "2", "--agent-mem-mb", "4096", "--agent-disk-mb", "100000"]


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return generate(tmp_path_factory.mktemp("aurora-client"))


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path_factory.mktemp("thermos-up"), agents=1, extra=RESOURCES).start()
    try:
        yield cluster
    finally:
        cluster.close()


def batch_job(t: Any, name: str, processes: list[dict[str, Any]], **task: Any) -> Any:
    """A one-instance batch job whose task is these Thermos processes, as Aurora's client sends it."""
    data = json.dumps({"role": "www", "environment": "devel", "name": name,
                       "task": {"name": name, "processes": processes, **task}})
    key = t.JobKey(role="www", environment="devel", name=name)
    config = t.TaskConfig(
        job=key, owner=t.Identity(user="www"), isService=False, priority=0, maxTaskFailures=1,
        production=False, tier="preemptible",
        resources=[t.Resource(numCpus=0.1), t.Resource(ramMb=64), t.Resource(diskMb=16)],
        executorConfig=t.ExecutorConfig(name="AuroraExecutor", data=data),
        container=t.Container(mesos=t.MesosContainer()))
    return t.JobConfiguration(key=key, owner=t.Identity(user="www"), instanceCount=1,
                              taskConfig=config)


def ended(client: Any, t: Any, key: Any, status: int) -> Any:
    """The job's task in `status`, if there is one."""
    resp = client.getTasksWithoutConfigs(t.TaskQuery(jobKeys=[key]))
    assert resp.responseCode == t.ResponseCode.OK, resp.details
    return next((tk for tk in resp.result.scheduleStatusResult.tasks if tk.status == status), None)


def sandbox(up: UpCluster, task_id: str) -> Path:
    found = list(up.base.rglob(f"sandboxes/{task_id}"))
    assert len(found) == 1, (task_id, found)
    return found[0]


def task_log(up: UpCluster, task_id: str) -> list[str]:
    """The task's stdout as `peloton task logs JOB 0` prints it."""
    job_id = task_id.rsplit("-", 2)[0]
    return up.cli("task", "logs", job_id, "0").stdout.splitlines()


def test_thermos_order_final_processes_and_retries_through_the_aurora_api(
        up: UpCluster, apache: tuple[Any, Any]) -> None:
    admin, t = apache
    client = connect(admin, f"http://127.0.0.1:{up.aurora_port}/api", "binary")
    try:
        ordered = batch_job(t, "ordered", [
            # main is declared first: only the order constraint makes it run after prepare.
            {"name": "main", "cmdline": "cat ready && echo main {{mesos.instance}}", "final": False},
            {"name": "prepare", "cmdline": "echo prepared > ready && echo prepare"},
            {"name": "cleanup", "cmdline": "echo cleanup", "final": True},
        ], constraints=[{"order": ["prepare", "main"]}])
        flaky = batch_job(t, "flaky", [
            {"name": "flaky", "cmdline": "echo try; exit 1", "max_failures": 2, "min_duration": 1},
        ])
        for config in (ordered, flaky):
            resp = client.createJob(config)
            assert resp.responseCode == t.ResponseCode.OK, resp.details

        done = eventually(lambda: ended(client, t, ordered.key, t.ScheduleStatus.FINISHED), 120,
                          "the ordered task FINISHED")
        task_id = done.assignedTask.taskId
        lines = [line for line in task_log(up, task_id) if line.startswith("[")]
        assert lines == ["[prepare] prepare", "[main] prepared", "[main] main 0", "[cleanup] cleanup"]
        box = sandbox(up, task_id)
        assert (box / ".logs/main/0/stdout").read_text() == "prepared\nmain 0\n"
        assert sorted(p.name for p in (box / ".logs").iterdir()) == ["cleanup", "main", "prepare"]

        failed = eventually(lambda: ended(client, t, flaky.key, t.ScheduleStatus.FAILED), 120,
                            "the flaky task FAILED")
        task_id = failed.assignedTask.taskId
        box = sandbox(up, task_id)
        assert sorted(p.name for p in (box / ".logs/flaky").iterdir()) == ["0", "1"]  # one retry
        log = task_log(up, task_id)
        assert [line for line in log if line.startswith("[")] == ["[flaky] try", "[flaky] try"]
        events = "\n".join(line for line in log if line.startswith("thermos:"))
        assert "flaky: run 0 exited 1: failure 1 of 2: retried in 1s" in events
        assert "flaky: run 1 exited 1: failed for good (failure 2 of 2)" in events
        assert "task failed" in events
        assert any(e.status == t.ScheduleStatus.FAILED for e in failed.taskEvents)
    finally:
        client._iprot.trans.close()
