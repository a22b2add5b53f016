"""A `.aurora` job as Aurora's Thrift JobConfiguration and JobUpdateSettings, field by field, the
way Aurora's client converts it (aurorabridge/client/convert.py, update_settings.py), and
clusters.json as Aurora's client reads it.  Configs are written for these tests."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import pytest

from aurorabridge.client import clusters
from aurorabridge.client.config import JobConfig, get_config
from aurorabridge.client.convert import backfill_tier, resolve_portmap
from aurorabridge.thrift_api import api

FULL = """\
web = Process(name = 'web', cmdline = 'serve --port {{thermos.ports[http]}} --admin {{thermos.ports[admin]}}')
task = Task(name = 'webtask', processes = [web],
            resources = Resources(cpu = 1.5, ram = 256*MB + 100, disk = 2*GB, gpu = 1))
jobs = [Service(
  cluster = 'devcluster', role = 'www-data', environment = 'prod', name = 'web',
  contact = 'owner@example.com', instances = 3, tier = 'preferred', priority = 5,
  max_task_failures = 4, production = True, task = task,
  announce = Announcer(primary_port = 'http', portmap = {'aurora': 'http', 'health': 'admin', 'web': '80'}),
  constraints = {'host': 'limit:1', 'rack': 'r1,r2', 'zone': '!east', 'dedicated': 'www-data/web'},
  metadata = [Metadata(key = 'team', value = 'frontend')],
  partition_policy = PartitionPolicy(reschedule = False, delay_secs = 30),
  sla_policy = CountSlaPolicy(count = 2, duration_secs = 60),
  container = Mesos(image = DockerImage(name = 'library/python', tag = '3.11'),
                    volumes = [Volume(container_path = '/data', host_path = '/srv/data', mode = 'RO')]),
  update_config = UpdateConfig(watch_secs = 20, max_per_shard_failures = 1, max_total_failures = 2,
                               rollback_on_failure = False, pulse_interval_secs = 120, sla_aware = True,
                               update_strategy = VariableBatchUpdateStrategy(batch_sizes = [1, 2],
                                                                             autopause_after_batch = True)),
  health_check_config = HealthCheckConfig(initial_interval_secs = 5))]
