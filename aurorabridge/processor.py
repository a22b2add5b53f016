"""Glue between an HTTP request and the handlers: decode, dispatch, encode.

`ThriftProcessor.process` turns (negotiated codecs, body, headers) into an
HTTP reply and never raises: decoding failures become TApplicationExceptions
or INVALID_REQUEST Responses (see codec), a handler that raises is answered
with an ERROR Response naming the exception (Aurora clients retry transport
failures for minutes, so a bug must not look like a network problem).  The
YARPC form gets YARPC's response headers, and its envelope-less requests,
which cannot carry a TApplicationException, get YARPC's HTTP errors instead.
Big binary replies are encoded once per Response object: a handler that
answers many calls with one shared Response pays for one encoding.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thriftpy2.thrift import TApplicationException

from aurorabridge import caller, codec
from aurorabridge.limits import check_args
from aurorabridge.negotiation import Codec, Negotiated
from aurorabridge.responses import error_response, from_error, invalid_request
from aurorabridge.security import BridgeSecurity
from aurorabridge.thrift_api import SERVICES, api, result_class
from peloton.common.auth import Principal
from peloton.common.blocking import BlockingPool
from peloton.core.errors import InvalidArgument, PermissionDenied, Unauthenticated

log = logging.getLogger(__name__)

#: A handler table entry: takes the decoded `<method>_args`, returns a Response struct.
#: A handler may return the same Response object again (it must never mutate it then).
Handler = Callable[[Any], Any]

#: Binary replies at least this big are remembered by Response identity, the newest few.
MEMO_MIN_BYTES = 64 * 1024
MEMO_ENTRIES = 8


@dataclass(slots=True)
class Reply:
    """An HTTP answer: status, headers, body."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def text_reply(status: int, message: str, headers: list[tuple[str, str]] | None = None) -> Reply:
    """A plain-text HTTP error."""
    return Reply(status, [("Content-Type", "text/plain; charset=utf-8"), *(headers or [])],
                 message.encode("utf-8"))


#: Request bodies decoded off the hub when the processor has a decoder pool.
BIG_BODY_BYTES = 1024 * 1024


