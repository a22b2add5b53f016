"""The v0 HostService over real gRPC, called by a plain grpcio client built from our stubs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
import grpc
import pytest

from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2, host_svc_pb2_grpc
from peloton.api.gen.pelotonpy.api.maintenance import maintenance_pb2 as mpb
from peloton.api.grpc_server import GrpcServer
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.sla_policy import DrainMode
from peloton.core.model.task import TaskSpec
from peloton.core.states import TaskState
from peloton.hostmgr.app import HostManager
from peloton.hostmgr.config import HostManagerConfig
from peloton.storage import StoreOptions, open_store
from tests.harness.fake_host_backend import FakeBackend

RUN = "6d1b7c0e-0000-4000-8000-000000000002-0-1"


@dataclass
class Served:
    hm: HostManager
    backend: FakeBackend
    stub: host_svc_pb2_grpc.HostServiceStub
    channel: grpc.Channel
    port: int


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", StoreOptions(bootstrap=True))
    backend = FakeBackend()
    backend.add_host("h1")
    backend.add_host("h2")
    server = GrpcServer("127.0.0.1:0")
    hm = HostManager(store, backend, HostManagerConfig(recovery_grace=0.0), grpc_server=server)
    hm.start()
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield Served(hm, backend, host_svc_pb2_grpc.HostServiceStub(channel), channel,
                     server.port)
    finally:
        channel.close()
        server.stop(0)
        hm.stop()
        store.close()


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    """Yield to the host manager's greenlets until `predicate` holds (bounded)."""
    for _ in range(1000):
        if predicate():
            return
        gevent.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def states(stub: host_svc_pb2_grpc.HostServiceStub, *wanted: Any) -> dict[str, int]:
    reply = stub.QueryHosts(host_svc_pb2.QueryHostsRequest(host_states=wanted), timeout=5)
    return {h.hostname: h.state for h in reply.host_infos}


def test_query_hosts(served: Served) -> None:
    reply = served.stub.QueryHosts(host_svc_pb2.QueryHostsRequest(), timeout=5)
    assert [(h.hostname, h.ip, h.state, h.goal_state) for h in reply.host_infos] == [
        ("h1", "10.0.0.1", host_pb2.HOST_STATE_UP, host_pb2.HOST_STATE_UP),
        ("h2", "10.0.0.2", host_pb2.HOST_STATE_UP, host_pb2.HOST_STATE_UP)]
    assert states(served.stub, host_pb2.HOST_STATE_DOWN) == {}
    with pytest.raises(grpc.RpcError) as err:
        states(served.stub, host_pb2.HOST_STATE_INVALID)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_maintenance_drains_then_completes(served: Served) -> None:
    stub, hm = served.stub, served.hm
    assert hm.launch("h1", [LaunchSpec(RUN, TaskSpec(resources=Resources(1, 10)))]) == []
    served.backend.report(RUN, TaskState.RUNNING)
    reply = stub.StartMaintenance(host_svc_pb2.StartMaintenanceRequest(hostname="h1"), timeout=5)
    assert reply.hostname == "h1"
    assert states(stub, host_pb2.HOST_STATE_DRAINING) == {"h1": host_pb2.HOST_STATE_DRAINING}
    assert hm.draining_runs() == [("h1", RUN)]
    with pytest.raises(grpc.RpcError) as err:
        stub.CompleteMaintenance(host_svc_pb2.CompleteMaintenanceRequest(hostname="h1"), timeout=5)
    assert (err.value.code(), err.value.details()) == (grpc.StatusCode.NOT_FOUND,
                                                       "Host is not DOWN")  # Peloton's answer
    hm.kill([RUN])  # what the job manager does with a draining run
    wait_for(lambda: states(stub).get("h1") == host_pb2.HOST_STATE_DOWN, "h1 DOWN")
    reply = stub.CompleteMaintenance(host_svc_pb2.CompleteMaintenanceRequest(hostname="h1"),
                                     timeout=5)
    assert reply.hostname == "h1"
    assert states(stub) == {"h1": host_pb2.HOST_STATE_UP, "h2": host_pb2.HOST_STATE_UP}


def test_deprecated_hostnames_field_is_served(served: Served) -> None:
    stub = served.stub
    reply = stub.StartMaintenance(host_svc_pb2.StartMaintenanceRequest(hostnames=["h1", "h2"]),
                                  timeout=5)
    assert reply.hostname == ""
    wait_for(lambda: set(states(stub, host_pb2.HOST_STATE_DOWN)) == {"h1", "h2"}, "both DOWN")
    stub.CompleteMaintenance(host_svc_pb2.CompleteMaintenanceRequest(hostnames=["h1", "h2"]),
                             timeout=5)
    assert set(states(stub, host_pb2.HOST_STATE_UP)) == {"h1", "h2"}


