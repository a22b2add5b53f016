"""An Apache-Thrift-generated Aurora client drives a job's whole life against `peloton up`
(issue 6/6): create by startJobUpdate, watch it RUNNING, update, pause/resume, roll back,
pulse, roll forward to a new command, kill — in binary and in JSON, the two protocols
Aurora clients speak.

Every task's main process needs a file its `prepare` process writes, and is declared
*before* it: only the Thermos `order` constraint makes it run second.  Were the order
ignored, main would fail at once and the task would show a failure count and a FAILED
event, which the test checks for."""

from __future__ import annotations

import json
from collections.abc import Iterator
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
    cluster = UpCluster(tmp_path_factory.mktemp("aurora-up"), agents=3, extra=RESOURCES).start()
    try:
        yield cluster
    finally:
        cluster.close()


def task_config(t: Any, name: str, command: str) -> Any:
    # main is listed first on purpose: the order constraint, not the list, must run prepare first.
    processes = [{"name": "main", "cmdline": f"test -e ready && {command}", "final": False},
                 {"name": "prepare", "cmdline": "echo prepared > ready", "final": False}]
    data = json.dumps({"task": {"name": name, "processes": processes,
                                "constraints": [{"order": ["prepare", "main"]}]}})
    return t.TaskConfig(
        job=t.JobKey(role="www", environment="devel", name=name), owner=t.Identity(user="www"),
        isService=True, priority=0, maxTaskFailures=1, production=False, tier="preemptible",
        resources=[t.Resource(numCpus=0.1), t.Resource(ramMb=32), t.Resource(diskMb=16)],
        constraints=[t.Constraint(name="host",
                                  constraint=t.TaskConstraint(limit=t.LimitConstraint(limit=1)))],
        executorConfig=t.ExecutorConfig(name="AuroraExecutor", data=data),
        container=t.Container(mesos=t.MesosContainer()))


def request(t: Any, task: Any, instances: int, pulse_ms: int | None = None,
            rollback: bool = False, only: tuple[int, int] | None = None,
            watch_ms: int = 100) -> Any:
    pinned = [t.Range(first=only[0], last=only[1])] if only else []
    settings = t.JobUpdateSettings(updateGroupSize=1, maxPerInstanceFailures=0,
                                   maxFailedInstances=0, minWaitInInstanceRunningMs=watch_ms,
                                   rollbackOnFailure=rollback, updateOnlyTheseInstances=pinned,
                                   waitForBatchCompletion=False,
                                   blockIfNoPulsesAfterMs=pulse_ms)
    return t.JobUpdateRequest(taskConfig=task, instanceCount=instances, settings=settings,
                              metadata=[])


def status(client: Any, key: Any) -> int:
    resp = client.getJobUpdateDetails(key, None)
    assert resp.responseCode == 1, resp.details
    return int(resp.result.getJobUpdateDetailsResult.detailsList[0].update.summary.state.status)


def tasks(client: Any, t: Any, key: Any) -> list[Any]:
    resp = client.getTasksWithoutConfigs(t.TaskQuery(jobKeys=[key]))
    assert resp.responseCode == 1, resp.details
    return list(resp.result.scheduleStatusResult.tasks)


def running(client: Any, t: Any, key: Any) -> list[Any]:
    return [tk for tk in tasks(client, t, key) if tk.status == t.ScheduleStatus.RUNNING]


def never_failed(t: Any, tk: Any) -> bool:
    """Whether a task's run never failed: prepare ran before main, as the order constraint says."""
    return tk.failureCount == 0 and all(e.status != t.ScheduleStatus.FAILED for e in tk.taskEvents)


def replaced(runs: list[Any], old_ids: dict[int, str]) -> list[Any]:
    """`runs` if every instance runs and none is a run in `old_ids`, else []."""
    fresh = [tk for tk in runs if tk.assignedTask.taskId not in old_ids.values()]
    return fresh if len(fresh) == len(old_ids) == len(runs) else []


def commands(client: Any, t: Any, key: Any) -> dict[int, str]:
    """Instance -> Thermos data of its RUNNING task (getTasksStatus keeps executorConfig)."""
    resp = client.getTasksStatus(t.TaskQuery(jobKeys=[key], statuses={t.ScheduleStatus.RUNNING}))
    assert resp.responseCode == t.ResponseCode.OK, resp.details
    return {tk.assignedTask.instanceId: tk.assignedTask.task.executorConfig.data
            for tk in resp.result.scheduleStatusResult.tasks}