"""


def load(tmp_path: Path, text: str, name: str | None = None) -> JobConfig:
    path = tmp_path / "job.aurora"
    path.write_text(text)
    return get_config(str(path), name)


def test_the_job_configuration_field_by_field(tmp_path: Path) -> None:
    job = load(tmp_path, FULL).job(metadata=[("client", "tests")])
    key = api.JobKey(role="www-data", environment="prod", name="web")
    assert job.key == key and job.owner == api.Identity(user=getpass.getuser())
    assert job.instanceCount == 3 and job.cronSchedule is None
    assert job.cronCollisionPolicy == api.CronCollisionPolicy.KILL_EXISTING
    task = job.taskConfig
    assert (task.job, task.owner, task.isService, task.production, task.tier) == (
        key, job.owner, True, True, "preferred")
    assert (task.priority, task.maxTaskFailures, task.contactEmail, task.taskLinks) == (
        5, 4, "owner@example.com", {})
    resources = {(r.numCpus, r.ramMb, r.diskMb, r.namedPort, r.numGpus) for r in task.resources}
    assert resources == {(1.5, None, None, None, None), (None, 256, None, None, None),
                         (None, None, 2048, None, None), (None, None, None, None, 1),
                         (None, None, None, "http", None), (None, None, None, "admin", None)}
    by_name = {c.name: c.constraint for c in task.constraints}
    assert by_name["host"] == api.TaskConstraint(limit=api.LimitConstraint(limit=1))
    assert by_name["rack"] == api.TaskConstraint(value=api.ValueConstraint(negated=False,
                                                                           values={"r1", "r2"}))
    assert by_name["zone"] == api.TaskConstraint(value=api.ValueConstraint(negated=True, values={"east"}))
    assert {(m.key, m.value) for m in task.metadata} == {("team", "frontend"), ("client", "tests")}
    assert task.partitionPolicy == api.PartitionPolicy(reschedule=False, delaySecs=30)
    assert task.slaPolicy == api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=2, durationSecs=60))
    assert task.container == api.Container(mesos=api.MesosContainer(
        image=api.Image(docker=api.DockerImage(name="library/python", tag="3.11")),
        volumes=[api.Volume(containerPath="/data", hostPath="/srv/data", mode=api.Mode.RO)]))
    assert task.executorConfig.name == "AuroraExecutor"
    data = json.loads(task.executorConfig.data)
    assert data["task"]["name"] == "webtask"
    assert data["task"]["processes"][0]["cmdline"].startswith("serve --port {{thermos.ports[http]}}")
    assert data["health_check_config"]["initial_interval_secs"] == 5.0
    assert data["announce"]["portmap"] == {"aurora": "http", "health": "admin", "web": "80"}
    assert "update_config" not in data and "instances" not in data


def test_the_update_settings(tmp_path: Path) -> None:
    settings = load(tmp_path, FULL).update_settings([0, 1, 2, 5])
    assert settings == api.JobUpdateSettings(
        updateGroupSize=1, maxPerInstanceFailures=1, maxFailedInstances=2, minWaitInInstanceRunningMs=20_000,
        rollbackOnFailure=False, waitForBatchCompletion=False,
        updateOnlyTheseInstances=[api.Range(first=0, last=2), api.Range(first=5, last=5)],
        blockIfNoPulsesAfterMs=120_000, slaAware=True,
        updateStrategy=api.JobUpdateStrategy(varBatchStrategy=api.VariableBatchJobUpdateStrategy(
            groupSizes=[1, 2], autopauseAfterBatch=True)))
    plain = FULL.split("  update_config")[0] + "  task_links = {})]\n"
    defaults = load(tmp_path, plain).update_settings()
    assert (defaults.updateGroupSize, defaults.minWaitInInstanceRunningMs, defaults.rollbackOnFailure,
            defaults.updateOnlyTheseInstances, defaults.blockIfNoPulsesAfterMs) == (
        1, 45_000, True, None, None)
    queue = api.QueueJobUpdateStrategy(groupSize=1)
    assert defaults.updateStrategy == api.JobUpdateStrategy(queueStrategy=queue)
    batched = plain.replace("task_links = {}", "task_links = {}, update_config = UpdateConfig("
                            "batch_size = 3, wait_for_batch_completion = True)")
    batch = load(tmp_path, batched).update_settings()
    assert batch.updateStrategy == api.JobUpdateStrategy(
        batchStrategy=api.BatchJobUpdateStrategy(groupSize=3, autopauseAfterBatch=False))
    assert (batch.updateGroupSize, batch.waitForBatchCompletion) == (3, True)


def small(extra: str = "", **fields: Any) -> str:
    args = ", ".join(f"{k} = {v}" for k, v in fields.items())
    return f"""{extra}
jobs = [Job(cluster = 'c', role = 'r', environment = 'e', name = 'n', {args},
            task = Task(processes = [Process(name = 'p', cmdline = 'run')],
                        resources = Resources(cpu = 0.5, ram = 10*MB, disk = 10*MB)))]
