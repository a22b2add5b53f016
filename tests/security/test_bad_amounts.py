"""Resource amounts that would poison entitlement are refused naming the field (issue 23
items 10 and 11), on every front that takes them, over real gRPC and Thrift:

- a pool's reservation, limit or share of NaN, inf, -5 or 1e308 (v0 respool create and
  update: Peloton's answer, `error.invalidResourcePoolConfig`, naming the field; nothing is
  written) — 1e308 passed the finiteness check and overflowed the pool tree's fixed-point units;
- an Aurora quota of the same (setQuota: INVALID_REQUEST naming the field, no pool changed);
- a job whose task asks for 1e308 of anything (v0 Create: Peloton's `error.invalidConfig`,
  v1alpha CreateJob: INVALID_ARGUMENT, each naming the field; both answered INTERNAL,
  OverflowError).
The rule lives in one place: peloton/core/model/resources.check_amount.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from aurorabridge.thrift_api import api, args_class
from peloton.api.gen.peloton.api.v0.job import job_pb2, job_pb2_grpc
from peloton.api.gen.peloton.api.v0.respool import respool_pb2, respool_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import (
    stateless_svc_pb2,
    stateless_svc_pb2_grpc,
)
from tests.harness.cluster import UpCluster
from tests.unit.aurorabridge.wire import BINARY, decode_reply, encode_call, post

pytestmark = pytest.mark.timeout(180)
BAD = [float("nan"), float("inf"), -5.0, 1e308]
FIELDS = ["reservation", "limit", "share"]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path_factory.mktemp("amounts"), agents=0,
                        extra=["--backend", "sim:2:1000:4", "--ui-port", "-1"]).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def channel(up: UpCluster) -> Iterator[grpc.Channel]:
    ch = grpc.insecure_channel(f"127.0.0.1:{up.jobmgr_port}")
    yield ch
    ch.close()


def pool_config(name: str, field: str = "", value: float = 0.0) -> respool_pb2.ResourcePoolConfig:
    cfg = respool_pb2.ResourcePoolConfig(name=name)
    cfg.parent.value = "root"
    for kind in ("cpu", "memory", "disk", "gpu"):
        amounts = {"reservation": 1.0, "limit": 100.0, "share": 1.0}
        if kind == "cpu" and field:
            amounts[field] = value
        cfg.resources.add(kind=kind, **amounts)
    return cfg


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("field", FIELDS)
def test_a_pool_amount_that_would_poison_entitlement_is_refused(channel: grpc.Channel,
                                                                field: str, value: float) -> None:
    pools = respool_pb2_grpc.ResourceManagerStub(channel)
    name = f"bad-{field}-{value}".replace(".", "_")
    created = pools.CreateResourcePool(respool_pb2.CreateRequest(
        config=pool_config(name, field, value)), timeout=20)
    assert f"resources[0].{field}" in created.error.invalidResourcePoolConfig.message, created
    assert not created.result.value
    lookup = pools.LookupResourcePoolID(respool_pb2.LookupRequest(path={"value": f"/{name}"}),
                                        timeout=20)
    assert lookup.error.HasField("notFound"), "nothing was written"

    good = pools.CreateResourcePool(respool_pb2.CreateRequest(config=pool_config(name)),
                                    timeout=20)
    assert good.result.value, good
    updated = pools.UpdateResourcePool(respool_pb2.UpdateRequest(
        id=good.result, config=pool_config(name, field, value)), timeout=20)
    assert f"resources[0].{field}" in updated.error.invalidResourcePoolConfig.message, updated
    got = pools.GetResourcePool(respool_pb2.GetRequest(id=good.result), timeout=20)
    cpu = next(r for r in got.poolinfo.config.resources if r.kind == "cpu")
    assert (cpu.reservation, cpu.limit, cpu.share) == (1.0, 100.0, 1.0), "the pool is unchanged"


@pytest.mark.parametrize("value", BAD)
def test_an_aurora_quota_that_would_poison_entitlement_is_refused(up: UpCluster,
                                                                  value: float) -> None:
    quota = api.ResourceAggregate(resources=[api.Resource(numCpus=value), api.Resource(ramMb=64),
                                             api.Resource(diskMb=64)])
    args = args_class("setQuota")(ownerRole="www", quota=quota)
    status, _headers, body = post(up.aurora_port, encode_call("setQuota", args),
                                  {"Content-Type": BINARY, "Accept": BINARY})
    assert status == 200
    reply = decode_reply("setQuota", body)
    assert reply.responseCode == api.ResponseCode.INVALID_REQUEST, reply
    assert "quota.numCpus" in " ".join(d.message for d in reply.details), reply.details


@pytest.mark.parametrize("field", ["cpuLimit", "memLimitMb", "diskLimitMb", "gpuLimit"])
def test_a_job_asking_for_1e308_is_refused_naming_the_field(channel: grpc.Channel,
                                                            field: str) -> None:
    """v0 answers a bad config in `error.invalidConfig` (Peloton's InvalidConfig), v1alpha
    with INVALID_ARGUMENT; both answered INTERNAL (OverflowError)."""
    pools = respool_pb2_grpc.ResourceManagerStub(channel)
    pool = pools.CreateResourcePool(respool_pb2.CreateRequest(
        config=pool_config(f"jobs-{field}")), timeout=20).result
    cfg = job_pb2.JobConfig(name="huge", instanceCount=1, type=job_pb2.BATCH)
    cfg.respoolID.value = pool.value
    cfg.defaultConfig.command.value = "true"
    res = cfg.defaultConfig.resource
    res.cpuLimit, res.memLimitMb, res.diskLimitMb = 0.1, 16, 16
    setattr(res, field, 1e308)
    reply = job_pb2_grpc.JobManagerStub(channel).Create(job_pb2.CreateRequest(config=cfg),
                                                        timeout=20)
    assert f"defaultConfig.resource.{field}" in reply.error.invalidConfig.message, reply
    assert not reply.jobId.value

    v1_field = {"cpuLimit": "cpu_limit", "memLimitMb": "mem_limit_mb",
                "diskLimitMb": "disk_limit_mb", "gpuLimit": "gpu_limit"}[field]
    spec = stateless_pb2.JobSpec(name="huge", instance_count=1)
    spec.respool_id.value = pool.value
    container = spec.default_spec.containers.add()
    container.entrypoint.value = "true"
    container.resource.cpu_limit, container.resource.mem_limit_mb = 0.1, 16
    container.resource.disk_limit_mb = 16
    setattr(container.resource, v1_field, 1e308)
    with pytest.raises(grpc.RpcError) as err:
        stateless_svc_pb2_grpc.JobServiceStub(channel).CreateJob(
            stateless_svc_pb2.CreateJobRequest(spec=spec), timeout=20)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert v1_field in (err.value.details() or "")