@pytest.mark.parametrize("protocol", ["binary", "json"])
def test_aurora_client_drives_a_whole_job_life(up: UpCluster, apache: tuple[Any, Any],
                                               protocol: str) -> None:
    admin, t = apache
    client = connect(admin, f"http://127.0.0.1:{up.aurora_port}/api", protocol)
    name = f"web-{protocol}"
    try:
        resp = client.startJobUpdate(request(t, task_config(t, name, "sleep 1000"), 2), "deploy")
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        key = resp.result.startJobUpdateResult.key
        job = key.job
        eventually(lambda: len(running(client, t, job)) == 2, 90, "two instances RUNNING")
        first_runs = running(client, t, job)
        assert len({tk.assignedTask.slaveHost for tk in first_runs}) == 2, \
            "the host limit constraint spreads the instances"
        assert all(never_failed(t, tk) for tk in first_runs), first_runs
        eventually(lambda: status(client, key) == t.JobUpdateStatus.ROLLED_FORWARD, 60,
                   "first deployment ROLLED_FORWARD")
        summary = [s for s in client.getJobSummary("www").result.jobSummaryResult.summaries
                   if s.job.key.name == name]
        assert summary and summary[0].job.instanceCount == 2

        # An update, held by pulses: it waits until pulsed, pauses, resumes, rolls back.
        resp = client.startJobUpdate(request(t, task_config(t, name, "sleep 1001"), 3,
                                             pulse_ms=60_000), "scale up")
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        second = resp.result.startJobUpdateResult.key
        assert status(client, second) == t.JobUpdateStatus.ROLL_FORWARD_AWAITING_PULSE
        assert client.pulseJobUpdate(second).responseCode == t.ResponseCode.OK
        eventually(lambda: status(client, second) == t.JobUpdateStatus.ROLLING_FORWARD, 30,
                   "pulsed update rolling")
        assert client.pauseJobUpdate(second, "hold").responseCode == t.ResponseCode.OK
        assert status(client, second) == t.JobUpdateStatus.ROLL_FORWARD_PAUSED
        assert client.resumeJobUpdate(second, "go").responseCode == t.ResponseCode.OK
        assert client.rollbackJobUpdate(second, "changed my mind").responseCode == \
            t.ResponseCode.OK
        eventually(lambda: status(client, second) == t.JobUpdateStatus.ROLLED_BACK, 120,
                   "rolled back")
        eventually(lambda: len(running(client, t, job)) == 2, 90, "back to two instances")

        # An update to a new command that rolls forward: new runs of every instance, each
        # the successor of the run it replaced, running the new config.
        old_ids = {tk.assignedTask.instanceId: tk.assignedTask.taskId
                   for tk in running(client, t, job)}
        resp = client.startJobUpdate(request(t, task_config(t, name, "sleep 1002"), 2), "new cmd")
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        third = resp.result.startJobUpdateResult.key
        eventually(lambda: status(client, third) == t.JobUpdateStatus.ROLLED_FORWARD, 120,
                   "new command ROLLED_FORWARD")
        new_runs = eventually(lambda: replaced(running(client, t, job), old_ids), 60,
                              "both instances RUNNING in new runs")
        assert sorted(tk.assignedTask.instanceId for tk in new_runs) == [0, 1], new_runs
        for tk in new_runs:
            assert tk.ancestorId == old_ids[tk.assignedTask.instanceId], tk
            assert never_failed(t, tk), tk
        data = commands(client, t, job)
        assert sorted(data) == [0, 1] and all("sleep 1002" in d for d in data.values()), data
        groups = list(client.getConfigSummary(job).result.configSummaryResult.summary.groups)
        assert len(groups) == 1 and "sleep 1002" in groups[0].config.executorConfig.data, groups

        # A stale update id is refused and changes nothing.
        stale = client.pauseJobUpdate(t.JobUpdateKey(job=job, id=key.id), "old")
        assert stale.responseCode == t.ResponseCode.INVALID_REQUEST

        updates = client.getJobUpdateSummaries(t.JobUpdateQuery(jobKey=job)).result
        ids = [s.key.id for s in updates.getJobUpdateSummariesResult.updateSummaries]
        assert ids[:3] == [third.id, second.id, key.id]

        assert client.killTasks(job, [0], "one").responseCode == t.ResponseCode.OK
        eventually(lambda: {tk.assignedTask.instanceId: tk.status
                            for tk in tasks(client, t, job)}.get(0) == t.ScheduleStatus.KILLED,
                   60, "instance 0 KILLED")
        assert client.killTasks(job, None, "all").responseCode == t.ResponseCode.OK
        eventually(lambda: not running(client, t, job), 60, "every instance stopped")
    finally:
        client._iprot.trans.close()


