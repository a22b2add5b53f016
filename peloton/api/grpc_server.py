"""A gRPC server with the standard health and reflection services.

Every daemon serves its APIs through `GrpcServer`; the health service
reports SERVING for each registered service once `start()` returns, and
NOT_SERVING after `stop()` begins, so load balancers and `peloton up`
scripts can wait on it.  Services behind a leader gate are *gated*: they
report SERVING only while this process leads (`set_serving`), so a load
balancer that checks a service by name skips standbys; the overall status
("") stays SERVING while the process is up, as a liveness probe expects.
Replies may be up to Peloton's 256 MiB (a 50,000-instance job's task list
does not fit grpcio's 4 MiB default); requests are refused above
`MAX_RECEIVE_BYTES` (64 MiB) with RESOURCE_EXHAUSTED before they are decoded
(see peloton/api/limits.py for the per-field maxima checked after that).

With a `Security`, every call is authenticated, authorized and audited
(peloton/api/auth_grpc.py) and, with TLS files, served over TLS (mutual TLS
when they name a CA).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent import futures
from typing import Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from peloton.api.auth_grpc import AuthInterceptor
from peloton.api.tls_grpc import server_credentials
from peloton.common.auth import Security

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
#: Largest request any server accepts (documented in README, Security).
MAX_RECEIVE_BYTES = 64 * 1024 * 1024
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


class ServiceHost(Protocol):
    """Where servicers are registered: a GrpcServer, or a recorder that serves them later
    (peloton.api.ports_grpc.leader_gate serves a daemon's services only while it leads)."""

    @property
    def server(self) -> grpc.Server:
        """The grpc.Server (or a stand-in) for generated `add_XServicer_to_server` calls."""
        ...

    def add_generic(self, handlers: Sequence[grpc.GenericRpcHandler], names: Sequence[str]) -> None:
        """Register generic handlers serving the fully-qualified service `names`."""
        ...

    def register_names(self, names: Sequence[str]) -> None:
        """Record services added through generated `add_*_to_server` helpers."""
        ...


class GrpcServer:
    """Owns one grpc.Server bound to one address."""

    def __init__(self, bind: str, *, max_workers: int = 64, security: Security | None = None,
                 interceptors: Sequence[grpc.ServerInterceptor] = ()) -> None:
        self.security = security or Security()
        #: Checks every call; daemons add resource guards to it (AuthInterceptor.add_guard).
        self.auth = AuthInterceptor(self.security)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                                   options=SERVER_OPTIONS,
                                   interceptors=[self.auth, *interceptors])
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        self._service_names: list[str] = [health.SERVICE_NAME]
        #: Gated service name -> serving now (see the module docstring).
        self._gated: dict[str, bool] = {}
        self._started = False
        self.port = self.add_port(bind)
        self.bind = bind

    def add_port(self, bind: str) -> int:
        """Also serve on `bind` (before start); returns the port bound."""
        tls = self.security.tls
        port = int(self._server.add_secure_port(bind, server_credentials(tls)) if tls is not None
                   else self._server.add_insecure_port(bind))
        if port == 0:
            raise OSError(f"cannot bind gRPC server to {bind}")
        return port

    @property
    def server(self) -> grpc.Server:
        """The underlying grpc.Server, for `add_XServicer_to_server` calls."""
        return self._server

    def add_generic(self, handlers: Sequence[grpc.GenericRpcHandler], names: Sequence[str]) -> None:
        """Register generic handlers serving the fully-qualified service `names`."""
        self._server.add_generic_rpc_handlers(tuple(handlers))
        self._service_names.extend(names)

    def register_names(self, names: Sequence[str]) -> None:
        """Record services added through generated `add_*_to_server` helpers."""
        self._service_names.extend(names)

    def start(self) -> None:
        """Start serving; health reports SERVING for every registered service."""
        reflection.enable_server_reflection(
            [*self._service_names, reflection.SERVICE_NAME], self._server)
        self._server.start()
        self._started = True
        self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        for name in self._service_names:
            self._health.set(name, _status(self._gated.get(name, True)))

    def gate_health(self, names: Sequence[str]) -> None:
        """Make `names` gated: NOT_SERVING until `set_serving(names, True)`."""
        self.set_serving(names, False)

    def set_serving(self, names: Sequence[str], serving: bool) -> None:
        """Report gated `names` as SERVING or NOT_SERVING (e.g. on gaining or losing leadership)."""
        for name in names:
            self._gated[name] = serving
            if self._started:
                self._health.set(name, _status(serving))

    def stop(self, grace: float = 2.0) -> None:
        """Report NOT_SERVING, then stop, letting in-flight calls finish within `grace`."""
        self._health.enter_graceful_shutdown()
        self._server.stop(grace).wait()


def _status(serving: bool) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
    return (health_pb2.HealthCheckResponse.SERVING if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING)
