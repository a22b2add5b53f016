"""A job manager over SQLite with fake resource and host managers, served on real gRPC.

As in `peloton up`: the test process is monkey-patched (tests/conftest.py), the job
manager's greenlets, the gRPC handlers (gRPC's gevent mode) and the test itself all run
on one hub, and the store's transactions run on its thread pool.  The test is a plain
gRPC client of the served APIs and may read or drive the fakes and the job manager
directly (nothing else runs while it does: a greenlet only yields when it waits).  Tests
wait for states by polling with a deadline (`Cluster.until`), never by sleeping a fixed
time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from peloton.api.gen.peloton.api.v0.job import job_pb2_grpc
from peloton.api.gen.peloton.api.v0.update.svc import update_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.job.stateless.svc import stateless_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.pod.svc import pod_svc_pb2_grpc
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2_grpc
from peloton.api.grpc_server import GrpcServer
from peloton.jobmgr.app import JobManager
from peloton.jobmgr.config import JobManagerConfig
from peloton.storage import StoreOptions, open_store
from tests.fakes.hostmgr import FakeHostManager
from tests.fakes.resmgr import FakeResourceManager

T = TypeVar("T")


class SkewedClock:
    """The system clock plus an offset a test moves forward (both readings move together)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def wall(self) -> float:
        return time.time() + self.offset

#: Longest any test waits for a state (a hung test fails instead of blocking CI).
DEADLINE = 60.0


@dataclass
class Cluster:
    """The served job manager, its fakes and stubs for every service."""

    jm: JobManager
    clock: SkewedClock
    hosts: FakeHostManager
    rm: FakeResourceManager
    channel: grpc.Channel
    jobs: Any
    pods: Any
    watch: Any
    admin: Any
    updates: Any
    v0jobs: Any

    def until(self, probe: Callable[[], T | None], what: str, deadline: float = DEADLINE) -> T:
        """Poll `probe` until it returns something truthy; fail naming `what` after `deadline`."""
        end = time.monotonic() + deadline
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > end:
                pytest.fail(f"timed out after {deadline}s waiting for {what}")
            time.sleep(0.02)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", StoreOptions(bootstrap=True))
    hosts = FakeHostManager()
    for i in range(4):
        hosts.add_host(f"host-{i}", cpu=64, mem=65536)
    rm = FakeResourceManager(hosts)
    server = GrpcServer("127.0.0.1:0", max_workers=32)
    config = JobManagerConfig(poll_timeout=0.05, runtime_update_interval=0.05)
    clock = SkewedClock()
    jm = JobManager(store, rm, hosts, config, grpc=server, clock=clock)
    jm.start()
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield Cluster(jm, clock, hosts, rm, channel,
                      stateless_svc_pb2_grpc.JobServiceStub(channel),
                      pod_svc_pb2_grpc.PodServiceStub(channel),
                      watch_svc_pb2_grpc.WatchServiceStub(channel),
                      admin_svc_pb2_grpc.AdminServiceStub(channel),
                      update_svc_pb2_grpc.UpdateServiceStub(channel),
                      job_pb2_grpc.JobManagerStub(channel))
    finally:
        channel.close()
        server.stop(0)
        jm.stop()
        store.close()