def instance_events(client: Any, key: Any) -> set[int]:
    """Instances the update reported events for."""
    resp = client.getJobUpdateDetails(key, None)
    assert resp.responseCode == 1, resp.details
    return {e.instanceId for e in resp.result.getJobUpdateDetailsResult.detailsList[0].instanceEvents}


def task_ids(client: Any, t: Any, key: Any) -> dict[int, str]:
    return {tk.assignedTask.instanceId: tk.assignedTask.taskId for tk in running(client, t, key)}


@pytest.mark.parametrize("protocol", ["binary", "json"])
def test_updates_touch_exactly_the_instances_whose_config_changes(
        up: UpCluster, apache: tuple[Any, Any], protocol: str) -> None:
    """Issue 11 item 5, as Aurora: a redeploy of the config in place touches nothing; an
    update pinned to instance 1 touches only it, and so does its rollback."""
    admin, t = apache
    client = connect(admin, f"http://127.0.0.1:{up.aurora_port}/api", protocol)
    name = f"exact-{protocol}"
    job = t.JobKey(role="www", environment="devel", name=name)
    try:
        config = t.JobConfiguration(key=job, owner=t.Identity(user="www"), instanceCount=3,
                                    taskConfig=task_config(t, name, "sleep 1000"))
        assert client.createJob(config).responseCode == t.ResponseCode.OK
        eventually(lambda: len(running(client, t, job)) == 3, 90, "three instances RUNNING")
        before = task_ids(client, t, job)

        same = client.startJobUpdate(request(t, task_config(t, name, "sleep 1000"), 3), "same")
        assert same.responseCode == t.ResponseCode.OK, same.details
        noop = same.result.startJobUpdateResult.key
        eventually(lambda: status(client, noop) == t.JobUpdateStatus.ROLLED_FORWARD, 60,
                   "the redeploy ROLLED_FORWARD")
        assert instance_events(client, noop) == set()
        assert task_ids(client, t, job) == before

        # Pinned to instance 1, to a command that fails inside the watch time: the update
        # rolls itself back, and neither way touches instances 0 and 2.
        pinned = client.startJobUpdate(request(t, task_config(t, name, "sleep 2; exit 1"), 3,
                                               only=(1, 1), watch_ms=5000, rollback=True), "pin 1")
        assert pinned.responseCode == t.ResponseCode.OK, pinned.details
        key = pinned.result.startJobUpdateResult.key
        eventually(lambda: status(client, key) == t.JobUpdateStatus.ROLLED_BACK, 120,
                   "the failing pinned update rolled back")
        def three() -> dict[int, str] | None:
            ids = task_ids(client, t, job)
            return ids if len(ids) == 3 else None

        after = eventually(three, 60, "three instances RUNNING after the rollback")
        assert (after[0], after[2]) == (before[0], before[2]), "an unpinned instance restarted"
        assert after[1] != before[1]
        assert instance_events(client, key) == {1}
        assert all("sleep 1000" in d for d in commands(client, t, job).values())

        # killTasks answers "No tasks to kill." only once nothing of the job is live.
        assert client.killTasks(job, None, "all").responseCode == t.ResponseCode.OK
        eventually(lambda: not running(client, t, job), 60, "every instance stopped")
        gone = client.killTasks(job, None, "again")
        assert gone.responseCode == t.ResponseCode.OK
    finally:
        client._iprot.trans.close()


def modes(client: Any, t: Any, *hosts: str) -> dict[str, int]:
    resp = client.maintenanceStatus(t.Hosts(hostNames=set(hosts)))
    assert resp.responseCode == t.ResponseCode.OK, resp.details
    return {s.host: s.mode for s in resp.result.maintenanceStatusResult.statuses}


