"""Small helpers over thriftpy2 structs: binary encode/decode, canonical copies.

`canonical` matters for updates: Thrift sets arrive in whatever order the
client iterated them (and thriftpy2 decodes them as lists), so two equal
TaskConfigs can serialize differently.  The bridge stores the canonical
form, in which every set is sorted and deduplicated, so an unchanged config
yields a byte-identical pod spec and Peloton sees no change.
"""

from __future__ import annotations

from typing import Any

from thriftpy2.protocol.binary import TBinaryProtocol
from thriftpy2.thrift import TType
from thriftpy2.transport import TMemoryBuffer


def encode(obj: Any) -> bytes:
    """Thrift binary (no envelope) of a struct."""
    buf = TMemoryBuffer()
    obj.write(TBinaryProtocol(buf))
    return bytes(buf.getvalue())


def decode(cls: Any, data: bytes) -> Any:
    """Decode binary `data` into a new `cls` (the pure-Python reader: bounds-checked)."""
    obj = cls()
    obj.read(TBinaryProtocol(TMemoryBuffer(data), strict_read=False))
    return obj


def _elem_spec(spec: Any) -> tuple[int, Any]:
    if isinstance(spec, int):
        return spec, None
    return spec[0], spec[1]


def _canon_value(value: Any, ttype: int, sub: Any) -> Any:
    if value is None:
        return None
    if ttype == TType.STRUCT:
        return canonical(value)
    if ttype in (TType.LIST, TType.SET):
        etype, esub = _elem_spec(sub)
        items = [_canon_value(v, etype, esub) for v in value]
        if ttype == TType.SET:
            keyed = {(encode(v) if etype == TType.STRUCT else repr(v)): v for v in items}
            items = [keyed[k] for k in sorted(keyed)]
        return items
    if ttype == TType.MAP:
        (ktype, ksub), (vtype, vsub) = _elem_spec(sub[0]), _elem_spec(sub[1])
        return {_canon_value(k, ktype, ksub): _canon_value(v, vtype, vsub) for k, v in value.items()}
    return value


def canonical(obj: Any) -> Any:
    """A deep copy of struct `obj` with every set sorted and deduplicated."""
    out = type(obj)()
    for entry in obj.thrift_spec.values():
        ttype, name = entry[0], entry[1]
        sub = entry[2] if len(entry) == 4 else None
        setattr(out, name, _canon_value(getattr(obj, name), ttype, sub))
    return out