class ThriftProcessor:
    """Dispatches decoded calls to `handlers` (method name -> Handler)."""

    def __init__(self, handlers: dict[str, Handler], security: BridgeSecurity | None = None,
                 decoder: BlockingPool | None = None) -> None:
        self._handlers = handlers
        self._security = security
        #: Where bodies of BIG_BODY_BYTES or more are decoded (None: in the caller).  thriftpy2's
        #: safe reader is pure Python, so on a native thread it gives the GIL back every
        #: switch interval and the hub keeps answering: a 48 MB createJob decoded on the
        #: hub stopped every other call for seconds (issue 23 item 10).
        self._decoder = decoder
        # id(Response) -> (that Response, method, its binary `<method>_result`): task queries
        # hand one Response to many callers (task_answers), and a 5,000-task reply costs far
        # more to encode than to send.  Holding the Response keeps its id from being reused.
        self._encoded: dict[int, tuple[Any, str, bytes]] = {}

    def process(self, neg: Negotiated, body: bytes, yarpc_headers: list[tuple[str, str]],
                authorization: str = "") -> Reply:
        """Answer one request; `yarpc_headers` are echoed on YARPC replies (Context-*);
        `authorization` is the request's Authorization header (security.py)."""
        yarpc_method: str | None = None
        if neg.procedure is not None:
            service, yarpc_method = neg.procedure
            if yarpc_method not in SERVICES.get(service, frozenset()):
                return self._yarpc_error(501, "unimplemented",
                                         f"unrecognized procedure {service}::{yarpc_method}",
                                         yarpc_headers)
        try:
            if self._decoder is not None and len(body) >= BIG_BODY_BYTES:
                call = self._decoder.call(lambda: codec.read_call(body, neg.input, yarpc_method))
            else:
                call = codec.read_call(body, neg.input, yarpc_method)
        except codec.BadArguments as exc:
            response = invalid_request(exc.message)
            call = codec.Call(exc.method, exc.seqid, None, enveloped=_enveloped(body, neg))
            return self._reply(neg, call, response, yarpc_headers)
        except codec.CallError as exc:
            kind = (TApplicationException.UNKNOWN_METHOD if isinstance(exc, codec.UnknownMethod)
                    else TApplicationException.PROTOCOL_ERROR)
            if neg.procedure is not None and not _enveloped(body, neg):
                return self._yarpc_error(400, "invalid-argument", exc.message, yarpc_headers)
            out = codec.write_exception(neg.output, exc.method, exc.seqid, kind, exc.message)
            return self._finish(neg, out, yarpc_headers)
        return self._reply(neg, call, self.guarded(call.method, call.args, authorization),
                           yarpc_headers)

    def guarded(self, method: str, args: Any, authorization: str = "") -> Any:
        """`dispatch` behind the request maxima (limits.py), authentication, Aurora's
        permissions and the audit log."""
        try:
            check_args(method, args)
        except InvalidArgument as exc:
            return from_error(exc)
        security = self._security
        if security is None or not security.enabled:
            return self.dispatch(method, args)
        principal: Principal | None = None
        try:
            principal = security.authenticate(authorization)
            target = security.authorize(principal, method, args)
        except (Unauthenticated, PermissionDenied) as exc:
            log.info("refused %s: %s", method, exc.message)
            security.audit(principal, method, security.target_of(method, args),
                           security.refusal(exc), refused=True)
            return from_error(exc)
        with caller.acting_as(principal.name):  # recorded with what it asks for (update events)
            response = self.dispatch(method, args)
        code = api.ResponseCode._VALUES_TO_NAMES.get(getattr(response, "responseCode", None), "?")
        details = "; ".join(d.message or "" for d in getattr(response, "details", None) or ())
        security.audit(principal, method, target, f"{code}: {details}" if details else code,
                       refused=code == "AUTH_FAILED")
        return response

    def dispatch(self, method: str, args: Any) -> Any:
        """Run the handler for `method`; any exception becomes an ERROR Response."""
        handler = self._handlers.get(method)
        if handler is None:
            return invalid_request(f"{method} is not supported by the Peloton Aurora bridge")
        try:
            return handler(args)
        except Exception as exc:  # reported to the client, logged with the traceback
            ref = secrets.token_hex(4)
            log.exception("handler %s failed (%s)", method, ref)
            return error_response(f"internal error in {method} ({type(exc).__name__}; "
                                  f"logged as {ref})")

    def _reply(self, neg: Negotiated, call: codec.Call, response: Any,
               yarpc_headers: list[tuple[str, str]]) -> Reply:
        result = result_class(call.method)(success=response)
        if neg.output is not Codec.BINARY:
            return self._finish(neg, codec.write_reply(neg.output, call, result), yarpc_headers)
        memo = self._encoded.get(id(response))
        if memo is None or memo[0] is not response or memo[1] != call.method:
            memo = (response, call.method, codec.write_binary_result(result))
            if len(memo[2]) >= MEMO_MIN_BYTES:  # small replies are cheap to encode again
                if len(self._encoded) >= MEMO_ENTRIES:
                    del self._encoded[next(iter(self._encoded))]  # the oldest
                self._encoded[id(response)] = memo
        return self._finish(neg, codec.binary_reply(call, memo[2]), yarpc_headers)

    def _finish(self, neg: Negotiated, body: bytes, yarpc_headers: list[tuple[str, str]]) -> Reply:
        headers = [("Content-Type", neg.reply_content_type)]
        if neg.procedure is not None:
            headers += [("Rpc-Status", "success"), ("Rpc-Service", "peloton-aurorabridge"), *yarpc_headers]
        return Reply(200, headers, body)

    @staticmethod
    def _yarpc_error(status: int, code: str, message: str, yarpc_headers: list[tuple[str, str]]) -> Reply:
        return text_reply(status, message, [("Rpc-Status", "error"), ("Rpc-Error-Code", code),
                                            ("Rpc-Error-Name", code), *yarpc_headers])


def _enveloped(body: bytes, neg: Negotiated) -> bool:
    """Whether the reply to this request carries an envelope (JSON always does)."""
    if neg.input is Codec.JSON or neg.procedure is None:
        return True
    return bool(body) and (body[0] == 0x80 or (body[0] == 0x00 and len(body) > 1))

