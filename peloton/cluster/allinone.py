"""`peloton up`: the whole cluster in one process on one machine.

At this stage it serves the gRPC endpoint (with health and reflection) that
every later daemon registers its APIs on; the daemons themselves are
composed here as they land.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass

from peloton.api.grpc_server import GrpcServer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UpConfig:
    """Options of `peloton up`."""

    host: str = "127.0.0.1"
    grpc_port: int = 5392


class AllInOne:
    """Every daemon of a one-machine cluster; `start()` then `stop()`."""

    def __init__(self, config: UpConfig) -> None:
        self.config = config
        self.grpc = GrpcServer(f"{config.host}:{config.grpc_port}")

    @property
    def grpc_address(self) -> str:
        """host:port clients dial."""
        return f"{self.config.host}:{self.grpc.port}"

    def start(self) -> None:
        """Start serving."""
        self.grpc.start()

    def stop(self) -> None:
        """Stop everything, newest first."""
        self.grpc.stop()


def run(config: UpConfig, announce: bool = True) -> None:
    """Run until SIGINT/SIGTERM, then stop cleanly."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = AllInOne(config)
    cluster.start()
    if announce:
        print(f"peloton up: gRPC API (v0, v1alpha, health, reflection) on {cluster.grpc_address}",
              flush=True)
        print("press Ctrl-C to stop", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        cluster.stop()
        if announce:
            print("peloton up: stopped", flush=True)
