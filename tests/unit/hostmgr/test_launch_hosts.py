"""Launching on many hosts in one call (a job manager's launch round) and the host shapes
the other daemons ask for: the same results as one call per host, directly and over gRPC
(LaunchHosts, HostShapes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.gen.pelotonpy.internal.sched import sched_pb2 as spb
from peloton.api.ports_grpc.hostmgr_client import HOSTS_PER_LAUNCH, GrpcHostManager, shapes_from_pb
from peloton.api.ports_grpc.hostmgr_servicer import shapes_to_pb
from peloton.core.errors import Unimplemented
from peloton.core.feasibility import HostShape
from peloton.core.model.constraints import Label
from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.ports import shapes_of
from peloton.core.states import TaskState
from peloton.hostmgr.app import HostManager
from tests.harness.fake_host_backend import FakeBackend
from tests.unit.hostmgr.conftest import rid, spec


def free_cpu(hm: HostManager) -> dict[str, float]:
    lease = hm.acquire_hosts()
    hm.release_lease(lease.lease_id)
    return {o.hostname: o.available.cpu for o in lease.offers}


def test_launching_on_many_hosts_books_and_starts_each_and_names_each_hosts_failures(
        hm: HostManager, backend: FakeBackend) -> None:
    backend.remove_host("h2")
    failures = hm.launch_hosts({
        "h1": [spec(0, cpu=1), spec(1, cpu=5), spec(2, cpu=1)],  # 1 does not fit
        "h2": [spec(3)],  # gone: not reached
        "nowhere": [spec(4)],
    })
    assert {h: [(f.run_id, f.unreached) for f in fs] for h, fs in failures.items()} == {
        "h1": [(rid(1), False)], "h2": [(rid(3), True)], "nowhere": [(rid(4), True)]}
    assert "no room on h1" in failures["h1"][0].reason
    assert backend.launched == [("h1", [rid(0), rid(2)])]  # one call for the host
    assert free_cpu(hm) == {"h1": 2}
    # Again: idempotent, nothing handed to the host twice, no failure to report.
    assert hm.launch_hosts({"h1": [spec(0, cpu=1), spec(2, cpu=1)]}) == {}
    assert backend.launched == [("h1", [rid(0), rid(2)])]
    backend.report(rid(0), TaskState.SUCCEEDED)
    assert free_cpu(hm) == {"h1": 3}


def test_a_host_the_backend_refuses_fails_alone_and_holds_nothing(
        hm: HostManager, backend: FakeBackend) -> None:
    refused = backend.launch

    def launch(hostname: str, tasks: Sequence[LaunchSpec]) -> None:
        if hostname == "h2":
            raise ConnectionError("agent unreachable")
        refused(hostname, tasks)

    backend.launch = launch  # type: ignore[method-assign]
    failures = hm.launch_hosts({"h2": [spec(1)], "h1": [spec(0)]})
    assert list(failures) == ["h2"] and "agent unreachable" in failures["h2"][0].reason
    assert backend.launched == [("h1", [rid(0)])]
    assert free_cpu(hm) == {"h1": 3, "h2": 2}  # the refused run was unbooked


class _Channel:
    """A host manager's channel answering LaunchHosts (or UNIMPLEMENTED, as an older host
    manager does) and Launch: each host's run 0 fails."""

    def __init__(self, *, launch_hosts: bool) -> None:
        self.launch_hosts = launch_hosts
        self.calls: list[tuple[str, int]] = []

    def call(self, method: str, request: object, reply: type) -> object:
        if method == "LaunchHosts":
            assert isinstance(request, pb.LaunchHostsRequest)
            self.calls.append((method, len(request.hosts)))
            if not self.launch_hosts:
                raise Unimplemented("no LaunchHosts")
            return pb.LaunchHostsResponse(hosts=[
                pb.HostLaunchFailures(hostname=h.hostname, failures=[
                    spb.LaunchFailure(run_id=t.run_id, reason="no room")
                    for t in h.tasks if t.run_id == rid(0)])
                for h in request.hosts])
        assert isinstance(request, pb.LaunchRequest)
        self.calls.append((method, 1))
        return pb.LaunchResponse(failures=[spb.LaunchFailure(run_id=t.run_id, reason="no room")
                                           for t in request.tasks if t.run_id == rid(0)])


def client_on(channel: _Channel) -> GrpcHostManager:
    client = GrpcHostManager.__new__(GrpcHostManager)
    client._per_host_launch = False
    client.channel = channel  # type: ignore[assignment]
    return client


def test_launch_hosts_goes_in_calls_of_a_bounded_number_of_hosts() -> None:
    channel = _Channel(launch_hosts=True)
    hosts = {f"h{i}": [spec(0), spec(1)] for i in range(2 * HOSTS_PER_LAUNCH + 1)}
    failures = client_on(channel).launch_hosts(hosts)
    assert channel.calls == [("LaunchHosts", HOSTS_PER_LAUNCH)] * 2 + [("LaunchHosts", 1)]
    assert {h: [f.run_id for f in fs] for h, fs in failures.items()} == {h: [rid(0)] for h in hosts}


def test_launch_hosts_falls_back_to_launch_per_host_on_an_older_host_manager() -> None:
    channel = _Channel(launch_hosts=False)
    client = client_on(channel)
    failures = client.launch_hosts({"h1": [spec(0)], "h2": [spec(1)]})
    assert {h: [f.run_id for f in fs] for h, fs in failures.items()} == {"h1": [rid(0)]}
    assert client.launch_hosts({"h1": [spec(2)]}) == {}
    # LaunchHosts is asked once, then every host is launched on by itself.
    assert [m for m, _ in channel.calls] == ["LaunchHosts", "Launch", "Launch", "Launch"]


def test_host_shapes_travel_grouped_and_come_back_as_sent(
        hm: HostManager, backend: FakeBackend) -> None:
    backend.add_host("h3", cpu=4, mem_mb=4096, labels=(Label("zone", "a"),))
    backend.add_host("h0", cpu=4, mem_mb=4096)
    backend.remove_host("h2")
    want = shapes_of(hm.host_summaries())
    assert hm.host_shapes() == want
    reply = shapes_to_pb(want)
    assert len(reply.groups) == 3  # h0 and h1 share a shape; h2 is down; h3 has a label
    assert shapes_from_pb(pb.HostShapesResponse.FromString(reply.SerializeToString())) == want
    assert [s.hostname for s in want] == ["h0", "h1", "h2", "h3"]
    assert want[1] == HostShape("h1", Resources(4, 4096, 10_000), (), up=True)
    assert not want[2].up


def test_host_shapes_follow_a_host_that_joins(make_hm: Callable[..., HostManager],
                                              backend: FakeBackend) -> None:
    hm = make_hm()
    first = hm.host_shapes()
    assert hm.host_shapes() == first  # the same again (a cached reply over gRPC)
    backend.add_host("h3", cpu=8)
    assert [s.hostname for s in hm.host_shapes()] == ["h1", "h2", "h3"]
    backend.remove_host("h3")
    assert [s.up for s in hm.host_shapes()] == [True, True, False]