#: Peloton's answers (pkg/hostmgr/hostsvc/handler.go and its drainer), case by case.
ERROR_CASES = [
    ("start on a host that is not an agent", "StartMaintenance",
     host_svc_pb2.StartMaintenanceRequest(hostname="ghost"),
     grpc.StatusCode.ABORTED, "host is not a Peloton agent"),
    ("start without a host", "StartMaintenance", host_svc_pb2.StartMaintenanceRequest(),
     grpc.StatusCode.ABORTED, "host is not a Peloton agent"),
    ("start on hosts (deprecated list) of which one is unknown", "StartMaintenance",
     host_svc_pb2.StartMaintenanceRequest(hostnames=["ghost", "spook"]),
     grpc.StatusCode.INTERNAL, "code:aborted message:host is not a Peloton agent; "
                               "code:aborted message:host is not a Peloton agent"),
    ("complete on an unknown host", "CompleteMaintenance",
     host_svc_pb2.CompleteMaintenanceRequest(hostname="ghost"),
     grpc.StatusCode.NOT_FOUND, "host info not found ghost"),
    ("complete on a host that is UP", "CompleteMaintenance",
     host_svc_pb2.CompleteMaintenanceRequest(hostname="h2"),
     grpc.StatusCode.NOT_FOUND, "Host is not DOWN"),
    ("complete on hosts (deprecated list)", "CompleteMaintenance",
     host_svc_pb2.CompleteMaintenanceRequest(hostnames=["ghost", "h2"]),
     grpc.StatusCode.INTERNAL, "code:not-found message:host info not found ghost; "
                               "code:not-found message:Host is not DOWN"),
]


def test_maintenance_errors_are_answered_as_peloton(served: Served) -> None:
    for name, method, request, code, text in ERROR_CASES:
        with pytest.raises(grpc.RpcError) as err:
            getattr(served.stub, method)(request, timeout=5)
        assert (err.value.code(), err.value.details()) == (code, text), name
    assert states(served.stub) == {"h1": host_pb2.HOST_STATE_UP, "h2": host_pb2.HOST_STATE_UP}
    # As in Peloton, the known hosts of a deprecated list are acted on; the rest fail.
    with pytest.raises(grpc.RpcError) as err:
        served.stub.StartMaintenance(host_svc_pb2.StartMaintenanceRequest(
            hostnames=["h1", "ghost"]), timeout=5)
    assert err.value.code() is grpc.StatusCode.INTERNAL
    assert states(served.stub)["h1"] != host_pb2.HOST_STATE_UP


def test_host_pool_methods_answer_as_peloton_with_host_pools_off(served: Served) -> None:
    # pkg/hostmgr/hostsvc/handler.go: yarpcerrors.UnimplementedErrorf("host pools not enabled")
    for method, request in (("ListHostPools", host_svc_pb2.ListHostPoolsRequest()),
                            ("CreateHostPool", host_svc_pb2.CreateHostPoolRequest(name="p")),
                            ("DeleteHostPool", host_svc_pb2.DeleteHostPoolRequest(name="p")),
                            ("ChangeHostPool", host_svc_pb2.ChangeHostPoolRequest(hostname="h1")),
                            ("MoveHosts", host_svc_pb2.MoveHostsRequest())):
        with pytest.raises(grpc.RpcError) as err:
            getattr(served.stub, method)(request, timeout=5)
        assert (err.value.code(), err.value.details()) == (
            grpc.StatusCode.UNIMPLEMENTED, "host pools not enabled"), method


def test_peloton_private_host_queries_answer_as_peloton(served: Served) -> None:
    """peloton.private.hostmgr.hostsvc.InternalHostService, the two queries Peloton's tools
    call (pkg/hostmgr/handler.go ClusterCapacity, GetHostsByQuery), over Peloton's names."""
    from peloton.api.gen.peloton.private.hostmgr.hostsvc import hostsvc_pb2, hostsvc_pb2_grpc

    private = hostsvc_pb2_grpc.InternalHostServiceStub(served.channel)
    assert served.hm.launch("h1", [LaunchSpec(RUN, TaskSpec(resources=Resources(1, 10)))]) == []
    served.backend.report(RUN, TaskState.RUNNING)
    capacity = private.ClusterCapacity(hostsvc_pb2.ClusterCapacityRequest(), timeout=5)
    assert not capacity.HasField("error")
    kinds = {r.kind: r.capacity for r in capacity.physicalResources}
    assert [r.kind for r in capacity.physicalResources] == ["cpu", "disk", "gpu", "memory"]
    assert (kinds["cpu"], kinds["memory"]) == (8.0, 8192.0)  # two 4-cpu, 4096 MB hosts
    held = {r.kind: r.capacity for r in capacity.resources}
    assert (held["cpu"], held["memory"]) == (1.0, 10.0)
    assert {r.kind: r.capacity for r in capacity.physicalSlackResources}["cpu"] == 0.0

    everything = private.GetHostsByQuery(hostsvc_pb2.GetHostsByQueryRequest(), timeout=5)
    by_name = {h.hostname: h for h in everything.hosts}
    assert set(by_name) == {"h1", "h2"}
    h1 = by_name["h1"]
    assert {r.name: r.scalar.value for r in h1.resources}["cpus"] == 3.0  # 4 - the run's 1
    assert [t.value for t in h1.tasks] == [RUN] and h1.status == "ready"
    # cpu at least 3.5 free: only h2; below 3.5: only h1; by name: only what was named.
    at_least = private.GetHostsByQuery(hostsvc_pb2.GetHostsByQueryRequest(
        resource={"cpuLimit": 3.5}), timeout=5)
    assert [h.hostname for h in at_least.hosts] == ["h2"]
    below = private.GetHostsByQuery(hostsvc_pb2.GetHostsByQueryRequest(
        resource={"cpuLimit": 3.5}, cmpLess=True), timeout=5)
    assert [h.hostname for h in below.hosts] == ["h1"]
    named = private.GetHostsByQuery(hostsvc_pb2.GetHostsByQueryRequest(hostnames=["h2"]),
                                    timeout=5)
    assert [h.hostname for h in named.hosts] == ["h2"]
    # The rest of Peloton's private service is not served.
    with pytest.raises(grpc.RpcError) as err:
        served.channel.unary_unary(
            "/peloton.private.hostmgr.hostsvc.InternalHostService/AcquireHostOffers")(
                b"", timeout=5)
    assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED


# -- our MaintenanceService extension, through the typed client ----------------------------------
def test_sla_and_forced_drains_through_the_maintenance_extension(served: Served) -> None:
    client = PelotonClient(hostmgr=f"127.0.0.1:{served.port}", timeout=5)
    try:
        assert served.hm.launch("h1", [LaunchSpec(RUN, TaskSpec(resources=Resources(1, 10)))]) == []
        served.backend.report(RUN, TaskState.RUNNING)
        sla = mpb.DrainSpec(mode=mpb.DRAIN_MODE_SLA_POLICY, timeout_secs=600,
                            default_policy=mpb.SlaPolicy(count=mpb.CountSlaPolicy(count=2)),
                            min_required_instances=20)
        hosts = client.drain_hosts(["h1", "h2"], sla)
        assert [h.hostname for h in hosts] == ["h1", "h2"]
        assert hosts[0].state == "HOST_STATE_DRAINING"
        assert hosts[0].drain.default_policy.count.count == 2
        assert hosts[0].drain.timeout_secs == 600 and hosts[0].drain.started_ms > 0
        assert served.hm.drain_requests()["h1"].mode is DrainMode.SLA_POLICY
        listed = client.list_host_drains()
        assert next((h.hostname, h.drain.mode) for h in listed) == ("h1", mpb.DRAIN_MODE_SLA_POLICY)
        forced = client.drain_hosts(["h1"], mpb.DrainSpec(mode=mpb.DRAIN_MODE_FORCE))
        assert forced[0].drain.mode == mpb.DRAIN_MODE_FORCE and not forced[0].drain.HasField(
            "timeout_secs")
    finally:
        client.close()


def test_bad_drains_name_the_field_and_change_nothing(served: Served) -> None:
    client = PelotonClient(hostmgr=f"127.0.0.1:{served.port}", timeout=5)
    cases = [
        (["h1", "ghost"], mpb.DrainSpec(mode=mpb.DRAIN_MODE_FORCE), NotFound,
         "hosts not known to the host manager: ghost"),
        ([], mpb.DrainSpec(mode=mpb.DRAIN_MODE_FORCE), InvalidArgument, "at least one host"),
        (["h1"], mpb.DrainSpec(mode=mpb.DRAIN_MODE_SLA_POLICY), InvalidArgument,
         "drain.default_policy"),
        (["h1"], mpb.DrainSpec(mode=mpb.DRAIN_MODE_SLA_POLICY, default_policy=mpb.SlaPolicy(
            percentage=mpb.PercentageSlaPolicy(percentage=101))), InvalidArgument,
         "drain.default_policy.percentage"),
        (["h1"], mpb.DrainSpec(mode=mpb.DRAIN_MODE_SLA_POLICY, timeout_secs=-5,
                               default_policy=mpb.SlaPolicy(count=mpb.CountSlaPolicy(count=1))),
         InvalidArgument, "drain.timeout_secs"),
        (["h1"], mpb.DrainSpec(mode=7), InvalidArgument, "drain.mode"),  # type: ignore[arg-type]
    ]
    try:
        for hostnames, spec, error, field in cases:
            with pytest.raises(error) as err:
                client.drain_hosts(hostnames, spec)
            assert field in str(err.value), (hostnames, spec, str(err.value))
        assert states(served.stub) == {"h1": host_pb2.HOST_STATE_UP, "h2": host_pb2.HOST_STATE_UP}
        assert client.list_host_drains() == []
    finally:
        client.close()
