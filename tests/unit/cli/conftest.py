"""Fixtures: one real gRPC server on 127.0.0.1:0 serving every fake, and a CLI runner for it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from peloton.api import service_registry
from peloton.api.gen.peloton.api.v0.host.svc import host_svc_pb2_grpc
from peloton.api.gen.peloton.api.v0.job import job_pb2_grpc
from peloton.api.gen.peloton.api.v0.respool import respool_pb2_grpc
from peloton.api.gen.peloton.api.v0.task import task_pb2_grpc
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2_grpc
from peloton.api.gen.pelotonpy.auth import auth_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from tests.unit.cli import fakes, fakes_auth, fakes_v1


@dataclass
class Served:
    """The running fakes: their address and shared state."""

    address: str
    world: fakes.World
    stateless: fakes_v1.StatelessState


@pytest.fixture(scope="session")
def served() -> Iterator[Served]:
    """All fakes on one real server (the CLI is pointed at it for all three daemons)."""
    world, state = fakes.World(), fakes_v1.StatelessState()
    server = GrpcServer("127.0.0.1:0", max_workers=16)
    registrations = [
        (respool_pb2_grpc.add_ResourceManagerServicer_to_server, fakes.FakeResourceManager(world)),
        (job_pb2_grpc.add_JobManagerServicer_to_server, fakes.FakeJobManager(world)),
        (task_pb2_grpc.add_TaskManagerServicer_to_server, fakes.FakeTaskManager(world)),
        (host_svc_pb2_grpc.add_HostServiceServicer_to_server, fakes.FakeHostService(world)),
        (update_svc_pb2_grpc.add_UpdateServiceServicer_to_server, fakes.FakeUpdateService(world)),
        (stateless_svc_pb2_grpc.add_JobServiceServicer_to_server, fakes_v1.FakeJobService(world, state)),
        (pod_svc_pb2_grpc.add_PodServiceServicer_to_server, fakes_v1.FakePodService(world)),
        (watch_svc_pb2_grpc.add_WatchServiceServicer_to_server, fakes_v1.FakeWatchService(world)),
        (auth_pb2_grpc.add_AuthServiceServicer_to_server, fakes_auth.FakeAuthService(world)),
    ]
    for add, servicer in registrations:
        service_registry.register(server, add, servicer)
    server.start()
    try:
        yield Served(f"127.0.0.1:{server.port}", world, state)
    finally:
        server.stop(grace=0)


@pytest.fixture
def world(served: Served) -> fakes.World:
    """The fakes' state, reset for each test."""
    served.world.__init__()  # type: ignore[misc]
    served.stateless.__init__()  # type: ignore[misc]
    return served.world


@pytest.fixture
def stateless_state(served: Served, world: fakes.World) -> fakes_v1.StatelessState:
    """The stateless fake's state (reset with `world`)."""
    return served.stateless


@dataclass
class Peloton:
    """Runs `peloton <args>` against the fakes."""

    address: str

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str] | None = None,
                 address: str | None = None) -> Result:
        where = address or self.address
        argv = ["-m", where, "-v", where, "-u", where, "--poll-interval", "0.01", *args]
        result = CliRunner().invoke(cli, argv, input=input, env=env)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result


@pytest.fixture
def peloton(served: Served, world: fakes.World) -> Peloton:
    """The CLI, pointed at the fakes for all three daemons."""
    return Peloton(served.address)
