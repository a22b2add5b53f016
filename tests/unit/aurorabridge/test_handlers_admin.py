"""Quota, tiers, maintenance, unsupported methods, the handler table and the pool loader."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from aurorabridge.config import RespoolSettings
from aurorabridge.handlers import handler_table, unsupported
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.respool_loader import RespoolLoader
from aurorabridge.thrift_api import ALL_METHODS, api
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2 as mpb
from peloton.core.errors import AlreadyExists, Unavailable
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge import builders as b
from tests.unit.aurorabridge.conftest import Call, messages

OK, INVALID = api.ResponseCode.OK, api.ResponseCode.INVALID_REQUEST
M = api.MaintenanceMode


def test_every_method_has_a_handler_and_the_unmapped_ones_say_so(ctx: BridgeContext, call: Call) -> None:
    assert set(handler_table(ctx)) == set(ALL_METHODS)
    for method in unsupported.UNSUPPORTED:
        resp = call(method)
        assert resp.responseCode == INVALID and method in messages(resp)


def test_tier_configs_match_peloton_bridge(call: Call) -> None:
    result = call("getTierConfigs").result.getTierConfigResult
    assert result.defaultTierName == "preemptible"
    assert {t.name: t.settings for t in result.tiers} == {
        "revocable": {"preemptible": "true", "revocable": "true"},
        "preferred": {"preemptible": "false", "revocable": "false"},
        "preemptible": {"preemptible": "true", "revocable": "false"},
    }


def test_quota_is_the_pool_limit_and_consumption_is_per_role(call: Call, fake: FakePeloton) -> None:
    empty = call("getQuota", ownerRole="www").result.getQuotaResult
    assert empty.quota.numCpus == 0 and not fake.calls_of("create_respool")  # reads never create pools
    prod = b.task_config(cpus=2.0)
    prod.production = True
    call("startJobUpdate", request=b.update_request(prod, 3), message="")
    call("startJobUpdate", request=b.update_request(b.task_config(name="dev"), 2), message="")
    result = call("getQuota", ownerRole="www").result.getQuotaResult
    assert (result.quota.numCpus, result.quota.ramMb, result.quota.diskMb) == (12.0, 6144, 20480)
    assert (result.prodSharedConsumption.numCpus, result.prodSharedConsumption.ramMb) == (6.0, 384)
    assert result.nonProdSharedConsumption.numCpus == 1.0
    assert call("getQuota", ownerRole="").responseCode == INVALID

    quota = api.ResourceAggregate(resources=[api.Resource(numCpus=40.0), api.Resource(ramMb=4096)])
    resp = call("setQuota", ownerRole="www", quota=quota)
    assert resp.responseCode == OK and "/AuroraBridge/www" in messages(resp)
    parent, config = (c["config"] for c in fake.calls_of("update_respool")[-2:])
    assert {r.kind: (r.reservation, r.limit) for r in parent.resources}["cpu"] == (40, 40)  # made room
    limits = {r.kind: (r.reservation, r.limit) for r in config.resources}
    assert limits["cpu"] == (40, 40) and limits["memory"] == (4096, 4096) and limits["disk"] == (10240, 20480)
    negative = api.ResourceAggregate(resources=[api.Resource(numCpus=-1.0)])
    assert call("setQuota", ownerRole="www", quota=negative).responseCode == INVALID


def test_quota_is_per_role_each_role_its_own_pool_made_on_first_use(call: Call, fake: FakePeloton) -> None:
    def quota(role: str) -> tuple[float, int]:
        got = call("getQuota", ownerRole=role)
        assert got.responseCode == OK, messages(got)
        return got.result.getQuotaResult.quota.numCpus, got.result.getQuotaResult.quota.ramMb

    four = api.ResourceAggregate(resources=[api.Resource(numCpus=4.0), api.Resource(ramMb=1024)])
    assert call("setQuota", ownerRole="www", quota=four).responseCode == OK
    assert quota("www") == (4.0, 1024) and quota("ads") == (0.0, 0)  # ads has no pool yet
    two = api.ResourceAggregate(resources=[api.Resource(numCpus=2.0)])
    assert call("setQuota", ownerRole="ads", quota=two).responseCode == OK
    assert quota("ads") == (2.0, 6144) and quota("www") == (4.0, 1024)  # www's quota unchanged
    paths = {p.path.value: p for p in fake.pools.values()}
    assert {"/AuroraBridge", "/AuroraBridge/www", "/AuroraBridge/ads"} <= paths.keys()
    assert paths["/AuroraBridge/www"].config.parent.value == paths["/AuroraBridge"].id.value
    # jobs of a role run in the role's pool; an update keeps the pool the job has
    assert call("createJob", description=b.job_configuration(b.task_config())).responseCode == OK
    job = next(j for j in fake.jobs.values() if j.spec.name == "www/devel/hello")
    assert job.spec.respool_id.value == paths["/AuroraBridge/www"].id.value
    job.spec.respool_id.value = paths["/AuroraBridge"].id.value  # a job made before pools per role
    resp = call("startJobUpdate", request=b.update_request(b.task_config(cpus=2.0), 1), message="")
    assert resp.responseCode == OK, messages(resp)
    assert fake.calls_of("replace_job")[-1]["spec"].respool_id.value == paths["/AuroraBridge"].id.value


def test_maintenance_maps_onto_peloton_host_states(call: Call, fake: FakePeloton) -> None:
    def modes(method: str, *hosts: str) -> list[tuple[str, int]]:
        resp = call(method, hosts=api.Hosts(hostNames=list(hosts)))
        assert resp.responseCode == OK, messages(resp)
        result = next(v for v in vars(resp.result).values() if v is not None)
        return sorted((s.host, s.mode) for s in result.statuses)

    assert modes("startMaintenance", "host-1") == [("host-1", M.SCHEDULED)]
    assert not fake.calls_of("start_maintenance")  # Peloton has no "scheduled" stage
    assert modes("drainHosts", "host-1", "host-2") == [("host-1", M.DRAINING), ("host-2", M.DRAINING)]
    fake.hosts["host-2"] = host_pb2.HOST_STATE_DOWN
    assert modes("maintenanceStatus", "host-1", "host-2", "ghost") == [
        ("ghost", M.NONE),
        ("host-1", M.DRAINING),
        ("host-2", M.DRAINED),
    ]
    assert modes("endMaintenance", "host-1", "host-2") == [("host-1", M.NONE), ("host-2", M.NONE)]
    # Every mode: DRAINING and DRAINED go through EndMaintenance (v0 CompleteMaintenance would
    # refuse a host still draining); SCHEDULED only loses its mark; NONE stays NONE.
    assert fake.calls_of("end_maintenance")[-1]["hostnames"] == ["host-1", "host-2"]
    assert not fake.calls_of("complete_maintenance")
    assert modes("startMaintenance", "host-1") == [("host-1", M.SCHEDULED)]
    assert modes("endMaintenance", "host-1", "host-2") == [("host-1", M.NONE), ("host-2", M.NONE)]
    assert len(fake.calls_of("end_maintenance")) == 1  # nothing under maintenance in Peloton
    bad = call("drainHosts", hosts=api.Hosts(hostNames=["host-1", "ghost"]))
    assert bad.responseCode == INVALID and "ghost" in messages(bad)
    assert call("drainHosts", hosts=api.Hosts(hostNames=[])).responseCode == INVALID
    # drainHosts is Aurora's forced drain: no SLA, every task at once.
    assert fake.calls_of("drain_hosts")[0]["drain"] == mpb.DrainSpec(mode=mpb.DRAIN_MODE_FORCE)


def test_sla_drain_hosts_sends_the_policy_timeout_and_auroras_settings(
        call: Call, fake: FakePeloton) -> None:
    policy = api.SlaPolicy(percentageSlaPolicy=api.PercentageSlaPolicy(percentage=95.0,
                                                                        durationSecs=1800))
    resp = call("slaDrainHosts", hosts=api.Hosts(hostNames=["host-2", "host-1"]),
                defaultSlaPolicy=policy, timeoutSecs=3600)
    assert resp.responseCode == OK, messages(resp)
    assert sorted((s.host, s.mode) for s in resp.result.drainHostsResult.statuses) == [
        ("host-1", M.DRAINING), ("host-2", M.DRAINING)]
    sent = fake.calls_of("drain_hosts")[0]
    assert sent["hostnames"] == ["host-1", "host-2"]
    assert sent["drain"] == mpb.DrainSpec(
        mode=mpb.DRAIN_MODE_SLA_POLICY, timeout_secs=3600.0, min_required_instances=20,
        check_non_production=False, default_policy=mpb.SlaPolicy(
            percentage=mpb.PercentageSlaPolicy(percentage=95.0, duration_secs=1800)))
    count = api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=3, durationSecs=0))
    assert call("slaDrainHosts", hosts=api.Hosts(hostNames=["host-1"]), defaultSlaPolicy=count,
                timeoutSecs=0).responseCode == OK
    assert fake.drains["host-1"].default_policy.count.count == 3
    assert fake.drains["host-1"].timeout_secs == 0.0


def test_sla_drain_hosts_follows_the_bridge_settings(call: Call, ctx: BridgeContext,
                                                     fake: FakePeloton) -> None:
    ctx.handlers = dataclasses.replace(ctx.handlers, sla_min_instances=1,
                                       sla_aware_kill_non_prod=True)
    policy = api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=1))
    assert call("slaDrainHosts", hosts=api.Hosts(hostNames=["host-1"]), defaultSlaPolicy=policy,
                timeoutSecs=10).responseCode == OK
    sent = fake.calls_of("drain_hosts")[0]["drain"]
    assert (sent.min_required_instances, sent.check_non_production) == (1, True)


SLA_DRAIN_BAD_INPUT = [
    ({"defaultSlaPolicy": None, "timeoutSecs": 10}, "defaultSlaPolicy"),
    ({"defaultSlaPolicy": api.SlaPolicy(), "timeoutSecs": 10}, "exactly one"),
    ({"defaultSlaPolicy": api.SlaPolicy(percentageSlaPolicy=api.PercentageSlaPolicy(
        percentage=120.0)), "timeoutSecs": 10}, "defaultSlaPolicy.percentageSlaPolicy.percentage"),
    ({"defaultSlaPolicy": api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=-1)),
      "timeoutSecs": 10}, "defaultSlaPolicy.countSlaPolicy.count"),
    ({"defaultSlaPolicy": api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(
        count=1, durationSecs=-3)), "timeoutSecs": 10}, "defaultSlaPolicy.countSlaPolicy.durationSecs"),
    ({"defaultSlaPolicy": api.SlaPolicy(coordinatorSlaPolicy=api.CoordinatorSlaPolicy(
        coordinatorUrl="http://c")), "timeoutSecs": 10}, "consults no coordinator"),
    ({"defaultSlaPolicy": api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=1)),
      "timeoutSecs": -1}, "timeoutSecs must be >= 0"),
]


@pytest.mark.parametrize(("args", "named"), SLA_DRAIN_BAD_INPUT)
def test_sla_drain_hosts_refuses_bad_input_naming_the_field(call: Call, fake: FakePeloton,
                                                            args: dict[str, Any], named: str) -> None:
    resp = call("slaDrainHosts", hosts=api.Hosts(hostNames=["host-1"]), **args)
    assert resp.responseCode == INVALID and named in messages(resp), messages(resp)
    assert not fake.calls_of("drain_hosts") and fake.hosts["host-1"] == host_pb2.HOST_STATE_UP


def test_sla_drain_hosts_of_an_unknown_host_changes_nothing(call: Call, fake: FakePeloton) -> None:
    policy = api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(count=1))
    resp = call("slaDrainHosts", hosts=api.Hosts(hostNames=["host-1", "ghost"]),
                defaultSlaPolicy=policy, timeoutSecs=10)
    assert resp.responseCode == INVALID and "ghost" in messages(resp)
    assert not fake.calls_of("drain_hosts")


def test_pool_loader_creates_once_caches_and_uses_the_gpu_pool(fake: FakePeloton) -> None:
    loader = RespoolLoader(fake, RespoolSettings(path="/AuroraBridge", gpu_path="/GPUAuroraBridge"))
    first = loader.load()
    assert loader.load() == first and len(fake.calls_of("create_respool")) == 1
    config = fake.calls_of("create_respool")[0]["config"]
    assert config.name == "AuroraBridge" and config.parent.value == "root"
    assert {r.kind for r in config.resources} == {"cpu", "memory", "disk", "gpu"}
    assert (
        loader.load(gpu=True) != first and fake.pools[loader.load(gpu=True)].path.value == "/GPUAuroraBridge"
    )
    assert RespoolLoader(fake, RespoolSettings()).load() == first  # a second bridge finds the pool
    role = loader.load(role="www")
    assert fake.pools[role].path.value == "/AuroraBridge/www"
    assert fake.pools[role].config.parent.value == first
    assert {r.kind: r.reservation for r in fake.pools[role].config.resources}["cpu"] == 12
    assert {r.kind: r.reservation for r in fake.pools[first].config.resources}["cpu"] == 12  # it fits
    assert loader.load(role="www") == role and len(fake.calls_of("create_respool")) == 3


def test_pool_loader_retries_transient_failures_then_gives_up(fake: FakePeloton) -> None:
    naps: list[float] = []
    clock = iter(range(100)).__next__
    attempts: list[str] = []
    real_create = fake.create_respool

    def flaky(config: Any) -> Any:
        attempts.append(config.name)
        if len(attempts) == 1:
            raise AlreadyExists("raced")
        return real_create(config)

    fake.create_respool = flaky  # type: ignore[method-assign]
    loader = RespoolLoader(
        fake,
        RespoolSettings(retry_for_s=5, retry_interval_s=0.5),
        sleep=naps.append,
        clock=lambda: float(clock()),
    )
    assert loader.load() and naps == [0.5] and len(attempts) == 2

    def down(path: str) -> Any:
        raise Unavailable("resmgr down")

    fake.lookup_respool_id = down  # type: ignore[method-assign]
    stuck = RespoolLoader(
        fake,
        RespoolSettings(path="/Other", retry_for_s=3, retry_interval_s=1),
        sleep=naps.append,
        clock=lambda: float(clock()),
    )
    with pytest.raises(Unavailable, match="/Other"):
        stuck.load()


def test_task_reconciliation_triggers_reach_the_host_backends(call: Call, fake: FakePeloton) -> None:
    assert call("triggerImplicitTaskReconciliation").responseCode == api.ResponseCode.OK
    assert fake.calls_of("reconcile_tasks")[-1]["run_ids"] is None  # every run on every host
    assert call("createJob", description=b.job_configuration(b.task_config(), 3)).responseCode == 1
    settings = api.ExplicitReconciliationSettings(batchSize=2)
    assert call("triggerExplicitTaskReconciliation", settings=settings).responseCode == api.ResponseCode.OK
    job_id = fake.job_by_name("www/devel/hello").job_id
    batches = [c["run_ids"] for c in fake.calls_of("reconcile_tasks")[1:]]
    assert batches == [[f"{job_id}-0-1", f"{job_id}-1-1"], [f"{job_id}-2-1"]]
    bad = call("triggerExplicitTaskReconciliation", settings=api.ExplicitReconciliationSettings(batchSize=0))
    assert bad.responseCode == api.ResponseCode.INVALID_REQUEST
    assert "batchSize" in bad.details[0].message or "Batch size" in bad.details[0].message
    assert len(fake.calls_of("reconcile_tasks")) == 3


def test_explicit_reconciliation_asks_only_about_launched_tasks(call: Call, fake: FakePeloton) -> None:
    """A task never launched (PENDING, placed, reserved) is on no host: asking about it would
    come back "unknown run" and mark it LOST; only launched ones are sent."""
    assert call("createJob", description=b.job_configuration(b.task_config(), 4)).responseCode == 1
    job_id = fake.job_by_name("www/devel/hello").job_id
    fake.set_pod(job_id, 0, pod_pb2.POD_STATE_PENDING)
    fake.set_pod(job_id, 1, pod_pb2.POD_STATE_PLACED)
    fake.set_pod(job_id, 2, pod_pb2.POD_STATE_LAUNCHED)
    settings = api.ExplicitReconciliationSettings(batchSize=10)
    assert call("triggerExplicitTaskReconciliation", settings=settings).responseCode == api.ResponseCode.OK
    assert [c["run_ids"] for c in fake.calls_of("reconcile_tasks")] == [[f"{job_id}-2-1", f"{job_id}-3-1"]]