def test_sla_drain_hosts_with_auroras_default_rules(up: UpCluster, apache: tuple[Any, Any]) -> None:
    """slaDrainHosts through the Apache Thrift client: bad input is refused naming the field
    and changes nothing; a small non-production job is not checked (Aurora's defaults: jobs
    of 20+ active instances, production tiers), so its host drains at once even under a
    policy nothing could meet, and comes back with endMaintenance."""
    admin, t = apache
    client = connect(admin, f"http://127.0.0.1:{up.aurora_port}/api", "binary")
    name = "sladrain-thrift"
    try:
        resp = client.startJobUpdate(request(t, task_config(t, name, "sleep 1000"), 2), "deploy")
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        job = resp.result.startJobUpdateResult.key.job
        runs = eventually(lambda: (r := running(client, t, job)) and len(r) == 2 and r, 90,
                          "two instances RUNNING")
        host = runs[0].assignedTask.slaveHost
        never = t.SlaPolicy(countSlaPolicy=t.CountSlaPolicy(count=1, durationSecs=86_400))
        for policy, timeout, named in (
                (t.SlaPolicy(percentageSlaPolicy=t.PercentageSlaPolicy(percentage=150.0,
                                                                       durationSecs=0)),
                 60, "defaultSlaPolicy.percentageSlaPolicy.percentage"),
                (t.SlaPolicy(coordinatorSlaPolicy=t.CoordinatorSlaPolicy(
                    coordinatorUrl="http://coordinator", statusKey="drain")), 60,
                 "defaultSlaPolicy.coordinatorSlaPolicy"),
                (never, -1, "timeoutSecs")):
            bad = client.slaDrainHosts(t.Hosts(hostNames={host}), policy, timeout)
            assert bad.responseCode == t.ResponseCode.INVALID_REQUEST, bad
            assert named in bad.details[0].message, bad.details
        assert modes(client, t, host) == {host: t.MaintenanceMode.NONE}

        resp = client.slaDrainHosts(t.Hosts(hostNames={host}), never, 3600)
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        eventually(lambda: modes(client, t, host) == {host: t.MaintenanceMode.DRAINED}, 60,
                   f"{host} DRAINED")
        assert all(tk.assignedTask.slaveHost != host for tk in running(client, t, job))
        resp = client.endMaintenance(t.Hosts(hostNames={host}))
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        assert modes(client, t, host) == {host: t.MaintenanceMode.NONE}
        eventually(lambda: len(running(client, t, job)) == 2, 90, "both instances RUNNING again")
        assert client.killTasks(job, None, "done").responseCode == t.ResponseCode.OK
        eventually(lambda: not running(client, t, job), 60, "every instance stopped")
    finally:
        client._iprot.trans.close()


def test_unsupported_methods_answer_invalid_request(up: UpCluster,
                                                    apache: tuple[Any, Any]) -> None:
    admin, t = apache
    client = connect(admin, f"http://127.0.0.1:{up.aurora_port}/api", "binary")
    try:
        resp = client.snapshot()
        assert resp.responseCode == t.ResponseCode.INVALID_REQUEST
        assert "snapshot" in resp.details[0].message
    finally:
        client._iprot.trans.close()


def test_quota_is_per_role_and_holds_a_roles_tasks(up: UpCluster, apache: tuple[Any, Any]) -> None:
    """Issue 22 item 4: setQuota/getQuota are per role (a pool per role, made on first use),
    and a role's tasks beyond its quota wait PENDING while another role's run."""
    admin, t = apache
    client = connect(admin, f"http://127.0.0.1:{up.aurora_port}/api", "binary")

    def cpus(role: str) -> float:
        resp = client.getQuota(role)
        assert resp.responseCode == t.ResponseCode.OK, resp.details
        num_cpus: float = resp.result.getQuotaResult.quota.numCpus
        return num_cpus

    def job_of(role: str) -> Any:
        task = task_config(t, "quota", "sleep 1000")
        task.job = t.JobKey(role=role, environment="devel", name="quota")
        task.owner = t.Identity(user=role)
        task.constraints = []
        config = t.JobConfiguration(key=task.job, owner=task.owner, instanceCount=2, taskConfig=task)
        assert client.createJob(config).responseCode == t.ResponseCode.OK
        return task.job

    def statuses(job: Any) -> list[int]:
        return sorted(tk.status for tk in tasks(client, t, job))

    try:
        tight = t.ResourceAggregate(resources=[t.Resource(numCpus=0.15)])
        assert client.setQuota("tight", tight).responseCode == t.ResponseCode.OK
        assert cpus("tight") == pytest.approx(0.15) and cpus("roomy") == 0.0
        roomy = t.ResourceAggregate(resources=[t.Resource(numCpus=4.0)])
        assert client.setQuota("roomy", roomy).responseCode == t.ResponseCode.OK
        assert cpus("roomy") == 4.0 and cpus("tight") == pytest.approx(0.15)

        held, free = job_of("tight"), job_of("roomy")
        eventually(lambda: len(running(client, t, free)) == 2, 90, "both roomy instances RUNNING")
        eventually(lambda: statuses(held) == sorted([t.ScheduleStatus.PENDING,
                                                     t.ScheduleStatus.RUNNING]), 60,
                   "one tight instance RUNNING, the other PENDING within the role's quota")
        assert client.setQuota("tight", roomy).responseCode == t.ResponseCode.OK
        eventually(lambda: len(running(client, t, held)) == 2, 90,
                   "the second tight instance runs once the quota allows it")
        for job in (held, free):
            assert client.killTasks(job, None, "done").responseCode == t.ResponseCode.OK

            def stopped(job: Any = job) -> bool:
                return not running(client, t, job)

            eventually(stopped, 60, "every instance stopped")
    finally:
        client._iprot.trans.close()
