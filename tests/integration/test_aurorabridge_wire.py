"""An independent Aurora client (Apache Thrift, compiler-generated) drives jobs through the bridge.

The bridge runs as a real process (`peloton aurorabridge`) in front of a
FakePeloton served on real gRPC; each test runs in both Thrift protocols
Aurora clients use.  Assertions look at what an Aurora user sees and at
what the fake received (the Aurora -> Peloton mapping).  To run against a
real cluster, replace the `cluster` fixture (addresses of `peloton up`);
the assertions on `cluster.fake` are the mapping checks a fake allows.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aurorabridge import opaque_data
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from tests.harness.aurora_apache_client import connect, generate
from tests.harness.fake_peloton import FakePeloton
from tests.harness.fake_peloton_grpc import serve
from tests.harness.procs import PELOTON, OutputTail, free_port, stop, wait_for

pytestmark = pytest.mark.timeout(120)
PROTOCOLS = ("binary", "json")


@dataclass
class Cluster:
    """Where the bridge listens, and the fake behind it (None against a real cluster)."""

    url: str
    fake: FakePeloton | None


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    return generate(tmp_path_factory.mktemp("aurora-client"))


def start_bridge(args: list[str]) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen(
        [PELOTON, "aurorabridge", "--host", "127.0.0.1", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    OutputTail(proc).wait_for("serving Aurora's API", 30)
    return proc, port


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    fake = FakePeloton(hosts=("host-1", "host-2"))
    server = serve(fake)
    address = f"127.0.0.1:{server.port}"
    proc, port = start_bridge(
        ["--jobmgr", address, "--resmgr", address, "--hostmgr", address, "--pulse-check-interval", "0.05"]
    )
    try:
        yield Cluster(f"http://127.0.0.1:{port}/api", fake)
    finally:
        stop(proc)
        server.stop(0)


@pytest.fixture(params=PROTOCOLS)
def aurora(
    request: pytest.FixtureRequest, apache: tuple[Any, Any], cluster: Cluster
) -> Iterator[tuple[Any, Any, str]]:
    admin, t = apache
    client = connect(admin, cluster.url, request.param)
    yield client, t, request.param
    client._iprot.trans.close()  # THttpClient keeps its last connection open


def task_config(t: Any, name: str, *, cpus: float = 0.5, pulse_ports: bool = True) -> Any:
    processes = [
        {"name": "setup", "cmdline": "echo setup > ready", "final": False},
        {"name": "serve", "cmdline": "exec python3 -m http.server {{thermos.ports[http]}}", "final": False},
    ]
    data = json.dumps(
        {"task": {"name": name, "processes": processes, "constraints": [{"order": ["setup", "serve"]}]}}
    )
    return t.TaskConfig(
        job=t.JobKey(role="www", environment="devel", name=name),
        owner=t.Identity(user="www"),
        isService=True,
        priority=0,
        maxTaskFailures=1,
        production=False,
        tier="preemptible",
        resources=[
            t.Resource(numCpus=cpus),
            t.Resource(ramMb=128),
            t.Resource(diskMb=256),
            t.Resource(namedPort="http"),
        ],
        constraints=[
            t.Constraint(name="host", constraint=t.TaskConstraint(limit=t.LimitConstraint(limit=1))),
            t.Constraint(
                name="rack",
                constraint=t.TaskConstraint(value=t.ValueConstraint(negated=False, values=["a", "b"])),
            ),
        ],
        executorConfig=t.ExecutorConfig(name="AuroraExecutor", data=data),
        metadata=[t.Metadata(key="team", value="web")],
        container=t.Container(mesos=t.MesosContainer()),
    )


def update_request(t: Any, task: Any, instances: int, pulse_ms: int | None = None) -> Any:
    settings = t.JobUpdateSettings(
        updateGroupSize=1,
        maxPerInstanceFailures=0,
        maxFailedInstances=0,
        minWaitInInstanceRunningMs=100,
        rollbackOnFailure=False,
        updateOnlyTheseInstances=[],
        waitForBatchCompletion=False,
        blockIfNoPulsesAfterMs=pulse_ms,
    )
    return t.JobUpdateRequest(
        taskConfig=task,
        instanceCount=instances,
        settings=settings,
        metadata=[t.Metadata(key="sha", value="1234")],
    )


def update_status(client: Any, key: Any) -> int:
    resp = client.getJobUpdateDetails(key, None)
    assert resp.responseCode == 1, resp.details
    return int(resp.result.getJobUpdateDetailsResult.detailsList[0].update.summary.state.status)


def eventually(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    wait_for(predicate, timeout, what, interval=0.05)


def test_a_job_lifecycle_maps_onto_peloton(aurora: tuple[Any, Any, str], cluster: Cluster) -> None:
    client, t, protocol = aurora
    fake = cluster.fake
    assert fake is not None
    name = f"hello-{protocol}"
    resp = client.startJobUpdate(update_request(t, task_config(t, name), 2), "first deploy")
    assert resp.responseCode == t.ResponseCode.OK, resp.details
    key = resp.result.startJobUpdateResult.key
    assert key.job.name == name and key.id

    created = fake.calls_of("create_stateless_job")[-1]
    spec = created["spec"]
    assert spec.name == f"www/devel/{name}" and spec.instance_count == 2
    assert {(lab.key, lab.value) for lab in spec.labels} >= {
        ("aurora_job_key_role", "www"),
        ("aurora_job_key_environment", "devel"),
        ("aurora_job_key_name", name),
        ("aurora_bridge", "com.uber.peloton.internal.aurorabridge"),
    }
    pool = next(p for p in fake.pools.values() if p.path.value == "/AuroraBridge/www")  # the role's pool
    assert spec.respool_id.value == pool.id.value
    container = spec.default_spec.containers[0]
    assert (
        container.resource.cpu_limit,
        container.resource.mem_limit_mb,
        container.resource.disk_limit_mb,
    ) == (0.5, 128, 256)
    assert [(p.name, p.env_name) for p in container.ports] == [("http", "PORT_HTTP")]
    command = container.entrypoint.value
    assert command.index("echo setup > ready") < command.index("http.server ${PORT_HTTP}")
    assert spec.default_spec.mesos_spec.shell
    constraint = spec.default_spec.constraint
    assert constraint.type == pod_pb2.Constraint.CONSTRAINT_TYPE_AND
    limit, rack = constraint.and_constraint.constraints
    assert limit.label_constraint.label.key == "aurora_job_key" and limit.label_constraint.requirement == 1
    assert [c.label_constraint.label.value for c in rack.or_constraint.constraints] == ["a", "b"]
    assert ("org.apache.aurora.metadata.team", "web") in {
        (lab.key, lab.value) for lab in spec.default_spec.labels
    }
    assert created["create_spec"].batch_size == 1
    assert opaque_data.parse(created["opaque_data"]).update_id == key.id

    query = t.TaskQuery(jobKeys=[key.job])
    tasks = client.getTasksWithoutConfigs(query).result.scheduleStatusResult.tasks
    assert sorted(tk.assignedTask.instanceId for tk in tasks) == [0, 1]
    assert {tk.status for tk in tasks} == {t.ScheduleStatus.RUNNING}
    assert all(
        tk.assignedTask.slaveHost == "host-1" and "http" in tk.assignedTask.assignedPorts for tk in tasks
    )
    assert all(tk.assignedTask.task.executorConfig is None for tk in tasks)
    full = client.getTasksStatus(query).result.scheduleStatusResult.tasks
    assert all(tk.assignedTask.task.executorConfig.name == "AuroraExecutor" for tk in full)
    summaries = client.getJobSummary("www").result.jobSummaryResult.summaries
    mine = [s for s in summaries if s.job.key.name == name]
    assert mine and mine[0].job.instanceCount == 2 and mine[0].stats.activeTaskCount == 2
    assert update_status(client, key) == t.JobUpdateStatus.ROLLING_FORWARD

    job_id = fake.job_by_name(f"www/devel/{name}").job_id
    fake.finish_workflow(job_id)
    assert update_status(client, key) == t.JobUpdateStatus.ROLLED_FORWARD

    resp = client.startJobUpdate(update_request(t, task_config(t, name, cpus=1.0), 3), "scale up")
    assert resp.responseCode == t.ResponseCode.OK, resp.details
    second = resp.result.startJobUpdateResult.key
    replaced = fake.calls_of("replace_job")[-1]
    assert replaced["spec"].instance_count == 3 and replaced["update_spec"].start_pods
    assert replaced["spec"].default_spec.containers[0].resource.cpu_limit == 1.0
    assert client.pauseJobUpdate(second, "wait").responseCode == t.ResponseCode.OK
    assert update_status(client, second) == t.JobUpdateStatus.ROLL_FORWARD_PAUSED
    assert client.resumeJobUpdate(second, "go").responseCode == t.ResponseCode.OK
    assert update_status(client, second) == t.JobUpdateStatus.ROLLING_FORWARD
    assert client.rollbackJobUpdate(second, "oops").responseCode == t.ResponseCode.OK
    assert update_status(client, second) == t.JobUpdateStatus.ROLLING_BACK
    back = fake.calls_of("replace_job")[-1]["spec"]
    assert back.instance_count == 2 and back.default_spec.containers[0].resource.cpu_limit == 0.5
    listed = client.getJobUpdateSummaries(t.JobUpdateQuery(jobKey=key.job)).result
    assert [s.key.id for s in listed.getJobUpdateSummariesResult.updateSummaries] == [second.id, key.id]

    assert client.killTasks(key.job, [0], "one").responseCode == t.ResponseCode.OK
    assert fake.calls_of("stop_pod")[-1]["name"] == f"{job_id}-0"
    states: dict[int, int] = {}
    for tk in client.getTasksWithoutConfigs(query).result.scheduleStatusResult.tasks:
        states.setdefault(tk.assignedTask.instanceId, tk.status)  # newest run first, earlier runs after
    assert states[0] == t.ScheduleStatus.KILLED
    assert client.killTasks(key.job, None, "all").responseCode == t.ResponseCode.OK
    assert fake.calls_of("stop_stateless_job")[-1]["job_id"] == job_id
    names = [s.job.key.name for s in client.getJobSummary("www").result.jobSummaryResult.summaries]
    assert name not in names


def test_pulses_unblock_updates_and_missed_pulses_block_them(
    aurora: tuple[Any, Any, str], cluster: Cluster
) -> None:
    client, t, protocol = aurora
    fake = cluster.fake
    assert fake is not None
    resp = client.startJobUpdate(update_request(t, task_config(t, f"pulsed-{protocol}"), 1, pulse_ms=700), "")
    key = resp.result.startJobUpdateResult.key
    assert (
        resp.result.startJobUpdateResult.updateSummary.state.status
        == t.JobUpdateStatus.ROLL_FORWARD_AWAITING_PULSE
    )
    assert update_status(client, key) == t.JobUpdateStatus.ROLL_FORWARD_AWAITING_PULSE
    job = fake.job_by_name(f"www/devel/pulsed-{protocol}")
    assert job.workflows[-1].status.state == stateless_pb2.WORKFLOW_STATE_PAUSED

    pulse = client.pulseJobUpdate(key)
    assert pulse.result.pulseJobUpdateResult.status == t.JobUpdatePulseStatus.OK
    assert update_status(client, key) == t.JobUpdateStatus.ROLLING_FORWARD
    for _ in range(5):  # steady pulses keep it rolling
        time.sleep(0.2)
        assert client.pulseJobUpdate(key).responseCode == t.ResponseCode.OK
        assert update_status(client, key) == t.JobUpdateStatus.ROLLING_FORWARD
    eventually(
        lambda: update_status(client, key) == t.JobUpdateStatus.ROLL_FORWARD_AWAITING_PULSE,
        "the bridge to block the update after pulses stopped",
    )
    paused = opaque_data.parse(fake.calls_of("pause_workflow")[-1]["opaque_data"])
    assert paused.actions[-1] == opaque_data.PULSE_TIMEOUT
    client.pulseJobUpdate(key)
    assert update_status(client, key) == t.JobUpdateStatus.ROLLING_FORWARD
    fake.finish_workflow(job.job_id)
    assert client.pulseJobUpdate(key).result.pulseJobUpdateResult.status == t.JobUpdatePulseStatus.FINISHED


def test_stale_ids_bad_input_and_unsupported_methods_change_nothing(
    aurora: tuple[Any, Any, str], cluster: Cluster
) -> None:
    client, t, protocol = aurora
    fake = cluster.fake
    assert fake is not None
    name = f"guarded-{protocol}"
    key = client.startJobUpdate(
        update_request(t, task_config(t, name), 1), ""
    ).result.startJobUpdateResult.key
    before = len(fake.calls)
    stale = t.JobUpdateKey(job=key.job, id="not-the-current-one")
    for call in (client.pauseJobUpdate, client.resumeJobUpdate, client.abortJobUpdate):
        resp = call(stale, "x")
        assert (
            resp.responseCode == t.ResponseCode.INVALID_REQUEST
            and "not-the-current-one" in resp.details[0].message
        )
    assert client.pulseJobUpdate(stale).responseCode == t.ResponseCode.INVALID_REQUEST

    bad_cpu = task_config(t, name, cpus=-1.0)
    resp = client.startJobUpdate(update_request(t, bad_cpu, 1), "")
    assert resp.responseCode == t.ResponseCode.INVALID_REQUEST and "numCpus" in resp.details[0].message
    empty_role = task_config(t, name)
    empty_role.job = t.JobKey(role="", environment="devel", name=name)
    assert "role" in client.startJobUpdate(update_request(t, empty_role, 1), "").details[0].message
    assert (
        "instanceCount"
        in client.startJobUpdate(update_request(t, task_config(t, name), 0), "").details[0].message
    )
    busy = client.startJobUpdate(update_request(t, task_config(t, name, cpus=2.0), 1), "")
    assert busy.responseCode == t.ResponseCode.INVALID_REQUEST
    assert busy.result.startJobUpdateResult.key.id == key.id  # Aurora names the running update
    mutating = {"create_stateless_job", "replace_job", "pause_workflow", "resume_workflow", "abort_workflow"}
    assert not [m for m, _ in fake.calls[before:] if m in mutating]

    for method, args in (
        ("performBackup", ()),
        ("forceTaskState", ("x", 1)),
        ("snapshot", ()),
    ):
        resp = getattr(client, method)(*args)
        assert resp.responseCode == t.ResponseCode.INVALID_REQUEST and method in resp.details[0].message
    # cron: bad input names the field, and nothing is scheduled
    cron = t.JobConfiguration(key=t.JobKey(role="www", environment="devel", name=f"cron-{protocol}"),
                              owner=t.Identity(user="www"), cronSchedule="0 25 * * *",
                              taskConfig=task_config(t, f"cron-{protocol}"), instanceCount=1)
    cron.taskConfig.isService = False
    resp = client.scheduleCronJob(cron)
    assert resp.responseCode == t.ResponseCode.INVALID_REQUEST and "cron" in resp.details[0].message
    assert "Failed to start cron job" in client.startCronJob(key.job).details[0].message
    assert not fake.cron


def test_create_quota_tiers_and_maintenance(aurora: tuple[Any, Any, str], cluster: Cluster) -> None:
    client, t, protocol = aurora
    name = f"created-{protocol}"
    task = task_config(t, name)
    config = t.JobConfiguration(
        key=task.job, owner=task.owner, cronCollisionPolicy=0, taskConfig=task, instanceCount=1
    )
    assert client.populateJobConfig(config).result.populateJobResult.taskConfig.job.name == name
    assert client.createJob(config).responseCode == t.ResponseCode.OK
    assert client.createJob(config).responseCode == t.ResponseCode.INVALID_REQUEST  # exists
    configs = client.getJobs("www").result.getJobsResult.configs
    assert name in {c.key.name for c in configs}
    roles = client.getRoleSummary().result.roleSummaryResult.summaries
    assert any(r.role == "www" and r.jobCount >= 1 for r in roles)
    quota = client.getQuota("www").result.getQuotaResult
    assert quota.quota.numCpus == 12.0 and quota.nonProdSharedConsumption.numCpus >= 0.5
    tiers = client.getTierConfigs().result.getTierConfigResult
    assert tiers.defaultTierName == "preemptible"

    hosts = t.Hosts(hostNames=["host-2"])
    modes = client.startMaintenance(hosts).result.startMaintenanceResult.statuses
    assert [(h.host, h.mode) for h in modes] == [("host-2", t.MaintenanceMode.SCHEDULED)]
    modes = client.drainHosts(hosts).result.drainHostsResult.statuses
    assert [h.mode for h in modes] == [t.MaintenanceMode.DRAINING]
    modes = client.endMaintenance(hosts).result.endMaintenanceResult.statuses
    assert [h.mode for h in modes] == [t.MaintenanceMode.NONE]
    policy = t.SlaPolicy(countSlaPolicy=t.CountSlaPolicy(count=1, durationSecs=30))
    modes = client.slaDrainHosts(hosts, policy, 600).result.drainHostsResult.statuses
    assert [h.mode for h in modes] == [t.MaintenanceMode.DRAINING]
    if cluster.fake is not None:
        assert cluster.fake.drains["host-2"].timeout_secs == 600
    bad = client.slaDrainHosts(hosts, t.SlaPolicy(), 600)
    assert bad.responseCode == t.ResponseCode.INVALID_REQUEST and "defaultSlaPolicy" in bad.details[0].message
    client.endMaintenance(hosts)
    unknown = client.maintenanceStatus(t.Hosts(hostNames=["nope"])).result.maintenanceStatusResult.statuses
    assert [h.mode for h in unknown] == [t.MaintenanceMode.NONE]


@pytest.mark.zookeeper
def test_aurora_finds_the_bridge_through_a_serverset(tmp_path: Path, apache: tuple[Any, Any]) -> None:
    from kazoo.client import KazooClient

    from peloton.common.serverset import resolve_http_url
    from tests.harness.zookeeper import ZooKeeperServer

    zk = ZooKeeperServer(tmp_path / "zk")
    zk.start()
    fake = FakePeloton()
    server = serve(fake)
    address = f"127.0.0.1:{server.port}"
    proc, port = start_bridge(
        [
            "--jobmgr",
            address,
            "--resmgr",
            address,
            "--hostmgr",
            address,
            "--zkservers",
            zk.hosts,
            "--zk-path",
            "/aurora/scheduler",
            "--advertise-host",
            "127.0.0.1",
        ]
    )
    reader = KazooClient(hosts=zk.hosts)
    try:
        reader.start(10)
        base = resolve_http_url(reader, "/aurora/scheduler")  # what Aurora's client does with zk + path
        assert base == f"http://127.0.0.1:{port}"
        admin, t = apache
        assert connect(admin, base + "/api", "binary").getTierConfigs().responseCode == t.ResponseCode.OK
    finally:
        reader.stop()
        stop(proc)
        server.stop(0)
        zk.stop()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    with pytest.raises(OSError):
        conn.request("GET", "/health")
