"""A job manager over SQLite with fake resource and host managers, served on real gRPC.

The job manager lives on its own native thread with its own gevent hub,
as it would in its own process; the test thread is a plain grpcio client
(no monkey-patching).  `Cluster.on_hub` runs test code on the job
manager's hub (to drive the fakes, which are hub objects).  Tests wait
for states by polling with a deadline (`Cluster.until`), never by sleeping
a fixed time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import gevent
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
from peloton.jobmgr.servicers.hub import Hub
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
DEADLINE = 20.0


@dataclass
class Cluster:
    """The served job manager, its fakes and stubs for every service."""

    jm: JobManager
    clock: SkewedClock
    hosts: FakeHostManager
    rm: FakeResourceManager
    hub: Hub
    channel: grpc.Channel
    jobs: Any
    pods: Any
    watch: Any
    admin: Any
    updates: Any
    v0jobs: Any

    def on_hub(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the job manager's hub and return its result."""
        return self.hub.call(fn)

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
    box: dict[str, Any] = {}
    ready, stop = threading.Event(), threading.Event()

    def main() -> None:
        try:
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
            box.update(jm=jm, clock=clock, hosts=hosts, rm=rm, server=server, hub=Hub(), store=store)
        except BaseException as exc:
            box["error"] = exc
            raise
        finally:
            ready.set()
        while not stop.is_set():
            gevent.sleep(0.02)
        jm.stop()
        store.close()

    thread = threading.Thread(target=main, name="jobmgr-hub", daemon=True)
    thread.start()
    assert ready.wait(DEADLINE), "job manager did not start"
    if "error" in box:
        raise box["error"]
    channel = grpc.insecure_channel(f"127.0.0.1:{box['server'].port}")
    try:
        yield Cluster(box["jm"], box["clock"], box["hosts"], box["rm"], box["hub"], channel,
                      stateless_svc_pb2_grpc.JobServiceStub(channel),
                      pod_svc_pb2_grpc.PodServiceStub(channel),
                      watch_svc_pb2_grpc.WatchServiceStub(channel),
                      admin_svc_pb2_grpc.AdminServiceStub(channel),
                      update_svc_pb2_grpc.UpdateServiceStub(channel),
                      job_pb2_grpc.JobManagerStub(channel))
    finally:
        channel.close()
        box["server"].stop(0)  # from this thread: handlers may still need the hub to finish
        stop.set()
        thread.join(DEADLINE)