"""


def test_containers_executors_cron_and_defaults(tmp_path: Path) -> None:
    default = load(tmp_path, small(priority=0)).job()
    assert default.taskConfig.container == api.Container(mesos=api.MesosContainer())
    assert (default.taskConfig.isService, default.taskConfig.production, default.taskConfig.tier,
            default.taskConfig.maxTaskFailures) == (False, False, None, 1)
    assert [r.namedPort for r in default.taskConfig.resources if r.namedPort] == []
    docker = load(tmp_path, small(container="Docker(image = 'busybox', parameters = "
                                  "[Parameter(name = 'env', value = 'A=1')])")).job()
    assert docker.taskConfig.container == api.Container(docker=api.DockerContainer(
        image="busybox", parameters=[api.DockerParameter(name="env", value="A=1")]))
    legacy = load(tmp_path, small(container="Container(docker = Docker(image = 'busybox'))")).job()
    assert legacy.taskConfig.container.docker.image == "busybox"
    executor = load(tmp_path, small(executor_config="ExecutorConfig(name = 'custom', data = 'go')")).job()
    assert executor.taskConfig.executorConfig == api.ExecutorConfig(name="custom", data="go")
    cron = load(tmp_path, small(cron_schedule="'*/5 * * * *'", cron_collision_policy="'CANCEL_NEW'")).job()
    assert (cron.cronSchedule, cron.cronCollisionPolicy) == (
        "*/5 * * * *", api.CronCollisionPolicy.CANCEL_NEW)
    image = "Mesos(image = AppcImage(name = 'app', image_id = 'sha512-1'))"
    appc = load(tmp_path, small(container=image)).job()
    assert appc.taskConfig.container.mesos.image == api.Image(
        appc=api.AppcImage(name="app", imageId="sha512-1"))
    pct = load(tmp_path, small(sla_policy="PercentageSlaPolicy(percentage = 95, duration_secs = 30)")).job()
    assert pct.taskConfig.slaPolicy.percentageSlaPolicy == api.PercentageSlaPolicy(percentage=95.0,
                                                                                   durationSecs=30)
    announced = load(tmp_path, small(announce="Announcer()")).job()
    assert [r.namedPort for r in announced.taskConfig.resources if r.namedPort] == ["http"]


def test_tier_backfill_from_the_schedulers_tiers(tmp_path: Path) -> None:
    tiers = api.GetTierConfigResult(defaultTierName="preemptible", tiers=[
        api.TierConfig(name="revocable", settings={"preemptible": "true", "revocable": "true"}),
        api.TierConfig(name="preferred", settings={"preemptible": "false", "revocable": "false"}),
        api.TierConfig(name="preemptible", settings={"preemptible": "true", "revocable": "false"})])
    cfg = load(tmp_path, small(production="True"))
    assert backfill_tier(cfg.raw(), tiers).tier().get() == "preferred"
    cfg = load(tmp_path, small(priority=0))
    assert backfill_tier(cfg.raw(), tiers).tier().get() == "preemptible"
    cfg = load(tmp_path, small(tier="'preferred'"))
    assert backfill_tier(cfg.raw(), tiers).production().get() is True


def test_portmap_aliases_resolve() -> None:
    assert resolve_portmap({"aurora": "http", "http": "80", "health": "admin"}) == {
        "aurora": 80, "http": 80, "health": "admin"}
    with pytest.raises(ValueError, match="cycle"):
        resolve_portmap({"a": "b", "b": "a"})


def test_clusters_json_as_aurora_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    etc, home = tmp_path / "etc", tmp_path / "home"
    (etc).mkdir()
    (home / ".aurora").mkdir(parents=True)
    (etc / "clusters.json").write_text(json.dumps([
        {"name": "west", "scheduler_uri": "http://west:5396"},
        {"name": "east", "zk": "zk1,zk2", "scheduler_zk_path": "/aurora/scheduler"},
        {"comment": "no name: ignored"}]))
    (home / ".aurora" / "clusters.json").write_text(json.dumps(
        {"a": {"name": "west", "scheduler_uri": "http://west-2:5396", "thrift_protocol": "json"}}))
    monkeypatch.setenv("AURORA_CONFIG_ROOT", str(etc))
    monkeypatch.setenv("HOME", str(home))
    found = clusters.load()
    assert sorted(found) == ["east", "west"]
    assert found["west"].scheduler_uri == "http://west-2:5396" and found["west"].thrift_protocol == "json"
    assert (found["east"].zk, found["east"].zk_port, found["east"].scheduler_zk_path) == (
        "zk1,zk2", 2181, "/aurora/scheduler")
    assert found["east"].auth_mechanism == "UNAUTHENTICATED" and found["east"].thrift_protocol == "binary"
    (etc / "clusters.json").write_text("[not json")
    with pytest.raises(clusters.ClustersError, match="Unable to parse"):
        clusters.load()
