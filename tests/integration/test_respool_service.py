"""The v0 ResourceManager over real gRPC, called by a plain grpcio client built from our stubs.

Both service names are served (`peloton.api.v0.respool.ResourceManager`
and the legacy `peloton.api.respool.ResourceManager`); errors come back
typed inside the responses, as Peloton's handler returns them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from peloton.api.gen.peloton.api.v0 import peloton_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2, respool_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.config import ResourceManagerConfig
from peloton.storage import StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.unit.resmgr.helpers import singles, tasks

YARPC = (("rpc-caller", "peloton-client"), ("rpc-service", "peloton-resmgr"),
         ("rpc-encoding", "proto"))
LEGACY = "/peloton.api.respool.ResourceManager/"


@dataclass
class Served:
    rm: ResourceManager
    stub: respool_pb2_grpc.ResourceManagerStub
    channel: grpc.Channel

    def legacy(self, method: str, request: Any, reply: type[Any]) -> Any:
        """Call a method at the legacy service name."""
        call: Callable[..., Any] = self.channel.unary_unary(
            LEGACY + method, request_serializer=type(request).SerializeToString,
            response_deserializer=reply.FromString)
        return call(request, timeout=5, metadata=YARPC)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", StoreOptions(bootstrap=True))
    fake = FakeHostManager()
    for i in range(4):
        fake.add_host(f"h{i}", cpu=8, mem=16384, disk=100_000)
    server = GrpcServer("127.0.0.1:0")
    rm = ResourceManager(store, fake, ResourceManagerConfig(), grpc=server)
    rm.start()
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield Served(rm, respool_pb2_grpc.ResourceManagerStub(channel), channel)
    finally:
        channel.close()
        server.stop(0)
        rm.stop()
        store.close()


def config(name: str, parent: str = "", *, cpu: tuple[float, float] = (2, 8),
           mem: tuple[float, float] = (1024, 4096)) -> respool_pb2.ResourcePoolConfig:
    out = respool_pb2.ResourcePoolConfig(name=name, owningTeam="team6", ldapGroups=["money"],
                                         description="test pool")
    if parent:
        out.parent.value = parent
    out.resources.add(kind="cpu", reservation=cpu[0], limit=cpu[1], share=1)
    out.resources.add(kind="memory", reservation=mem[0], limit=mem[1], share=1)
    out.resources.add(kind="disk", reservation=0, limit=100_000, share=1)
    return out


def create(served: Served, cfg: respool_pb2.ResourcePoolConfig) -> str:
    reply = served.stub.CreateResourcePool(respool_pb2.CreateRequest(config=cfg), timeout=5,
                                           metadata=YARPC)
    assert not reply.HasField("error"), reply.error
    return str(reply.result.value)


def path(value: str) -> respool_pb2.ResourcePoolPath:
    return respool_pb2.ResourcePoolPath(value=value)


def pool_id(value: str) -> peloton_pb2.ResourcePoolID:
    return peloton_pb2.ResourcePoolID(value=value)


def test_create_get_lookup_query_at_both_names(served: Served) -> None:
    org = create(served, config("org", cpu=(4, 16)))
    reply = served.legacy("CreateResourcePool",
                          respool_pb2.CreateRequest(config=config("batch", org)),
                          respool_pb2.CreateResponse)
    assert not reply.HasField("error")
    batch = reply.result.value
    got = served.stub.GetResourcePool(respool_pb2.GetRequest(id=pool_id(org),
                                                             includeChildPools=True), timeout=5)
    assert got.poolinfo.path.value == "/org" and got.poolinfo.parent.value == "root"
    assert [c.value for c in got.poolinfo.children] == [batch]
    assert [c.path.value for c in got.childPools] == ["/org/batch"]
    assert got.childPools[0].config.owningTeam == "team6"
    cpu = got.poolinfo.config.resources[0]
    assert (cpu.kind, cpu.reservation, cpu.limit, cpu.type) == ("cpu", 4, 16, respool_pb2.ELASTIC)
    root = served.stub.GetResourcePool(respool_pb2.GetRequest(), timeout=5)
    assert root.poolinfo.id.value == "root" and root.poolinfo.path.value == "/"
    for call in (served.stub.LookupResourcePoolID,
                 lambda r, timeout: served.legacy("LookupResourcePoolID", r,
                                                  respool_pb2.LookupResponse)):
        assert call(respool_pb2.LookupRequest(path=path("/org/batch")), timeout=5).id.value \
            == batch
    pools = served.stub.Query(respool_pb2.QueryRequest(), timeout=5).resourcePools
    assert [p.path.value for p in pools] == ["/", "/org", "/org/batch"]
    assert [u.kind for u in pools[2].usage] == ["cpu", "memory", "disk", "gpu"]


def test_usage_shows_live_allocation(served: Served) -> None:
    leaf = create(served, config("leaf", cpu=(0, 8)))
    served.rm.enqueue_gangs(leaf, singles(tasks(3, cpu=2, mem=100)))
    served.rm.loops.admit_once()
    got = served.stub.GetResourcePool(respool_pb2.GetRequest(id=pool_id(leaf)), timeout=5)
    usage = {u.kind: (u.allocation, u.slack) for u in got.poolinfo.usage}
    assert usage["cpu"] == (6, 0) and usage["memory"] == (300, 0)


@pytest.mark.parametrize(("cfg", "words"), [
    (config("bad", cpu=(8, 4)), ["resources.limit", "below its reservation"]),
    (config("", cpu=(0, 4)), ["name"]),
    (config("neg", cpu=(-1, 4)), ["resources[0].reservation", ">= 0"]),
    (config("orphan", "no-such-pool"), ["parent_id", "does not exist"]),
])
def test_bad_configs_come_back_typed(served: Served, cfg: respool_pb2.ResourcePoolConfig,
                                     words: list[str]) -> None:
    reply = served.stub.CreateResourcePool(respool_pb2.CreateRequest(config=cfg), timeout=5)
    err = reply.error.invalidResourcePoolConfig
    assert err.id.value and not reply.result.value
    for word in words:
        assert word in err.message
    pools = served.stub.Query(respool_pb2.QueryRequest(), timeout=5).resourcePools
    assert [p.path.value for p in pools] == ["/"]  # nothing changed


def test_unknown_kind_and_child_rules(served: Served) -> None:
    cfg = config("x")
    cfg.resources.add(kind="bananas", limit=1)
    reply = served.stub.CreateResourcePool(respool_pb2.CreateRequest(config=cfg), timeout=5)
    assert "resources[3].kind" in reply.error.invalidResourcePoolConfig.message
    parent = create(served, config("p", cpu=(2, 4)))
    reply = served.stub.CreateResourcePool(
        respool_pb2.CreateRequest(config=config("c", parent, cpu=(0, 6))), timeout=5)
    assert "exceeds parent /p limit 4" in reply.error.invalidResourcePoolConfig.message
    create(served, config("c", parent, cpu=(1, 4)))
    reply = served.stub.CreateResourcePool(
        respool_pb2.CreateRequest(config=config("c", parent, cpu=(1, 4))), timeout=5)
    assert "already has a child named 'c'" in reply.error.invalidResourcePoolConfig.message


def test_get_and_update_errors(served: Served) -> None:
    got = served.stub.GetResourcePool(respool_pb2.GetRequest(id=pool_id("nope")), timeout=5)
    assert got.error.notFound.id.value == "nope" and not got.HasField("poolinfo")
    upd = served.stub.UpdateResourcePool(
        respool_pb2.UpdateRequest(id=pool_id("nope"), config=config("x")), timeout=5)
    assert upd.error.notFound.id.value == "nope"
    leaf = create(served, config("leaf"))
    upd = served.stub.UpdateResourcePool(
        respool_pb2.UpdateRequest(id=pool_id(leaf), config=config("leaf", cpu=(6, 3))),
        timeout=5)
    assert "below its reservation" in upd.error.invalidResourcePoolConfig.message
    upd = served.stub.UpdateResourcePool(
        respool_pb2.UpdateRequest(id=pool_id(leaf), config=config("leaf", cpu=(1, 3))),
        timeout=5)
    assert not upd.HasField("error")
    got = served.stub.GetResourcePool(respool_pb2.GetRequest(id=pool_id(leaf)), timeout=5)
    assert got.poolinfo.config.resources[0].limit == 3


def test_delete_rules(served: Served) -> None:
    org = create(served, config("org", cpu=(4, 16), mem=(2048, 4096)))
    busy = create(served, config("busy", org))
    idle = create(served, config("idle", org))
    served.rm.enqueue_gangs(busy, singles(tasks(1)))

    def delete(value: str) -> respool_pb2.DeleteResponse:
        out: respool_pb2.DeleteResponse = served.stub.DeleteResourcePool(
            respool_pb2.DeleteRequest(path=path(value)), timeout=5)
        return out

    assert delete("/org").error.isNotLeaf.id.value == org
    reply = delete("/org/busy")
    assert reply.error.isBusy.id.value == busy and "busy" in reply.error.isBusy.message
    assert delete("/org/nope").error.notFound.path.value == "/org/nope"
    assert delete("org").error.notFound.path.value == "org"
    assert "root" in delete("/").error.notDeleted.message
    assert not delete("/org/idle").HasField("error")
    got = served.stub.GetResourcePool(respool_pb2.GetRequest(id=pool_id(idle)), timeout=5)
    assert got.error.notFound.id.value == idle
    reply = served.legacy("DeleteResourcePool", respool_pb2.DeleteRequest(path=path("/org")),
                          respool_pb2.DeleteResponse)
    assert reply.error.isNotLeaf.id.value == org


def test_lookup_errors(served: Served) -> None:
    reply = served.stub.LookupResourcePoolID(respool_pb2.LookupRequest(path=path("a/b")),
                                             timeout=5)
    assert reply.error.invalidPath.path.value == "a/b"
    reply = served.stub.LookupResourcePoolID(respool_pb2.LookupRequest(path=path("/a")),
                                             timeout=5)
    assert reply.error.notFound.path.value == "/a"
