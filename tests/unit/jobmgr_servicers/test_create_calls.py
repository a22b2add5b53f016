"""What a create asks of the other daemons (each call is one more wait for a busy one), and
that asking less changes no answer: one pool validation per create, the host shapes from
a cache that a refusal reads again (a host that joined is never missed), and a bad pool
still answered before anything else about the create (v0 and v1alpha)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.core.errors import Unavailable
from peloton.jobmgr.feasibility import SHAPES_TTL
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.helpers import create, service_spec
from tests.unit.jobmgr_servicers.test_v0_methods import batch_config


def count_calls(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the resource manager's validate_pool and the host manager's host_shapes."""
    calls: Counter[str] = Counter()

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)
        return call

    monkeypatch.setattr(cluster.rm, "validate_pool", counted("validate_pool",
                                                             cluster.rm.validate_pool))
    monkeypatch.setattr(cluster.hosts, "host_shapes", counted("host_shapes",
                                                              cluster.hosts.host_shapes))
    return calls


def test_creates_validate_the_pool_once_and_share_the_host_shapes(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_calls(cluster, monkeypatch)
    for _ in range(3):
        resp = cluster.v0jobs.Create(job_pb2.CreateRequest(config=batch_config(2)), timeout=10)
        assert not resp.HasField("error"), resp.error
        assert create(cluster, service_spec(2)).job_id.value
    assert calls == {"validate_pool": 6, "host_shapes": 1}
    cluster.clock.offset += SHAPES_TTL  # old enough: read again
    assert create(cluster, service_spec(1)).job_id.value
    assert calls["host_shapes"] == 2


def test_a_host_that_joined_after_the_shapes_were_read_is_not_missed(cluster: Cluster) -> None:
    assert create(cluster, service_spec(1)).job_id.value  # the shapes are cached now
    big = batch_config(1)
    big.defaultConfig.resource.cpuLimit = 100  # the hosts have 64
    refused = cluster.v0jobs.Create(job_pb2.CreateRequest(config=big), timeout=10)
    assert "100 cpu" in refused.error.invalidConfig.message
    cluster.hosts.add_host("host-big", cpu=128, mem=65536)
    accepted = cluster.v0jobs.Create(job_pb2.CreateRequest(config=big), timeout=10)
    assert not accepted.HasField("error"), accepted.error
    assert accepted.jobId.value


def test_a_bad_pool_is_still_the_answer_before_a_bad_config(cluster: Cluster) -> None:
    v0 = batch_config(1)
    v0.respoolID.value = "nope"
    v0.instanceCount = 0  # a bad config as well
    resp = cluster.v0jobs.Create(job_pb2.CreateRequest(config=v0), timeout=10)
    assert resp.error.invalidConfig.message == "resource pool not found"
    v1 = service_spec(0)
    v1.respool_id.value = "nope"
    with pytest.raises(grpc.RpcError) as err:
        create(cluster, v1)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert err.value.details() == ("failed to validate resource pool: "
                                   "code:not-found message:resource pool not found")


def test_a_bad_pool_is_the_answer_while_the_hosts_cannot_be_read(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    def down() -> Any:
        raise Unavailable("host manager unreachable")

    monkeypatch.setattr(cluster.hosts, "host_shapes", down)
    config = batch_config(1)
    config.respoolID.value = "nope"
    resp = cluster.v0jobs.Create(job_pb2.CreateRequest(config=config), timeout=10)
    assert resp.error.invalidConfig.message == "resource pool not found"
    with pytest.raises(grpc.RpcError) as err:  # a good pool: the hosts' answer
        cluster.v0jobs.Create(job_pb2.CreateRequest(config=batch_config(1)), timeout=10)
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE


def test_a_bad_pool_is_the_answer_before_a_taken_id(cluster: Cluster) -> None:
    jid = create(cluster, service_spec(1)).job_id.value
    spec = service_spec(1)
    spec.respool_id.value = "nope"
    with pytest.raises(grpc.RpcError) as err:
        create(cluster, spec, job_id={"value": jid})
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert err.value.details().startswith("failed to validate resource pool: ")
