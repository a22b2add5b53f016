"""Bad input never crashes a daemon or corrupts what is stored (reliability.md §3).

Hypothesis builds job and pool requests biased to the edges (negative, NaN, huge and zero
resources; empty, long and unicode names; instance counts 0, 1, the cap and beyond; unknown or
non-leaf pools; constraint trees with bad leaves) and sends them over real gRPC to a real
`peloton up` (simulated hosts, so nothing runs for long).  Every reply must be OK or one of
the expected client errors — never INTERNAL or UNKNOWN — the cluster must keep answering, and
whatever was accepted must read back.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peloton.api.gen.peloton.api.v0.job import job_pb2, job_pb2_grpc
from peloton.api.gen.peloton.api.v0.respool import respool_pb2, respool_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2, task_pb2_grpc
from tests.harness.cluster import UpCluster

pytestmark = pytest.mark.timeout(300)
CLIENT_ERRORS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                 grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.FAILED_PRECONDITION,
                 grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED,
                 grpc.StatusCode.UNIMPLEMENTED}

amounts = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.0, -1.0, 0.001, 1.0, 1e9, -0.0]))
names = st.one_of(st.text(max_size=300), st.sampled_from(["", "x", "a/b", "\x00", "ü" * 100]))
counts = st.sampled_from([0, 1, 2, 100_000, 100_001, 2**32 - 1])


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = UpCluster(tmp_path_factory.mktemp("fuzz"), agents=0,
                        extra=["--backend", "sim:20:1000:4", "--aurora-port", "-1"]).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def tasks(up: UpCluster) -> Iterator[task_pb2_grpc.TaskManagerStub]:
    """TaskManager, which stops batch jobs (Peloton's JobManager.Stop is for services)."""
    channel = grpc.insecure_channel(f"127.0.0.1:{up.jobmgr_port}")
    yield task_pb2_grpc.TaskManagerStub(channel)
    channel.close()


@pytest.fixture(scope="module")
def stubs(up: UpCluster) -> Iterator[tuple[job_pb2_grpc.JobManagerStub,
                                           respool_pb2_grpc.ResourceManagerStub, str]]:
    channel = grpc.insecure_channel(f"127.0.0.1:{up.jobmgr_port}")
    jobs = job_pb2_grpc.JobManagerStub(channel)
    pools = respool_pb2_grpc.ResourceManagerStub(channel)
    cfg = respool_pb2.ResourcePoolConfig(name="fuzz")
    cfg.parent.value = "root"
    for kind in ("cpu", "memory", "disk", "gpu"):
        cfg.resources.add(kind=kind, reservation=0, limit=1e6, share=1)
    pool = pools.CreateResourcePool(respool_pb2.CreateRequest(config=cfg), timeout=10)
    yield jobs, pools, pool.result.value
    channel.close()


def _call(fn: object, request: object) -> tuple[grpc.StatusCode, Any]:
    try:
        return grpc.StatusCode.OK, fn(request, timeout=20)  # type: ignore[operator]
    except grpc.RpcError as exc:
        return exc.code(), None


@st.composite
def job_configs(draw: st.DrawFn, pool: str) -> job_pb2.JobConfig:
    # Enum fields are drawn as bare numbers, unknown ones (7, 9) included on purpose.
    cfg = job_pb2.JobConfig(name=draw(names), instanceCount=draw(counts),
                            type=draw(st.sampled_from([0, 1, 2, 7])))  # type: ignore[arg-type]
    cfg.respoolID.value = draw(st.sampled_from([pool, pool, "", "root", "nope"]))
    res = cfg.defaultConfig.resource
    res.cpuLimit, res.memLimitMb, res.diskLimitMb = draw(amounts), draw(amounts), draw(amounts)
    res.gpuLimit = draw(amounts)
    if draw(st.booleans()):
        cfg.defaultConfig.command.value = draw(names)
    cfg.defaultConfig.restartPolicy.maxFailures = draw(st.sampled_from([0, 3, 100, 101, 2**31]))
    if draw(st.booleans()):
        leaf = cfg.defaultConfig.constraint
        leaf.type = draw(st.sampled_from([0, 1, 2, 3]))  # type: ignore[assignment]
        leaf.labelConstraint.kind = draw(st.sampled_from([0, 1, 2, 9]))  # type: ignore[assignment]
        leaf.labelConstraint.condition = draw(st.sampled_from([0, 1, 2, 3]))  # type: ignore[assignment]
        leaf.labelConstraint.label.key = draw(names)
        leaf.labelConstraint.requirement = draw(st.sampled_from([0, 1, 2**31]))
    for _ in range(draw(st.integers(0, 2))):
        cfg.defaultConfig.ports.add(name=draw(names), value=draw(st.sampled_from([0, 80, 70000])),
                                    envName=draw(st.sampled_from(["", "PORT"])))
    if draw(st.booleans()):
        override = cfg.instanceConfig[draw(st.sampled_from([0, 1, 5, 99999]))]
        override.controller = draw(st.booleans())
    return cfg


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_job_configs_get_clear_answers(tasks: task_pb2_grpc.TaskManagerStub,
                                              stubs: tuple[object, object, str],
                                              data: st.DataObject) -> None:
    jobs, _, pool = stubs
    cfg = data.draw(job_configs(pool))
    code, reply = _call(jobs.Create, job_pb2.CreateRequest(config=cfg))  # type: ignore[attr-defined]
    assert code == grpc.StatusCode.OK or code in CLIENT_ERRORS, (code, cfg)
    if code is grpc.StatusCode.OK:
        assert isinstance(reply, job_pb2.CreateResponse)
        if not reply.HasField("error"):
            got = jobs.Get(job_pb2.GetRequest(id=reply.jobId), timeout=20)  # type: ignore[attr-defined]
            assert got.jobInfo.config.instanceCount == cfg.instanceCount
            assert not math.isnan(got.jobInfo.config.defaultConfig.resource.cpuLimit)
            tasks.Stop(task_pb2.StopRequest(jobId=reply.jobId), timeout=20)
        else:
            assert reply.error.invalidConfig.message or reply.error.invalidJobId.message or \
                reply.error.alreadyExists.message


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=names, parent=st.sampled_from(["root", "", "nope"]),
       reservation=amounts, limit=amounts, share=amounts,
       kind=st.sampled_from(["cpu", "memory", "disk", "gpu", "CPU", "cpus", ""]))
