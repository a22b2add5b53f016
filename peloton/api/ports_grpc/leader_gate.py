"""Serve a daemon's APIs only while it leads its role; standbys answer UNAVAILABLE.

In multi-process mode every leadership term builds fresh daemon objects
(a term starts from storage, never from what a previous term left in
memory).  They register their servicers on a `ServiceRecorder` instead of
the process's GrpcServer, which cannot take services once it serves; the
process installs one `LeaderGate` for all of the role's service names, and
the gate routes each call:

* while a term is open, to the handler that term's objects registered,
  adding the `peloton-term` trailer to answers of the private services
  (a caller seeing it change knows the daemon lost its in-memory state);
* otherwise with UNAVAILABLE "call to non-leader node", what Peloton's
  leader-check middleware answers, so callers retry elsewhere.

A term opens only after its objects started (recovery done) and closes
before they stop, so no call ever reaches a half-started or stopping term.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from peloton.api.client_transport import NON_LEADER
from peloton.api.grpc_server import GrpcServer
from peloton.api.ports_grpc.channel import TERM_KEY

#: Services whose answers carry the term trailer (our daemon-to-daemon services).
PRIVATE_PREFIX = "pelotonpy.internal."


class ServiceRecorder:
    """A stand-in GrpcServer (a `ServiceHost`) that keeps what is registered on it."""

    def __init__(self) -> None:
        self.handlers: list[grpc.GenericRpcHandler] = []
        self.names: list[str] = []

    @property
    def server(self) -> ServiceRecorder:
        """Itself: generated `add_XServicer_to_server` helpers register here too."""
        return self

    def add_generic(self, handlers: Sequence[grpc.GenericRpcHandler], names: Sequence[str]) -> None:
        """Keep generic handlers serving `names`."""
        self.handlers.extend(handlers)
        self.names.extend(names)

    def register_names(self, names: Sequence[str]) -> None:
        """Keep names of services added through generated helpers."""
        self.names.extend(names)

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        """What generated helpers call (grpc.Server's method)."""
        self.handlers.extend(handlers)

    def add_registered_method_handlers(self, name: str, handlers: dict[str, Any]) -> None:
        """Ignored: generated helpers register the same handlers generically too."""


class _Term:
    """The handlers of one open term, looked up once per method."""

    def __init__(self, term: str, recorder: ServiceRecorder) -> None:
        self.term = term
        self._handlers = list(recorder.handlers)
        self._cache: dict[str, grpc.RpcMethodHandler | None] = {}

    def lookup(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method
        if method in self._cache:
            return self._cache[method]
        found = None
        for handler in self._handlers:
            found = handler.service(details)
            if found is not None:
                break
        if found is not None and method.startswith("/" + PRIVATE_PREFIX):
            found = _with_term(found, self.term)
        self._cache[method] = found
        return found


def _with_term(handler: grpc.RpcMethodHandler, term: str) -> grpc.RpcMethodHandler:
    if handler.unary_unary is None:
        return handler
    call = handler.unary_unary
    trailer = ((TERM_KEY, term),)

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        context.set_trailing_metadata(trailer)
        return call(request, context)

    return grpc.unary_unary_rpc_method_handler(
        unary, request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)


def _non_leader(request: Any, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNAVAILABLE, NON_LEADER)


#: Raw bytes in, nothing out: the call is refused before anything is decoded.  A unary
#: handler also ends a server-streaming call with this status.
_REFUSE = grpc.unary_unary_rpc_method_handler(_non_leader)


class LeaderGate(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Routes calls of `names` to the open term, or refuses them; see the module docstring."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(dict.fromkeys(names))
        self._services = frozenset(self.names)
        self._term: _Term | None = None
        self._server: GrpcServer | None = None

    def install(self, server: GrpcServer) -> None:
        """Serve the gated names on `server` (before it starts); their health follows the gate."""
        server.add_generic([self], self.names)
        server.gate_health(self.names)
        self._server = server

    @property
    def term(self) -> str | None:
        """The open term, or None while this process does not lead."""
        current = self._term
        return current.term if current is not None else None

    def open(self, term: str, recorder: ServiceRecorder) -> None:
        """Start serving what `recorder` holds, as term `term`."""
        self._term = _Term(term, recorder)
        if self._server is not None:
            self._server.set_serving(self.names, True)

    def close(self) -> None:
        """Refuse every call from now on (calls in flight finish on their term)."""
        self._term = None
        if self._server is not None:
            self._server.set_serving(self.names, False)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        """The handler for one call (gRPC asks every generic handler in turn)."""
        method = handler_call_details.method
        if method[1:].rpartition("/")[0] not in self._services:
            return None
        current = self._term
        if current is None:
            return _REFUSE
        return current.lookup(handler_call_details)
