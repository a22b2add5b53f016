"""Register servicers on a GrpcServer: error mapping, UNIMPLEMENTED, legacy names.

`register()` takes the generated `add_XServicer_to_server` function and our
servicer, and serves it

* under its proto service name and any alias (Peloton serves its three
  legacy v0 services at renamed paths, `peloton.api.job.JobManager` and so
  on, so clients built from either name work);
* with every PelotonError turned into the matching status code in one place
  (grpc_errors.status_for) and any other exception into INTERNAL naming its
  class and a log reference (never its text, which may quote SQL and its
  parameters), so a bug never becomes a hung call or an UNKNOWN;
* with methods our servicer does not define answering UNIMPLEMENTED with a
  message that names the method (they are listed in the README);
* optionally through a daemon's `CallHook`, which sees every call first (the
  job manager's API lockdown refuses calls there);
* optionally with a `Forwarder` that may answer a call elsewhere before any
  of that (a member of an all-active job manager cluster sends a call about
  another member's job to its owner and relays the owner's reply, already
  serialized, or its status).

A reply the servicer assembles from bytes it keeps encoded is sent as those
bytes: the servicer names such methods in `raw_replies` (RAW_REPLIES), each
with a method taking the same arguments and returning the reply's bytes,
which the server calls instead and sends unchanged (decoding them only for
gRPC to encode them again costs as much as the caching saves).  The typed
method stays, for callers in the same process.

Requests of the public API are held to the maxima of peloton/api/limits.py
(INVALID_ARGUMENT naming the field) before the servicer runs, and unary
replies above its reply maximum are refused asking for a smaller page.

YARPC metadata (`rpc-caller`, `rpc-service`, `rpc-encoding`) and the
deadline Peloton's YARPC transport requires are accepted, never required.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message

from peloton.api.grpc_errors import status_for
from peloton.api.grpc_server import ServiceHost
from peloton.api.limits import MAX_REPLY_BYTES, check_request
from peloton.api.service_names import LEGACY_ALIASES
from peloton.core.errors import PelotonError, ResourceExhausted

log = logging.getLogger(__name__)

#: Services whose requests are held to peloton/api/limits.py: Peloton's API and our public
#: extensions (cron, capacity, login); not the internal daemon-to-daemon services
#: (pelotonpy.internal.*), which carry big batches between authenticated peers.
PUBLIC_PREFIXES = ("peloton.api.", "pelotonpy.api.", "pelotonpy.ext.", "pelotonpy.auth.")
#: Trailer carrying PelotonError.field of a failed call.
FIELD_TRAILER = "peloton-error-field"
#: The servicer attribute naming its methods answered with their reply's bytes (see the module
#: docstring): a mapping of method name -> name of the servicer's method returning the bytes.
RAW_REPLIES = "raw_replies"



class CallHook(Protocol):
    """Runs around every call of the servicers registered with it.

    `where` is `<proto service>/<method>`.  Errors it raises are mapped like
    the servicer's own (a PelotonError becomes its status code).
    """

    def unary(self, where: str, call: Callable[[], Any]) -> Any:
        """Run a unary call (`call()` returns the response)."""
        ...

    def stream(self, where: str, call: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """Run a server-streaming call (`call()` returns the response iterator)."""
        ...


class Forwarder(Protocol):
    """Answers, elsewhere, the calls that are not this process's to answer."""

    def forward(self, where: str, request: Any, context: grpc.ServicerContext) -> bytes | None:
        """The serialized reply of the process that should answer the call, or None to
        answer it here.  A failure of that process is reproduced on `context` (abort);
        a PelotonError raised here is mapped like the servicer's own."""
        ...

    def forward_stream(self, where: str, request: Any,
                       context: grpc.ServicerContext) -> Iterator[bytes] | None:
        """As `forward`, for a server-streaming call: the serialized replies, or None."""
        ...


