"""Put a daemon object behind its private gRPC service, in-process, for port-level tests.

`over_grpc(real)` serves `real` (a ResourceManager, a HostManager, or a fake
implementing the same port) on a GrpcServer on a free port and returns a
`Wired` object: the port's methods go through the gRPC client adapter
(peloton.api.ports_grpc), everything else (test helpers, internals a test
inspects) is read from `real`.  The same test body then checks the direct
wiring of `peloton up` and the gRPC wiring of multi-process mode.
"""

from __future__ import annotations

from typing import Any

from peloton.api.grpc_server import GrpcServer
from peloton.api.ports_grpc.channel import StaticTarget
from peloton.api.ports_grpc.hostmgr_client import GrpcHostManager
from peloton.api.ports_grpc.hostmgr_servicer import serve_host_manager
from peloton.api.ports_grpc.resmgr_client import GrpcResourceManager
from peloton.api.ports_grpc.resmgr_servicer import serve_resource_manager
from peloton.core.ports import HostManagerPort, ResourceManagerPort
from peloton.hostmgr.events import EventLog


def port_methods(protocol: type) -> frozenset[str]:
    """The public method names a port Protocol declares."""
    return frozenset(n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_"))


RESMGR_METHODS = port_methods(ResourceManagerPort)
HOSTMGR_METHODS = port_methods(HostManagerPort)


class Wired:
    """`real`, with its port methods called through `client`; see the module docstring."""

    def __init__(self, real: Any, client: Any, methods: frozenset[str], server: GrpcServer) -> None:
        self.__dict__.update(_real=real, _client=client, _methods=methods, server=server)

    def __getattr__(self, name: str) -> Any:
        if name in self._methods:
            return getattr(self._client, name)
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)

    @property
    def server_address(self) -> str:
        """Where the service answers."""
        return f"127.0.0.1:{self.server.port}"

    def close(self) -> None:
        """Stop the server and close the client."""
        self._client.close()
        self.server.stop(0)


def over_grpc(real: Any, *, stream: Any = None, timeout: float = 5.0) -> Wired:
    """Serve `real`'s port on a free port and wire a client to it (resmgr or hostmgr, by the
    methods `real` has); `stream` is the host manager's event log (default `real.events`
    when that is one; a fake's list of events is not, and an empty log is served then:
    nothing reads the stream over this wire)."""
    server = GrpcServer("127.0.0.1:0")
    target = StaticTarget([f"127.0.0.1:{server.port}"])
    client: Any
    if hasattr(real, "acquire_hosts"):
        if stream is None:
            events = getattr(real, "events", None)
            stream = events if isinstance(events, EventLog) else EventLog(
                100, ("resmgr",), lambda trimmed: None)
        serve_host_manager(server, real, stream)
        client, methods = GrpcHostManager(target, caller="test", timeout=timeout), HOSTMGR_METHODS
    else:
        serve_resource_manager(server, real)
        client, methods = GrpcResourceManager(target, caller="test", timeout=timeout), RESMGR_METHODS
    server.start()
    return Wired(real, client, methods, server)
