"""Which Thrift protocol a request speaks and which one its reply uses.

Three request forms arrive at the same `/api`, told apart by headers only:

* Aurora's scheduler form (TContentAwareServlet): the input protocol comes
  from Content-Type (binary for `application/vnd.apache.thrift.binary`,
  Apache TJSON for `application/x-thrift`, `application/json`,
  `application/vnd.apache.thrift.json` or no Content-Type at all; anything
  else is HTTP 415), the output protocol from Accept (binary only when
  Accept is exactly the binary type, JSON otherwise, including absent or
  unparsable Accept headers).  Aurora accepts `;charset=utf-8` on the
  Thrift-JSON type; we accept that parameter on every JSON type (harmless).
* Peloton's bridge form (YARPC HTTP inbound): an `Rpc-Procedure:
  <Service>::<method>` header, binary in and out, envelope optional.
* Apache's THttpClient sends its own `Content-Type: application/x-thrift`
  before any custom one, so a request may carry two; like a servlet
  container that keeps the last, we use the last.

This module is pure: it sees header values, never sockets.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BINARY_TYPE = "application/vnd.apache.thrift.binary"
JSON_REPLY_TYPE = "application/vnd.apache.thrift.json"
_JSON_TYPES = frozenset({"application/json", "application/x-thrift", JSON_REPLY_TYPE})
_ALLOWED_PARAMS = frozenset({"charset=utf-8"})


class Codec(enum.Enum):
    """A Thrift protocol the bridge speaks."""

    BINARY = "binary"
    JSON = "json"


@dataclass(frozen=True, slots=True)
class Negotiated:
    """How to read one request and write its reply.

    `procedure` is set for the YARPC form: (service, method) from Rpc-Procedure.
    """

    input: Codec
    output: Codec
    procedure: tuple[str, str] | None = None

    @property
    def reply_content_type(self) -> str:
        """Content-Type of the reply body."""
        return BINARY_TYPE if self.output is Codec.BINARY else JSON_REPLY_TYPE


@dataclass(frozen=True, slots=True)
class Unsupported:
    """The request cannot be read: answer with HTTP `status` and `message`."""

    status: int
    message: str


Headers = Mapping[str, Sequence[str]]


def _last(headers: Headers, name: str) -> str | None:
    values = headers.get(name.lower())
    return values[-1] if values else None


def _media_type(value: str) -> tuple[str, frozenset[str]]:
    parts = [p.strip().lower() for p in value.split(";")]
    params = frozenset(p.replace(" ", "") for p in parts[1:] if p)
    return parts[0], params


def input_codec(content_type: str | None) -> Codec | None:
    """The protocol of a request body with this Content-Type, or None (HTTP 415)."""
    if content_type is None or not content_type.strip():
        return Codec.JSON
    kind, params = _media_type(content_type)
    if not params <= _ALLOWED_PARAMS:
        return None
    if kind == BINARY_TYPE:
        return Codec.BINARY
    if kind in _JSON_TYPES:
        return Codec.JSON
    return None


def output_codec(accept: str | None) -> Codec:
    """The reply protocol for this Accept header (JSON unless exactly the binary type)."""
    if accept is not None and accept.strip().lower() == BINARY_TYPE:
        return Codec.BINARY
    return Codec.JSON


def parse_procedure(value: str) -> tuple[str, str] | None:
    """Split `Service::method`; None when the header is not of that shape."""
    service, sep, method = value.strip().partition("::")
    if not sep or not service or not method:
        return None
    return service, method


def negotiate(headers: Headers) -> Negotiated | Unsupported:
    """Decide the codecs for a request from its headers (names lower-case, all values kept)."""
    procedure = _last(headers, "rpc-procedure")
    if procedure is not None:
        parsed = parse_procedure(procedure)
        if parsed is None:
            return Unsupported(400, f"malformed Rpc-Procedure {procedure!r}: want <Service>::<method>")
        return Negotiated(Codec.BINARY, Codec.BINARY, parsed)
    content_type = _last(headers, "content-type")
    codec = input_codec(content_type)
    if codec is None:
        return Unsupported(415, f"Unsupported Content-Type: {content_type}")
    return Negotiated(codec, output_codec(_last(headers, "accept")))
