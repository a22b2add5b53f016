"""Check a request's argument struct against the IDL before thriftpy2 decodes it.

thriftpy2 is lenient where a server must not be: its binary reader drops a
field whose wire type is wrong, and its Apache-JSON reader raises a bare
KeyError on an unknown field id, coerces "12" into an int and crashes on a
mistagged value.  These walkers look at the raw message first and raise
`WireError` with a message a user can act on ("field instanceCount (2) of
JobUpdateRequest: expected i32, got str"); only checked input is decoded.
Binary unknown field ids are skipped, as every Thrift server does; in JSON
they are errors (Aurora's TJSON reader skips them too, but thriftpy2 cannot,
so we name them instead of failing obscurely).  Enum values outside the IDL
are rejected in both.  Containers cannot claim more elements than bytes
remain, and nesting is capped, so hostile lengths cost nothing.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from thriftpy2.thrift import TType

MAX_DEPTH = 64

_TAGS = {TType.BOOL: "tf", TType.BYTE: "i8", TType.I16: "i16", TType.I32: "i32", TType.I64: "i64",
         TType.DOUBLE: "dbl", TType.STRING: "str", TType.STRUCT: "rec", TType.LIST: "lst",
         TType.SET: "set", TType.MAP: "map"}
_INT_BITS = {TType.BYTE: 8, TType.I16: 16, TType.I32: 32, TType.I64: 64}
_FIXED = {TType.BOOL: 1, TType.BYTE: 1, TType.I16: 2, TType.I32: 4, TType.I64: 8, TType.DOUBLE: 8}
_SPECIAL_DOUBLES = frozenset({"NaN", "Infinity", "-Infinity"})


class WireError(ValueError):
    """The message does not match the IDL; `str()` says where and how."""


def _split(entry: Any) -> tuple[int, Any]:
    """(ttype, sub-spec) of a field entry or a container element spec."""
    if isinstance(entry, int):
        return entry, None
    if len(entry) == 2:
        return entry[0], entry[1]
    return entry[0], entry[2] if len(entry) == 4 else None


def _check_enum(value: int, sub: Any, where: str) -> None:
    names = getattr(sub, "_VALUES_TO_NAMES", None)
    if names is not None and value not in names:
        raise WireError(f"{where}: {value} is not a valid {sub.__name__}")


def _field(cls: Any, fid: int, where: str) -> tuple[str, int, Any] | None:
    entry = cls.thrift_spec.get(fid)
    if entry is None:
        return None
    ttype, sub = _split(entry)
    return entry[1], ttype, sub


# ----------------------------------------------------------------------------- Apache TJSON

def check_json_struct(doc: Any, cls: Any, where: str, depth: int = 0) -> None:
    """Check a decoded TJSON struct object (`{"1": {"str": "x"}, ...}`) against `cls`."""
    if depth > MAX_DEPTH:
        raise WireError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if not isinstance(doc, dict):
        raise WireError(f"{where}: expected a struct object, got {type(doc).__name__}")
    for key, tagged in doc.items():
        try:
            fid = int(key)
        except ValueError:
            raise WireError(f"{where}: field id {key!r} is not a number") from None
        field = _field(cls, fid, where)
        if field is None:
            raise WireError(f"{where}: unknown field id {fid} in {cls.__name__}")
        name, ttype, sub = field
        at = f"field {name} ({fid}) of {cls.__name__}"
        if not isinstance(tagged, dict) or len(tagged) != 1:
            raise WireError(f"{at}: expected one {{type: value}} pair")
        ((tag, value),) = tagged.items()
        if tag != _TAGS[ttype]:
            raise WireError(f"{at}: expected {_TAGS[ttype]}, got {tag}")
        _check_json_value(value, ttype, sub, at, depth + 1)


def _check_json_value(value: Any, ttype: int, sub: Any, at: str, depth: int, key: bool = False) -> None:
    if ttype == TType.STRUCT:
        check_json_struct(value, sub, at, depth)
    elif ttype in (TType.LIST, TType.SET):
        etype, esub = _split(sub)
        if (not isinstance(value, list) or len(value) < 2 or value[0] != _TAGS[etype]
                or value[1] != len(value) - 2):
            raise WireError(f"{at}: expected [\"{_TAGS[etype]}\", count, elements...]")
        for item in value[2:]:
            _check_json_value(item, etype, esub, at, depth + 1)
    elif ttype == TType.MAP:
        (ktype, ksub), (vtype, vsub) = _split(sub[0]), _split(sub[1])
        if (not isinstance(value, list) or len(value) != 4 or value[0] != _TAGS[ktype]
                or value[1] != _TAGS[vtype] or not isinstance(value[3], dict)
                or value[2] != len(value[3])):
            raise WireError(f"{at}: expected [key type, value type, count, {{...}}]")
        for k, v in value[3].items():
            _check_json_value(k, ktype, ksub, at, depth + 1, key=True)
            _check_json_value(v, vtype, vsub, at, depth + 1)
    elif ttype == TType.BOOL:
        if value not in (0, 1) or isinstance(value, float):
            raise WireError(f"{at}: expected 0 or 1, got {value!r}")
    elif ttype in _INT_BITS:
        if key and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise WireError(f"{at}: map key {value!r} is not an integer") from None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise WireError(f"{at}: expected an integer, got {value!r}")
        bits = _INT_BITS[ttype]
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise WireError(f"{at}: {value} does not fit in {_TAGS[ttype]}")
        _check_enum(value, sub, at)
    elif ttype == TType.DOUBLE:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok and value not in _SPECIAL_DOUBLES:
            raise WireError(f"{at}: expected a number, got {value!r}")
    elif ttype == TType.STRING and not isinstance(value, str):
        raise WireError(f"{at}: expected a string, got {value!r}")


# ----------------------------------------------------------------------------- binary

class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int, at: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError(f"{at}: message ends early (wanted {n} more bytes)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, at: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), at))[0]

    def count(self, at: str, min_size: int) -> int:
        n: int = self.unpack("!i", at)
        if n < 0 or n * min_size > len(self.data) - self.pos:
            raise WireError(f"{at}: container length {n} exceeds the message")
        return n


def check_binary_struct(data: bytes, pos: int, cls: Any, where: str) -> int:
    """Check a binary struct at `data[pos:]` against `cls` (None = skip-only); returns the end."""
    reader = _Reader(data, pos)
    _binary_struct(reader, cls, where, 0)
    return reader.pos


def _binary_struct(r: _Reader, cls: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise WireError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    while True:
        ftype = r.unpack("!b", where)
        if ftype == TType.STOP:
            return
        fid = r.unpack("!h", where)
        field = _field(cls, fid, where) if cls is not None else None
        if field is None:
            _binary_value(r, ftype, None, f"{where}: field {fid}", depth + 1, check=False)
            continue
        name, ttype, sub = field
        at = f"field {name} ({fid}) of {cls.__name__}"
        if ftype != ttype:
            raise WireError(f"{at}: expected {_TAGS.get(ttype, ttype)}, got {_TAGS.get(ftype, ftype)}")
        _binary_value(r, ttype, sub, at, depth + 1, check=True)


def _binary_value(r: _Reader, ttype: int, sub: Any, at: str, depth: int, check: bool) -> None:
    if ttype in _FIXED:
        raw = r.take(_FIXED[ttype], at)
        if check and ttype == TType.I32:
            _check_enum(struct.unpack("!i", raw)[0], sub, at)
        if check and ttype == TType.DOUBLE and math.isnan(struct.unpack("!d", raw)[0]):
            return
    elif ttype == TType.STRING:
        raw = r.take(r.count(at, 1), at)
        if check:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise WireError(f"{at}: string is not valid UTF-8") from None
    elif ttype == TType.STRUCT:
        _binary_struct(r, sub if check else None, at, depth)
    elif ttype in (TType.LIST, TType.SET):
        etype = r.unpack("!b", at)
        want, esub = _split(sub) if check else (etype, None)
        if etype != want:
            raise WireError(f"{at}: elements are {_TAGS.get(etype, etype)}, expected {_TAGS.get(want)}")
        for _ in range(r.count(at, _FIXED.get(etype, 1))):
            _binary_value(r, etype, esub, at, depth + 1, check)
    elif ttype == TType.MAP:
        ktype, vtype = r.unpack("!b", at), r.unpack("!b", at)
        (wk, ksub), (wv, vsub) = (_split(sub[0]), _split(sub[1])) if check else ((ktype, None), (vtype, None))
        if (ktype, vtype) != (wk, wv):
            raise WireError(f"{at}: map of {_TAGS.get(ktype)}->{_TAGS.get(vtype)}, expected "
                            f"{_TAGS.get(wk)}->{_TAGS.get(wv)}")
        for _ in range(r.count(at, _FIXED.get(ktype, 1) + _FIXED.get(vtype, 1))):
            _binary_value(r, ktype, ksub, at, depth + 1, check)
            _binary_value(r, vtype, vsub, at, depth + 1, check)
    else:
        raise WireError(f"{at}: unknown wire type {ttype}")
