"""LaunchHosts and AdoptHosts requests carry runs by host the same way (hostmgr_client.py's
`hosts_request`): one HostRuns per host, one spec table the whole call shares, and the host
manager reads back exactly the launches sent."""

from __future__ import annotations

from peloton.api.convert.private_hosts import launches_from_table, task_spec_from_pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.ports_grpc.hostmgr_client import GrpcHostManager, hosts_request
from peloton.core.model.resources import Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import TaskSpec

SMALL = TaskSpec(name="small", resources=Resources(cpu=1, mem_mb=64))
BIG = TaskSpec(name="big", resources=Resources(cpu=4, mem_mb=512))
RUNS = {"h1": [LaunchSpec("j-0-1", SMALL, (("http", 31000),), "pool"),
               LaunchSpec("j-1-1", BIG)],
        "h2": [LaunchSpec("j-2-3", SMALL, (), "pool", "vol-1", True)]}


def read_back(request: pb.LaunchHostsRequest | pb.AdoptHostsRequest
              ) -> dict[str, list[LaunchSpec]]:
    """What the host manager decodes from a request (its servicer's steps)."""
    table = [task_spec_from_pb(s) for s in request.specs]
    return {h.hostname: launches_from_table(table, h.tasks) for h in request.hosts}


def test_both_requests_carry_every_hosts_runs_with_one_shared_spec_table() -> None:
    launch = hosts_request(pb.LaunchHostsRequest(), RUNS.items())
    adopt = hosts_request(pb.AdoptHostsRequest(), RUNS.items())
    assert isinstance(launch, pb.LaunchHostsRequest) and isinstance(adopt, pb.AdoptHostsRequest)
    for request in (launch, adopt):
        assert [h.hostname for h in request.hosts] == ["h1", "h2"]
        assert len(request.specs) == 2  # SMALL on both hosts is one entry
        assert read_back(request) == RUNS


class _Recorder:
    """A channel that keeps the requests it is given and answers each with an empty reply."""

    def __init__(self) -> None:
        self.requests: list[object] = []

    def call(self, method: str, request: object, reply: type) -> object:
        self.requests.append(request)
        return reply()


def test_the_client_sends_what_the_helper_builds_for_launches_and_adoptions() -> None:
    channel = _Recorder()
    client = GrpcHostManager.__new__(GrpcHostManager)
    client._per_host_launch = client._per_host_adopt = False
    client.channel = channel  # type: ignore[assignment]
    client.launch_hosts(RUNS)
    client.adopt_hosts(RUNS)
    launch, adopt = channel.requests
    assert isinstance(launch, pb.LaunchHostsRequest) and isinstance(adopt, pb.AdoptHostsRequest)
    assert read_back(launch) == read_back(adopt) == RUNS