class _Recorder:
    """Stands in for a grpc.Server to capture what a generated add_* function registers."""

    def __init__(self) -> None:
        self.name = ""
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: Sequence[Any]) -> None:
        """Ignored: the same handlers arrive through add_registered_method_handlers."""

    def add_registered_method_handlers(self, name: str, handlers: dict[str, Any]) -> None:
        self.name = name
        self.handlers = dict(handlers)


def implemented_methods(servicer: object) -> set[str]:
    """Methods the servicer defines itself (not inherited from generated base classes)."""
    names: set[str] = set()
    for klass in type(servicer).__mro__:
        if klass is object or klass.__module__.startswith("peloton.api.gen"):
            continue
        names.update(n for n, v in vars(klass).items() if callable(v) and n[:1].isupper())
    return names


def raw_handlers(servicer: object, own: set[str]) -> dict[str, Callable[..., bytes]]:
    """Method name -> the servicer's method answering it with the reply's bytes, for the
    methods it names in RAW_REPLIES (ValueError for one it does not define)."""
    names: Mapping[str, str] = getattr(servicer, RAW_REPLIES, {})
    found: dict[str, Callable[..., bytes]] = {}
    for method, attr in names.items():
        fn = getattr(servicer, attr, None)
        if method not in own or not callable(fn):
            raise ValueError(f"{type(servicer).__name__}.{RAW_REPLIES}: {method} -> {attr} "
                             "names a method it does not define")
        found[method] = fn
    return found


