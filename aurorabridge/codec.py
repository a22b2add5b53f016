"""Read a Thrift call from a request body and write its reply, in either protocol.

Reading never trusts the body: the envelope is parsed by hand, the argument
struct is checked by `wirecheck` and only then decoded by thriftpy2 (its
pure-Python binary reader; the Cython one reads past the end of a truncated
buffer).  Failures are sorted by how much we learned first:

* no method name could be read -> `UndecodableMessage` (answered with a
  TApplicationException PROTOCOL_ERROR);
* a method name the IDL lacks -> `UnknownMethod` (UNKNOWN_METHOD);
* the arguments are malformed -> `BadArguments` (a Thrift Response with
  INVALID_REQUEST naming the problem: the client gets a readable error).

Replies are written with thriftpy2's Cython binary writer when available
(our own data, and 5,000-task replies are hot) or `TApacheJSONProtocol`.
A YARPC request without an envelope gets a bare `<method>_result` struct.
A big list whose items' binary encodings are already known (`EncodedStructs`:
the cached tasks of a listing, most unchanged since the last one) is spliced
into a binary reply from those bytes instead of being encoded again.
"""

from __future__ import annotations

import copy
import json
import struct
from dataclasses import dataclass
from typing import Any

from thriftpy2.protocol import TApacheJSONProtocol
from thriftpy2.protocol.binary import TBinaryProtocol as PyBinaryProtocol
from thriftpy2.thrift import TApplicationException, TMessageType, TPayload
from thriftpy2.transport import TMemoryBuffer

from aurorabridge import wirecheck
from aurorabridge.negotiation import Codec
from aurorabridge.thrift_api import ALL_METHODS, args_class

try:  # the Cython writer is several times faster on large replies
    from thriftpy2.protocol.cybin import TCyBinaryProtocol as _FastBinary
    from thriftpy2.transport.memory import TCyMemoryBuffer as _FastBuffer
except ImportError:  # pragma: no cover - pure-Python thriftpy2 builds
    _FastBinary, _FastBuffer = PyBinaryProtocol, TMemoryBuffer

_VERSION_1 = 0x80010000
_VERSION_MASK = 0xFFFF0000