def test_random_pools_get_clear_answers(stubs: tuple[object, object, str], name: str, parent: str,
                                        reservation: float, limit: float, share: float,
                                        kind: str) -> None:
    _, pools, _ = stubs
    cfg = respool_pb2.ResourcePoolConfig(name=name)
    cfg.parent.value = parent
    cfg.resources.add(kind=kind, reservation=reservation, limit=limit, share=share)
    code, _reply = _call(pools.CreateResourcePool,  # type: ignore[attr-defined]
                        respool_pb2.CreateRequest(config=cfg))
    assert code == grpc.StatusCode.OK or code in CLIENT_ERRORS, (code, cfg)


def test_garbage_bytes_are_refused_and_the_cluster_keeps_answering(
        up: UpCluster, stubs: tuple[object, object, str]) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{up.jobmgr_port}")
    raw = channel.unary_unary("/peloton.api.v0.job.JobManager/Create",
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
    for blob in (b"\xff" * 64, b"\x0a\xff\xff\xff\xff\x0f", b"\x12" + b"\x80" * 20):
        with pytest.raises(grpc.RpcError) as err:
            raw(blob, timeout=10)
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid message" in (err.value.details() or "")
    channel.close()
    jobs, _, _ = stubs
    listing = jobs.Query(job_pb2.QueryRequest(spec=job_pb2.QuerySpec()), timeout=20)  # type: ignore[attr-defined]
    assert listing.error.ByteSize() == 0
    assert isinstance(task_pb2.TaskState.Name(task_pb2.RUNNING), str)


def test_unknown_ids_are_not_found(stubs: tuple[object, object, str], tmp_path: Path) -> None:
    jobs, _, _ = stubs
    reply = jobs.Get(job_pb2.GetRequest(id={"value": "00000000-0000-4000-8000-000000000000"}),  # type: ignore[attr-defined]
                     timeout=20)
    # Peloton answers an unknown job with its storage's error in `getRuntimeFail`.
    assert reply.error.getRuntimeFail.message == ("code:not-found message:Job runtime not found "
                                                  "00000000-0000-4000-8000-000000000000")
    code, bad = _call(jobs.Get, job_pb2.GetRequest(id={"value": "not-a-uuid"}))  # type: ignore[attr-defined]
    assert code is grpc.StatusCode.OK and bad.error.getRuntimeFail.message