class _Undecodable:
    """Stands in for a request whose bytes are not a valid message of its type."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _safe(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    # grpc answers INTERNAL when a deserializer raises; garbage from a client is the
    # client's error, so it is reported as INVALID_ARGUMENT by the guards below.
    if deserialize is None:
        return None

    def decode(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:
            return _Undecodable(exc)

    return decode


def _refuse_undecodable(request: Any, context: grpc.ServicerContext, where: str) -> None:
    if isinstance(request, _Undecodable):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                      f"{where}: the request is not a valid message: {request.error}")


def _abort(context: grpc.ServicerContext, exc: BaseException, where: str) -> None:
    if isinstance(exc, PelotonError):
        if exc.field:  # our own clients rebuild the error with its field (ports_grpc.channel)
            context.set_trailing_metadata(((FIELD_TRAILER, exc.field),))
        context.abort(status_for(exc), exc.message)
    # The exception's text may quote a query and its parameters, or other users' data:
    # it goes to the log, under an id the caller is given to quote.
    ref = secrets.token_hex(4)
    log.exception("unexpected error %s in %s", ref, where)
    context.abort(grpc.StatusCode.INTERNAL,
                  f"internal error in {where} ({type(exc).__name__}; logged as {ref})")


def _guard_unary(fn: Callable[..., Any], where: str, hook: CallHook | None = None,
                 forward: Forwarder | None = None) -> Callable[..., Any]:
    public = where.startswith(PUBLIC_PREFIXES)

    def call(request: Any, context: grpc.ServicerContext) -> Any:
        _refuse_undecodable(request, context, where)
        try:
            if public:
                check_request(request)
            if forward is not None and (relayed := forward.forward(where, request,
                                                                   context)) is not None:
                return relayed
            if hook is not None:
                reply = hook.unary(where, lambda: fn(request, context))
            else:
                reply = fn(request, context)
            if public and _size(reply) > MAX_REPLY_BYTES:
                raise ResourceExhausted(
                    f"{where}: the reply would be {_size(reply):,} bytes, more than "
                    f"{MAX_REPLY_BYTES:,}; ask for a smaller page (pagination limit, instance "
                    "ranges, summary_only)")
            return reply
        except Exception as exc:
            if _is_abort(exc, context):
                raise
            _abort(context, exc, where)
            raise  # unreachable: abort raises

    return call


def _size(reply: Any) -> int:
    # A raw reply (RAW_REPLIES) is its bytes already.
    if isinstance(reply, bytes):
        return len(reply)
    return reply.ByteSize() if isinstance(reply, Message) else 0


def _guard_stream(fn: Callable[..., Iterator[Any]], where: str, hook: CallHook | None = None,
                  forward: Forwarder | None = None) -> Callable[..., Iterator[Any]]:
    public = where.startswith(PUBLIC_PREFIXES)

    def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        _refuse_undecodable(request, context, where)
        try:
            if public:
                check_request(request)
            if forward is not None and (relayed := forward.forward_stream(where, request,
                                                                          context)) is not None:
                yield from relayed
                return
            if hook is not None:
                yield from hook.stream(where, lambda: fn(request, context))
            else:
                yield from fn(request, context)
        except Exception as exc:
            if _is_abort(exc, context):
                raise
            _abort(context, exc, where)

    return call


def _is_abort(exc: BaseException, context: grpc.ServicerContext) -> bool:
    # context.abort() records the status on the context and raises a bare Exception;
    # that one must propagate untouched, or the status it carries would become INTERNAL.
    return type(exc) is Exception and context.code() not in (None, grpc.StatusCode.OK)


def _unimplemented(where: str) -> Callable[..., Any]:
    def call(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      f"{where} is not implemented by Peloton for Python "
                      "(see the compatibility table in README.md)")

    return call


def _wrap(service: str, method: str, handler: grpc.RpcMethodHandler, own: set[str],
          hook: CallHook | None = None, forward: Forwarder | None = None,
          raw: Callable[..., bytes] | None = None) -> Any:
    where = f"{service}/{method}"
    if handler.unary_unary is not None:
        fn = (raw or handler.unary_unary) if method in own else _unimplemented(where)
        serialize = handler.response_serializer
        if (forward is not None or raw is not None) and serialize is not None:
            serialize = _relaying(serialize)
        return grpc.unary_unary_rpc_method_handler(
            _guard_unary(fn, where, hook if method in own else None,
                         forward if method in own else None),
            request_deserializer=_safe(handler.request_deserializer),
            response_serializer=serialize)
    if raw is not None:
        raise ValueError(f"{where}: only a unary method may answer with its reply's bytes")
    if handler.unary_stream is not None:
        stream = (_guard_stream(handler.unary_stream, where, hook, forward) if method in own
                  else _unimplemented(where))
        serialize = handler.response_serializer
        if forward is not None and serialize is not None:
            serialize = _relaying(serialize)
        return grpc.unary_stream_rpc_method_handler(
            stream, request_deserializer=_safe(handler.request_deserializer),
            response_serializer=serialize)
    raise ValueError(f"{where}: only unary and server-streaming methods are served")


def _relaying(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    # A relayed reply arrives serialized by the process that answered, a raw one serialized
    # by the servicer: sent on unchanged.
    def out(reply: Any) -> bytes:
        return reply if isinstance(reply, bytes) else serialize(reply)

    return out


def register(server: ServiceHost, add_fn: Callable[[Any, Any], None], servicer: object,
             aliases: Sequence[str] = (), hook: CallHook | None = None,
             forward: Forwarder | None = None) -> str:
    """Serve `servicer` (a subclass of a generated XServicer) on `server`; returns its name.

    With `hook`, every implemented method runs through it (see CallHook); with `forward`,
    every implemented method may be answered elsewhere first (see Forwarder).  Methods the
    servicer names in RAW_REPLIES are served by the method named there, their replies sent
    as it returns them (bytes).
    """
    recorder = _Recorder()
    add_fn(servicer, recorder)
    own = implemented_methods(servicer)
    raw = raw_handlers(servicer, own)
    wrapped = {m: _wrap(recorder.name, m, h, own, hook, forward, raw.get(m))
               for m, h in recorder.handlers.items()}
    names = [recorder.name, *aliases]
    legacy = LEGACY_ALIASES.get(recorder.name)
    if legacy and legacy not in names:
        names.append(legacy)
    server.add_generic([grpc.method_handlers_generic_handler(n, wrapped) for n in names], names)
    return recorder.name
