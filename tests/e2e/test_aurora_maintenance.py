"""Issue 22 item 4, through the Thrift API against `peloton up` with two agents:

* endMaintenance works in every maintenance mode (NONE, SCHEDULED, DRAINING, DRAINED),
  including while a drain is in progress: the host is NONE at once, the drain stops (the
  task not drained yet keeps running), and the host takes new tasks again;
* explicit (and implicit) reconciliation never marks a task that was never launched LOST:
  a job that cannot place stays PENDING, a running one stays RUNNING.

A drain is held in progress by a task whose own slaPolicy names a coordinator: the bridge
consults none, so under slaDrainHosts such a task waits for the drain's timeout (an hour).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.test_aurora_client import modes, running, task_config, tasks
from tests.harness.aurora_apache_client import connect, generate
from tests.harness.cluster import UpCluster, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
RESOURCES = ["--agent-cpus", "2", "--agent-mem-mb", "2048", "--agent-disk-mb", "100000"]


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return generate(tmp_path_factory.mktemp("aurora-maint-client"))


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path_factory.mktemp("aurora-maint-up"), agents=2,
                        extra=RESOURCES).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def client(up: UpCluster, apache: tuple[Any, Any]) -> Iterator[Any]:
    conn = connect(apache[0], f"http://127.0.0.1:{up.aurora_port}/api", "binary")
    try:
        yield conn
    finally:
        conn._iprot.trans.close()


def holds(check: Callable[[], Any], seconds: float, what: str) -> None:
    """`check` stays truthy for `seconds` (what must *not* happen has had time to)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), f"no longer true: {what}"
        time.sleep(0.3)


def create(client: Any, t: Any, name: str, instances: int, *, cpus: float = 0.1,
           sla: Any = None, only_on: str = "") -> Any:
    task = task_config(t, name, "sleep 1000")
    task.resources = [t.Resource(numCpus=cpus), t.Resource(ramMb=32), t.Resource(diskMb=16)]
    task.slaPolicy = sla
    if only_on:
        task.constraints = [t.Constraint(name="hostname", constraint=t.TaskConstraint(
            value=t.ValueConstraint(negated=False, values={only_on})))]
    config = t.JobConfiguration(key=task.job, owner=task.owner, instanceCount=instances,
                                taskConfig=task)
    resp = client.createJob(config)
    assert resp.responseCode == t.ResponseCode.OK, resp.details
    return task.job


def kill(client: Any, t: Any, *jobs: Any) -> None:
    for job in jobs:
        assert client.killTasks(job, None, "done").responseCode == t.ResponseCode.OK
    for job in jobs:

        def stopped(job: Any = job) -> bool:
            return not running(client, t, job)

        eventually(stopped, 60, "every instance stopped")


def by_instance(client: Any, t: Any, job: Any) -> dict[int, Any]:
    return {tk.assignedTask.instanceId: tk for tk in running(client, t, job)}


