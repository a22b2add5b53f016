"""Authentication, authorization and auditing of every gRPC call, as one server interceptor.

Every call to a service whose name starts with `peloton` (Peloton's API and
our `pelotonpy.*` services; health checks and reflection stay open, as in
Peloton's auth middleware) is:

1. authenticated: `username`/`password` metadata (Peloton's BASIC scheme),
   `authorization: Bearer <token>`, or the verified client certificate;
   with nothing presented, the caller is the default user, or
   UNAUTHENTICATED if there is none;
2. authorized by method: the role must accept `<service>:<method>` (for a
   v0 service called at its legacy path, the rule may name either path),
   else PERMISSION_DENIED "<user> is not permitted to call <method> in
   <service>" (Peloton's wording, plus who);
3. authorized by resource, when a guard is installed for the service
   (peloton/api/auth_jobs.py: pools, job owners, task users);
4. run with the principal available to the servicer (`current_principal()`),
5. audited when it changes something (and always when it was refused).

With authentication off every caller is let through, and nothing is audited.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc

from peloton.api.service_names import LEGACY_ALIASES
from peloton.api.tls_grpc import peer_certificate_name
from peloton.common.auth import Credentials, Principal, Security
from peloton.core.errors import PelotonError, PermissionDenied, Unauthenticated

_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "peloton_principal", default=None)

#: Method-name prefixes of calls that change nothing (not audited when allowed).
READ_PREFIXES = ("Get", "Query", "List", "Browse", "Lookup", "Login", "WhoAmI", "Heartbeat",
                 "ReportStatus", "Poll", "Acquire", "Dequeue", "Watch", "Check")
READ_SERVICES = frozenset({"peloton.api.v1alpha.watch.svc.WatchService"})
#: Internal services whose calls are too frequent to audit, except these methods.
AUDITED_INTERNAL = frozenset({"pelotonpy.internal.agent.AgentRegistry/Register"})
#: Services every authenticated caller may use (logging in needs no rule).
OPEN_SERVICES = frozenset({"pelotonpy.auth.AuthService"})
_CANONICAL = {alias: name for name, alias in LEGACY_ALIASES.items()}


def current_principal() -> Principal | None:
    """The caller of the call being served (None outside a call, or without the interceptor)."""
    return _principal.get()


class ResourceGuard(Protocol):
    """Resource-level authorization of one group of services (after the method check)."""

    def check(self, principal: Principal, service: str, method: str, request: Any) -> str:
        """Raise PermissionDenied naming what is denied; returns the audit target ("" if none)."""
        ...


def mutating(service: str, method: str) -> bool:
    """Whether a call may change something (and so is audited)."""
    if service in READ_SERVICES or method.startswith(READ_PREFIXES):
        return False
    if service.startswith("pelotonpy.internal."):
        return f"{service}/{method}" in AUDITED_INTERNAL
    return True


class AuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """See the module docstring."""

    def __init__(self, security: Security) -> None:
        self.security = security
        self._guards: list[tuple[str, ResourceGuard]] = []

    def add_guard(self, service_prefix: str, guard: ResourceGuard) -> None:
        """Check calls of services starting with `service_prefix` with `guard` too."""
        self._guards.append((service_prefix, guard))

    def intercept_service(self, continuation: Callable[[Any], Any],
                          details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        if handler is None or not self.security.enabled:
            return handler
        service, _, method = details.method.lstrip("/").rpartition("/")
        if not service.startswith("peloton"):
            return handler
        service = _CANONICAL.get(service, service)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler

    # -- the checks -------------------------------------------------------------------------
    def authenticate(self, context: grpc.ServicerContext) -> Principal:
        """The caller of one call; Unauthenticated if its credentials are wrong or missing."""
        creds = Credentials.from_metadata(context.invocation_metadata() or (),
                                          peer_certificate_name(context))
        return self.security.authenticator.authenticate(creds)

    def authorize(self, principal: Principal, service: str, method: str, request: Any) -> str:
        """PermissionDenied unless `principal` may make this call; returns the audit target."""
        if service not in OPEN_SERVICES:
            names = [(service, method)]
            alias = LEGACY_ALIASES.get(service)
            if alias:
                names.append((alias, method))
            role = principal.role
            accepted = any(r.matches(n) for r in role.accept for n in names)
            rejected = any(r.matches(n) for r in role.reject for n in names)
            if not accepted or rejected:
                raise PermissionDenied(f"{principal.display} is not permitted to call {method} "
                                       f"in {service}")
        target = ""
        for prefix, guard in self._guards:
            if service.startswith(prefix) and not _undecoded(request):
                target = guard.check(principal, service, method, request)
        return target

    def admit(self, context: grpc.ServicerContext, service: str, method: str,
              request: Any) -> tuple[Principal, str]:
        """Authenticate and authorize one call; (principal, audit target), or abort it."""
        where = f"{service}/{method}"
        try:
            principal = self.authenticate(context)
        except Unauthenticated as exc:
            self._refuse(context, exc, _who(context), "", where)
            raise  # unreachable: abort raises
        try:
            return principal, self.authorize(principal, service, method, request)
        except PermissionDenied as exc:
            self._refuse(context, exc, principal.display, principal.method, where)
            raise

    def _refuse(self, context: grpc.ServicerContext, exc: PelotonError, who: str, how: str,
                where: str) -> None:
        code = (grpc.StatusCode.UNAUTHENTICATED if isinstance(exc, Unauthenticated)
                else grpc.StatusCode.PERMISSION_DENIED)
        self.security.audit.record(who=who, how=how, front="grpc", what=where,
                                   result=f"{code.name}: {exc.message}")
        context.abort(code, exc.message)

    def _unary(self, fn: Callable[[Any, Any], Any], service: str, method: str
               ) -> Callable[[Any, grpc.ServicerContext], Any]:
        where = f"{service}/{method}"
        audited = mutating(service, method)

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            principal, target = self.admit(context, service, method, request)
            token = _principal.set(principal)
            result = "OK"
            try:
                return fn(request, context)
            except BaseException as exc:
                result = _outcome(exc, context)
                raise
            finally:
                _principal.reset(token)
                if audited:
                    self.security.audit.record(who=principal.display, how=principal.method,
                                               front="grpc", what=where, target=target,
                                               result=_final(result, context))

        return call

    def _stream(self, fn: Callable[[Any, Any], Iterator[Any]], service: str, method: str
                ) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            self.admit(context, service, method, request)  # streams are reads: not audited
            yield from fn(request, context)

        return call


def _undecoded(request: Any) -> bool:
    # service_registry hands undecodable requests on as a stand-in; the servicer wrapper
    # refuses them with INVALID_ARGUMENT, so guards never see them.
    return not hasattr(request, "DESCRIPTOR")


def _who(context: grpc.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "username" and value:
            return f"{str(value)[:64]} (unverified)"
    return "(anonymous)"


def _outcome(exc: BaseException, context: grpc.ServicerContext) -> str:
    if isinstance(exc, PelotonError):
        return f"{exc.kind.upper()}: {exc.message}"
    return f"ERROR: {type(exc).__name__}"


def _final(result: str, context: grpc.ServicerContext) -> str:
    code = context.code() if hasattr(context, "code") else None
    if code is not None and code != grpc.StatusCode.OK and result == "OK":
        details = context.details() if hasattr(context, "details") else ""
        return f"{code.name}: {details or ''}".strip()
    return result
