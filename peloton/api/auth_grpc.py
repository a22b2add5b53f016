"""Authentication, authorization and auditing of every gRPC call, as one server interceptor.

Every call to a service whose name starts with `peloton` (Peloton's API and
our `pelotonpy.*` services; health checks and reflection stay open, as in
Peloton's auth middleware) is:

1. authenticated: `username`/`password` metadata (Peloton's BASIC scheme),
   `authorization: Bearer <token>`, or the verified client certificate;
   with nothing presented, the caller is the default user, or
   UNAUTHENTICATED if there is none; a call another job manager member
   relays is its caller's, named in `peloton-caller` and believed only from
   an internal peer (peloton/common/auth/authenticator.py);
2. authorized by method: the role must accept `<service>:<method>` (for a
   v0 service called at its legacy path, the rule may name either path),
   else PERMISSION_DENIED "<user> is not permitted to call <method> in
   <service>" (Peloton's wording, plus who);
3. authorized by resource, when a guard is installed for the service
   (peloton/api/auth_jobs.py: pools, job owners, task users);
4. run with the principal available to the servicer (`current_principal()`,
   streams included),
5. audited when it changes something, and always when it was refused: by
   the checks above or by the servicer (PERMISSION_DENIED, UNAUTHENTICATED,
   for reads and streams too), with who ("anonymous" when no credentials
   were presented or they were wrong), the method and the target the
   request names (`target_of`: a job, pod, update, host or pool).

With authentication off every caller is let through, and nothing is audited.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message

from peloton.api.service_names import LEGACY_ALIASES
from peloton.api.tls_grpc import peer_certificate_name
from peloton.common.auth import Credentials, Principal, Security
from peloton.common.auth.audit import ANONYMOUS, who_of
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
#: Status codes that are refusals (always audited).
REFUSALS = frozenset({grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED})
#: Message types naming what a call acts on, and the word the audit log calls them.
_TARGET_TYPES = {"JobID": "job", "PodName": "pod", "UpdateID": "update",
                 "ResourcePoolID": "pool", "ResourcePoolPath": "pool"}
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
            self._refuse(context, exc, _who(context), "", where, request)
            raise  # unreachable: abort raises
        try:
            return principal, self.authorize(principal, service, method, request)
        except PermissionDenied as exc:
            self._refuse(context, exc, who_of(principal), principal.method, where, request)
            raise

    def _refuse(self, context: grpc.ServicerContext, exc: PelotonError, who: str, how: str,
                where: str, request: Any) -> None:
        code = (grpc.StatusCode.UNAUTHENTICATED if isinstance(exc, Unauthenticated)
                else grpc.StatusCode.PERMISSION_DENIED)
        self.security.audit.record(who=who, how=how, front="grpc", what=where,
                                   target=target_of(request), result=f"{code.name}: {exc.message}")
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
                refused = _refused(context)
                if audited or refused:
                    self.security.audit.record(who=who_of(principal), how=principal.method,
                                               front="grpc", what=where,
                                               target=target or target_of(request),
                                               result=_final(result, context))

        return call

    def _stream(self, fn: Callable[[Any, Any], Iterator[Any]], service: str, method: str
                ) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
        where = f"{service}/{method}"

        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            # Streams are reads: audited only when refused.
            principal, target = self.admit(context, service, method, request)
            replies = iter(fn(request, context))
            try:
                while True:
                    # The principal is set around each step of the servicer, not across
                    # the yields: a stream may be closed, or collected, in another context.
                    token = _principal.set(principal)
                    try:
                        reply = next(replies)
                    except StopIteration:
                        return
                    finally:
                        _principal.reset(token)
                    yield reply
            except BaseException as exc:
                if _refused(context):
                    self.security.audit.record(
                        who=who_of(principal), how=principal.method, front="grpc", what=where,
                        target=target or target_of(request),
                        result=_final(_outcome(exc, context), context))
                raise
            finally:
                close = getattr(replies, "close", None)
                if close is not None:  # as `yield from` would: the servicer's cleanup runs
                    close()

        return call


def target_of(request: Any) -> str:
    """What a request names, for the audit log: "job <id>", "pod <name>", "update <id>",
    "pool <id or path>", "host <name>" ("" when it names none of these)."""
    if not isinstance(request, Message) or _undecoded(request):
        return ""
    found: list[str] = []
    for field, value in request.ListFields():
        if field.message_type is not None and not field.is_repeated:
            kind = _TARGET_TYPES.get(field.message_type.name)
            named = str(getattr(value, "value", None) or "")
            if kind is not None and named:
                found.append(f"{kind} {named}")
            elif field.name in ("agent", "config", "spec", "jobConfig"):
                inner = target_of(value)
                if inner:
                    found.append(inner)
        elif field.name == "hostname" and value:
            found.append(f"host {value}")
        elif field.name == "hostnames" and value:
            found.append(f"host {','.join(list(value)[:10])}")
    return ", ".join(dict.fromkeys(found))[:500]


def _undecoded(request: Any) -> bool:
    # service_registry hands undecodable requests on as a stand-in; the servicer wrapper
    # refuses them with INVALID_ARGUMENT, so guards never see them.
    return not hasattr(request, "DESCRIPTOR")


def _who(context: grpc.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "username" and value:
            return f"{ANONYMOUS} (claimed {str(value)[:64]!r})"
    return ANONYMOUS


def _refused(context: grpc.ServicerContext) -> bool:
    return (context.code() if hasattr(context, "code") else None) in REFUSALS


def _outcome(exc: BaseException, context: grpc.ServicerContext) -> str:
    if isinstance(exc, PelotonError):
        return f"{exc.kind.upper()}: {exc.message}"
    code = context.code() if hasattr(context, "code") else None
    if code is not None and code != grpc.StatusCode.OK:  # context.abort() by the servicer
        return f"{code.name}: {_details(context)}".strip()
    return f"ERROR: {type(exc).__name__}"


def _details(context: grpc.ServicerContext) -> str:
    details = context.details() if hasattr(context, "details") else ""
    if isinstance(details, bytes):
        return details.decode("utf-8", "replace")
    return str(details or "")


def _final(result: str, context: grpc.ServicerContext) -> str:
    code = context.code() if hasattr(context, "code") else None
    if code is not None and code != grpc.StatusCode.OK and result == "OK":
        return f"{code.name}: {_details(context)}".strip()
    return result
