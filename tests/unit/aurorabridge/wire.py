"""Encoding Thrift calls by hand for transport tests (thriftpy2, as any client would)."""

from __future__ import annotations

import http.client
from typing import Any

from thriftpy2.protocol import TApacheJSONProtocol
from thriftpy2.protocol.binary import TBinaryProtocol
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TMemoryBuffer

from aurorabridge.thrift_api import args_class, result_class

BINARY = "application/vnd.apache.thrift.binary"


def encode_call(
    method: str, args: Any = None, *, json: bool = False, seqid: int = 7, envelope: bool = True
) -> bytes:
    buf = TMemoryBuffer()
    proto: Any = TApacheJSONProtocol(buf) if json else TBinaryProtocol(buf)
    args = args if args is not None else args_class(method)()
    if envelope or json:
        proto.write_message_begin(method, TMessageType.CALL, seqid)
    args.write(proto)
    if envelope or json:
        proto.write_message_end()
    return bytes(buf.getvalue())


def decode_reply(method: str, body: bytes, *, json: bool = False, envelope: bool = True) -> Any:
    """The Response of a reply, or the TApplicationException it carries."""
    proto: Any = TApacheJSONProtocol(TMemoryBuffer(body)) if json else TBinaryProtocol(TMemoryBuffer(body))
    mtype = TMessageType.REPLY
    if envelope or json:
        _name, mtype, _seq = proto.read_message_begin()
    if mtype == TMessageType.EXCEPTION:
        exc = TApplicationException()
        exc.read(proto)
        return exc
    result = result_class(method)()
    result.read(proto)
    return result.success


def post(
    port: int,
    body: bytes,
    headers: list[tuple[str, str]] | dict[str, str],
    method: str = "POST",
    path: str = "/api",
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request; `headers` as a list may repeat a name."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest(method, path)
    items = headers.items() if isinstance(headers, dict) else headers
    for name, value in items:
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