def test_end_maintenance_in_every_mode_even_mid_drain(client: Any, apache: tuple[Any, Any]) -> None:
    t = apache[1]
    held = create(client, t, "held", 2, sla=t.SlaPolicy(coordinatorSlaPolicy=t.CoordinatorSlaPolicy(
        coordinatorUrl="http://coordinator", statusKey="drain")))
    first = eventually(lambda: (r := by_instance(client, t, held)) and len(r) == 2 and r, 90,
                       "both held instances RUNNING, one per host")
    host, other = first[0].assignedTask.slaveHost, first[1].assignedTask.slaveHost
    pinned = None
    try:
        # NONE and SCHEDULED.
        assert client.endMaintenance(t.Hosts(hostNames={host})).responseCode == t.ResponseCode.OK
        assert modes(client, t, host) == {host: t.MaintenanceMode.NONE}
        client.startMaintenance(t.Hosts(hostNames={host}))
        assert modes(client, t, host) == {host: t.MaintenanceMode.SCHEDULED}
        resp = client.endMaintenance(t.Hosts(hostNames={host}))
        assert [(s.host, s.mode) for s in resp.result.endMaintenanceResult.statuses] == [
            (host, t.MaintenanceMode.NONE)]

        # DRAINING, held in progress by the coordinator policy; a job only this host can run
        # waits meanwhile.
        never = t.SlaPolicy(countSlaPolicy=t.CountSlaPolicy(count=1, durationSecs=86_400))
        resp = client.slaDrainHosts(t.Hosts(hostNames={host}), never, 3600)
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        pinned = create(client, t, "pinned", 1, only_on=host)
        holds(lambda: modes(client, t, host) == {host: t.MaintenanceMode.DRAINING}, 3,
              f"{host} DRAINING")
        assert [tk.status for tk in tasks(client, t, pinned)] == [t.ScheduleStatus.PENDING]
        assert by_instance(client, t, held)[0].assignedTask.taskId == first[0].assignedTask.taskId

        resp = client.endMaintenance(t.Hosts(hostNames={host}))
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        assert [(s.host, s.mode) for s in resp.result.endMaintenanceResult.statuses] == [
            (host, t.MaintenanceMode.NONE)]
        assert modes(client, t, host) == {host: t.MaintenanceMode.NONE}
        # The host takes new tasks again, and the drain has stopped: the task it had not
        # drained yet is the same run, still RUNNING there.
        run = eventually(lambda: running(client, t, pinned), 60, "the pinned job RUNNING")
        assert run[0].assignedTask.slaveHost == host
        holds(lambda: (r := by_instance(client, t, held)).get(0) is not None
              and r[0].assignedTask.taskId == first[0].assignedTask.taskId, 3,
              "the held instance keeps its run on the host")

        # DRAINED: a forced drain empties the other host; endMaintenance brings it back.
        resp = client.drainHosts(t.Hosts(hostNames={other}))
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        eventually(lambda: modes(client, t, other) == {other: t.MaintenanceMode.DRAINED}, 60,
                   f"{other} DRAINED")
        resp = client.endMaintenance(t.Hosts(hostNames={other}))
        assert [(s.host, s.mode) for s in resp.result.endMaintenanceResult.statuses] == [
            (other, t.MaintenanceMode.NONE)]
        eventually(lambda: len(running(client, t, held)) == 2, 90,
                   "the drained instance RUNNING again")
    finally:
        client.endMaintenance(t.Hosts(hostNames={host, other}))
        kill(client, t, held, *([pinned] if pinned is not None else []))


def test_reconciliation_never_marks_a_task_never_launched_lost(
        client: Any, apache: tuple[Any, Any]) -> None:
    t = apache[1]
    live = create(client, t, "live", 1)
    huge = create(client, t, "huge", 1, cpus=64.0)  # more than any host: never placed
    try:
        before = eventually(lambda: running(client, t, live), 90, "the live job RUNNING")
        eventually(lambda: [tk.status for tk in tasks(client, t, huge)] == [
            t.ScheduleStatus.PENDING], 30, "the huge job PENDING")
        pending_id = tasks(client, t, huge)[0].assignedTask.taskId
        settings = t.ExplicitReconciliationSettings(batchSize=1)
        assert client.triggerExplicitTaskReconciliation(settings).responseCode == t.ResponseCode.OK
        assert client.triggerImplicitTaskReconciliation().responseCode == t.ResponseCode.OK

        def unchanged() -> bool:
            pending = tasks(client, t, huge)
            now = running(client, t, live)
            return (len(pending) == 1 and pending[0].status == t.ScheduleStatus.PENDING
                    and pending[0].assignedTask.taskId == pending_id
                    and pending[0].failureCount == 0
                    and all(e.status != t.ScheduleStatus.LOST for e in pending[0].taskEvents)
                    and [tk.assignedTask.taskId for tk in now] == [before[0].assignedTask.taskId])

        holds(unchanged, 8, "the pending task PENDING and the running one RUNNING")
    finally:
        kill(client, t, live, huge)