class CallError(Exception):
    """A request that cannot be dispatched; `method`/`seqid` say how far decoding got."""

    def __init__(self, message: str, method: str = "", seqid: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.seqid = seqid


class UndecodableMessage(CallError):
    """Not a Thrift message at all."""


class UnknownMethod(CallError):
    """A well-formed call of a method the IDL does not declare."""


class BadArguments(CallError):
    """A known method whose argument struct does not match the IDL."""


@dataclass(slots=True)
class Call:
    """One decoded call."""

    method: str
    seqid: int
    args: Any
    enveloped: bool = True


def _binary_envelope(body: bytes) -> tuple[str, int, int]:
    """(method, seqid, offset of the args struct) of a strict or old-style binary envelope."""
    try:
        (first,) = struct.unpack_from("!i", body, 0)
        if first < 0:
            if (first & _VERSION_MASK) != _VERSION_1:
                raise UndecodableMessage(f"bad binary protocol version 0x{first & 0xFFFFFFFF:08x}")
            mtype = first & 0xFF
            (size,) = struct.unpack_from("!i", body, 4)
            start = 8
        else:
            size, start = first, 4
            mtype = -1
        if size < 0 or start + size > len(body):
            raise UndecodableMessage("method name runs past the end of the message")
        name = body[start:start + size].decode("utf-8")
        pos = start + size
        if mtype == -1:
            mtype = body[pos]
            pos += 1
        (seqid,) = struct.unpack_from("!i", body, pos)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise UndecodableMessage(f"not a Thrift binary message: {exc}") from None
    if mtype not in (TMessageType.CALL, TMessageType.ONEWAY):
        raise UndecodableMessage(f"message type {mtype} is not a call", name, seqid)
    return name, seqid, pos + 4


def _decode_binary_args(method: str, body: bytes, offset: int, seqid: int) -> Any:
    cls = args_class(method)
    try:
        wirecheck.check_binary_struct(body, offset, cls, f"arguments of {method}")
        args = cls()
        args.read(PyBinaryProtocol(TMemoryBuffer(body[offset:]), strict_read=False))
    except wirecheck.WireError as exc:
        raise BadArguments(str(exc), method, seqid) from None
    except Exception as exc:  # any decoder failure is the client's input
        raise BadArguments(f"cannot decode arguments of {method}: {exc}", method, seqid) from None
    return args


def read_binary(body: bytes, yarpc_method: str | None = None) -> Call:
    """Decode a binary call; with `yarpc_method` the envelope is optional (thriftrw rules)."""
    if yarpc_method is not None:
        bare = not body or not (body[0] == 0x80 or (body[0] == 0x00 and len(body) > 1))
        if bare:
            _known(yarpc_method, 0)
            return Call(yarpc_method, 0, _decode_binary_args(yarpc_method, body, 0, 0), enveloped=False)
    if not body:
        raise UndecodableMessage("empty request body")
    method, seqid, offset = _binary_envelope(body)
    if yarpc_method is not None and method != yarpc_method:
        raise BadArguments(f"envelope names {method!r} but Rpc-Procedure names {yarpc_method!r}",
                           method, seqid)
    _known(method, seqid)
    return Call(method, seqid, _decode_binary_args(method, body, offset, seqid))


def read_json(body: bytes) -> Call:
    """Decode an Apache TJSONProtocol call: `[1, "method", type, seqid, {args}]`."""
    if not body:
        raise UndecodableMessage("empty request body")
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UndecodableMessage(f"not a Thrift JSON message: {exc}") from None
    if (not isinstance(doc, list) or len(doc) < 4 or doc[0] != 1 or not isinstance(doc[1], str)
            or not isinstance(doc[3], int)):
        raise UndecodableMessage("not a Thrift JSON message: want [1, \"method\", type, seqid, {...}]")
    method, mtype, seqid = doc[1], doc[2], doc[3]
    if mtype not in (TMessageType.CALL, TMessageType.ONEWAY):
        raise UndecodableMessage(f"message type {mtype!r} is not a call", method, seqid)
    _known(method, seqid)
    cls = args_class(method)
    payload = doc[4] if len(doc) > 4 else {}
    try:
        wirecheck.check_json_struct(payload, cls, f"arguments of {method}")
        proto = TApacheJSONProtocol(TMemoryBuffer(b""))
        proto._req = [1, method, mtype, seqid, payload]  # feed the parsed document, no reparse
        args = cls()
        args.read(proto)
    except wirecheck.WireError as exc:
        raise BadArguments(str(exc), method, seqid) from None
    except Exception as exc:  # any decoder failure is the client's input
        raise BadArguments(f"cannot decode arguments of {method}: {exc}", method, seqid) from None
    return Call(method, seqid, args)


def read_call(body: bytes, codec: Codec, yarpc_method: str | None = None) -> Call:
    """Decode `body` in `codec`."""
    if codec is Codec.BINARY:
        return read_binary(body, yarpc_method)
    return read_json(body)


def _known(method: str, seqid: int) -> None:
    if method not in ALL_METHODS:
        raise UnknownMethod(f"unknown method {method!r}", method, seqid)


def _write(codec: Codec, method: str, mtype: int, seqid: int, payload: Any, enveloped: bool) -> bytes:
    if codec is Codec.JSON:
        buf = TMemoryBuffer()
        proto: Any = TApacheJSONProtocol(buf)
    else:
        buf = _FastBuffer()
        proto = _FastBinary(buf)
    if enveloped or codec is Codec.JSON:
        proto.write_message_begin(method, mtype, seqid)
    payload.write(proto)
    if enveloped or codec is Codec.JSON:
        proto.write_message_end()
    return bytes(buf.getvalue())


def write_reply(codec: Codec, call: Call, result: Any) -> bytes:
    """Encode `<method>_result` for `call`, mirroring its envelope."""
    return _write(codec, call.method, TMessageType.REPLY, call.seqid, result, call.enveloped)


class EncodedStructs(list[Any]):
    """A list of Thrift structs that carries each one's binary encoding: `parts[i]` is
    `encode_struct(self[i])`.  Like every shared reply, never mutated."""

    __slots__ = ("parts",)

    def __init__(self, items: list[Any], parts: list[bytes]) -> None:
        super().__init__(items)
        self.parts = parts


def encode_struct(obj: Any) -> bytes:
    """The binary encoding of one struct, as it appears in a list of them."""
    buf = _FastBuffer()
    obj.write(_FastBinary(buf))
    return bytes(buf.getvalue())


def write_binary_result(result: Any) -> bytes:
    """The binary encoding of `<method>_result` alone, to be sent with `binary_reply`; an
    EncodedStructs list in it (see `_spliced`) costs a join of its parts."""
    path = _encoded_path(result, _SPLICE_DEPTH)
    spliced = _spliced(path) if path is not None else None
    return spliced if spliced is not None else encode_struct(result)


#: How deep an EncodedStructs list may lie: getTasks*_result.success.result.scheduleStatusResult.tasks.
_SPLICE_DEPTH = 4


def _encoded_path(obj: Any, depth: int) -> list[tuple[Any, str]] | None:
    """The (struct, field name) pairs from `obj` down to the first EncodedStructs field, through
    struct fields only, at most `depth` deep; None if there is none."""
    for spec in obj.thrift_spec.values():
        value = getattr(obj, spec[1], None)
        if isinstance(value, EncodedStructs):
            return [(obj, spec[1])]
        if depth > 1 and isinstance(value, TPayload):
            below = _encoded_path(value, depth - 1)
            if below is not None:
                return [(obj, spec[1]), *below]
    return None


def _replaced(path: list[tuple[Any, str]], items: list[Any]) -> Any:
    """A copy of the root of `path` whose list at its end is `items` (copies of the structs on
    the path only: the originals are shared)."""
    copies = [copy.copy(struct_) for struct_, _ in path]
    for i, (_, name) in enumerate(path):
        setattr(copies[i], name, copies[i + 1] if i + 1 < len(copies) else items)
    return copies[0]


def _spliced(path: list[tuple[Any, str]]) -> bytes | None:
    """The encoding of the root of `path` with its EncodedStructs list spliced in from its parts,
    or None if that cannot be shown to equal the encoder's.

    A binary list is its element type, its size (i32) and its elements' encodings back to back.
    The rest of the reply is encoded with the list empty and with its first item, and the
    size's place is where the two part; the second must then be the first with the size set
    to 1 and the first part inserted, which proves both the place and that part."""
    owner, name = path[-1]
    items: EncodedStructs = getattr(owner, name)
    if not items or len(items.parts) != len(items):
        return None
    empty = encode_struct(_replaced(path, []))
    one = encode_struct(_replaced(path, [items[0]]))
    cut = next((i for i, (a, b) in enumerate(zip(empty, one, strict=False)) if a != b), -1)
    if cut < 4:  # the size's last byte (0 or 1) is the first to differ, after the element type
        return None
    head, tail = empty[:cut - 3], empty[cut + 1:]
    if one != b"".join((head, struct.pack("!i", 1), items.parts[0], tail)):
        return None
    return b"".join([head, struct.pack("!i", len(items)), *items.parts, tail])


def binary_reply(call: Call, encoded_result: bytes) -> bytes:
    """What `write_reply(Codec.BINARY, call, result)` returns, from `write_binary_result(result)`.

    A binary message is its envelope followed by the struct (nothing ends it), so a reply
    encoded once can be sent to many calls, each with its own envelope (method, seqid).
    """
    if not call.enveloped:
        return encoded_result
    buf = _FastBuffer()
    proto = _FastBinary(buf)
    proto.write_message_begin(call.method, TMessageType.REPLY, call.seqid)
    proto.write_message_end()
    return bytes(buf.getvalue()) + encoded_result


def write_exception(codec: Codec, method: str, seqid: int, kind: int, message: str) -> bytes:
    """Encode a TApplicationException reply (always enveloped)."""
    exc = TApplicationException(kind, message)
    return _write(codec, method, TMessageType.EXCEPTION, seqid, exc, True)
