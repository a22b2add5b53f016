"""Compiling codecs: one encoder and one decoder per dataclass, built on first use.

The mapping rules are documented in codec.py (the public face of the
codec).  Encoders are generated as one dict display per class (about
twice as fast as a loop over fields); decoders check every value's type
and raise `CodecError` with the path to the bad field.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

import orjson

from peloton.core.model.evolve import constructor
from peloton.core.model.resources import FIELD_NAMES, Resources

Fn = Callable[[Any], Any]

ENCODERS: dict[type, Fn] = {}
DECODERS: dict[type, Fn] = {}
#: The field-by-field decoders the generated ones fall back to (tests compare the two).
CHECKED: dict[type, Fn] = {}
JSONERS: dict[type, Callable[[Any], str]] = {}


def json_encode(data: Any) -> str:
    """Compact JSON text (orjson: several times faster than the stdlib on the hot path)."""
    return orjson.dumps(data).decode()


_MISSING = dataclasses.MISSING


class CodecError(ValueError):
    """A value does not match the shape its class expects."""


def dataclass_encoder(cls: type) -> Fn:
    """The (cached) function turning a `cls` instance into JSON-able data."""
    enc = ENCODERS.get(cls)
    if enc is not None:
        return enc
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"codec: {cls!r} is not a dataclass")
    compiled: list[Fn] = []

    def encode_dataclass(obj: Any) -> Any:
        return compiled[0](obj)

    ENCODERS[cls] = encode_dataclass  # registered first: the Constraint tree is recursive
    try:
        hints = typing.get_type_hints(cls)
        compiled.append(_generate_encoder(cls, hints))
    except BaseException:
        del ENCODERS[cls]
        raise
    ENCODERS[cls] = compiled[0]
    return compiled[0]


def _generate_encoder(cls: type, hints: dict[str, Any]) -> Fn:
    """Generate `lambda o: {"field": <expr>, ...}` for `cls`.

    One generated dict display per class is about twice as fast as a loop
    over fields with getattr, and task runtimes are encoded on the hot path.
    """
    env: dict[str, Any] = {}
    parts: list[str] = []
    for i, f in enumerate(dataclasses.fields(cls)):
        tp = hints[f.name]
        if not f.name.isidentifier():
            raise TypeError(f"codec: field name {f.name!r} is not an identifier")
        if isinstance(tp, type) and issubclass(tp, Enum):
            expr = f"o.{f.name}._value_"  # the attribute itself: `.value` is a property call
        elif tp is float:
            # An int passed where a float is declared is stored as a float, so that one
            # value always has one spelling (checksums and fingerprints rely on it).
            expr = f"float(o.{f.name})"
        else:
            fn = value_encoder(tp)
            if fn is None:
                expr = f"o.{f.name}"
            else:
                env[f"f{i}"] = fn
                expr = f"f{i}(o.{f.name})"
        parts.append(f"{f.name!r}: {expr}")
    source = "lambda o: {" + ", ".join(parts) + "}"
    generated: Fn = eval(source, env)  # built from field names only, never from data
    return generated


def dataclass_json(cls: type) -> Callable[[Any], str]:
    """The (cached) function turning a `cls` instance into its canonical JSON text.

    orjson writes Enums by value and tuples as arrays itself, so the fields can be handed
    to it as they are, several times faster than the codec's encoder converts them, and
    it gives the same text whenever every field is of a kind it writes as the codec
    does: str, int, bool, None, Enum, tuples and optionals of those, and float.  A float
    field holding an int is the one difference (the codec writes 1.0, orjson 1), so the
    generated function checks those fields' types and takes the codec's path when one is
    not a float.  Any other field kind (bytes, sets, mappings, nested dataclasses,
    Resources) always takes the codec's path.

    The fields go to orjson in a dict, not as the dataclass (orjson reads a slotted
    dataclass's fields through its `__dataclass_fields__` one by one), and the dict is
    a copy of one holding every field name in order with its values then set (a dict
    display of more than 16 items grows its table as it goes): 1.1 µs against 1.8 µs
    for a task runtime, which is encoded on every state change.
    """
    fn = JSONERS.get(cls)
    if fn is not None:
        return fn
    encode = dataclass_encoder(cls)
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    if all(_native(hints[f.name]) or hints[f.name] is float for f in fields):
        checks = " or ".join(f"type(o.{f.name}) is not float" for f in fields
                             if hints[f.name] is float) or "False"
        env: dict[str, Any] = {"dumps": orjson.dumps, "encode": encode, "copy": dict.copy,
                               "names": dict.fromkeys(f.name for f in fields)}
        lines = [f"def json_{cls.__name__}(o):",
                 f"    if {checks}:",
                 "        return dumps(encode(o)).decode()",
                 "    d = copy(names)"]
        lines += [f"    d[{f.name!r}] = o.{f.name}" for f in fields]
        lines.append("    return dumps(d).decode()")
        exec("\n".join(lines) + "\n", env)  # built from field names only, never from data
        fn = env[f"json_{cls.__name__}"]
    else:
        def fn(o: Any) -> str:
            return orjson.dumps(encode(o)).decode()
    JSONERS[cls] = fn
    return fn


def _native(tp: Any) -> bool:
    """Whether orjson writes values of type `tp` exactly as the codec's encoder does."""
    if tp in (str, int, bool, type(None)):
        return True
    if isinstance(tp, type) and issubclass(tp, Enum):
        return True
    args = typing.get_args(tp)
    if _is_union(tp):
        return all(_native(a) for a in args)
    if typing.get_origin(tp) is tuple:
        return all(a is Ellipsis or _native(a) for a in args)
    return False


def dataclass_decoder(cls: type) -> Fn:
    """The (cached) function rebuilding a `cls` from JSON-able data (CodecError if bad)."""
    dec = DECODERS.get(cls)
    if dec is not None:
        return dec
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"codec: {cls!r} is not a dataclass")
    plan: list[tuple[str, Fn, bool]] = []
    name = cls.__name__

    def decode_dataclass(data: Any) -> Any:
        if not isinstance(data, dict):
            raise CodecError(f"{name}: expected an object, got {type(data).__name__}")
        kwargs: dict[str, Any] = {}
        for fname, fn, required in plan:
            if fname in data:
                try:
                    kwargs[fname] = fn(data[fname])
                except CodecError as exc:
                    raise CodecError(f"{name}.{fname}: {exc}") from None
            elif required:
                raise CodecError(f"{name}: missing field {fname!r}")
        return cls(**kwargs)

    DECODERS[cls] = decode_dataclass  # registered first: the Constraint tree is recursive
    try:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            required = f.default is _MISSING and f.default_factory is _MISSING
            plan.append((f.name, value_decoder(hints[f.name]), required))
        fast = _generate_decoder(cls, hints, plan, decode_dataclass)
    except BaseException:
        del DECODERS[cls]
        raise
    DECODERS[cls], CHECKED[cls] = fast, decode_dataclass
    return fast


def _generate_decoder(cls: type, hints: dict[str, Any], plan: list[tuple[str, Fn, bool]],
                      checked: Fn) -> Fn:
    """Generate the decoder of `cls` used first: one function reading every field with
    its type check inline and building the value with `evolve.constructor`.

    Recovery decodes every task runtime of a job at once (a million at Peloton's scale);
    the loop over `plan` above, one call per field and `cls(**kwargs)`, cost about three
    times as much.  The generated function only handles data that fits: on anything else
    (a wrong type, a missing field, an unknown enum value, a model's own validation) it
    hands the same data to `checked`, the loop above, which raises the error naming the
    field, so both accept and refuse exactly the same data.
    """
    fields = dataclasses.fields(cls)
    if not all(f.init and f.name.isidentifier() for f in fields):
        return checked
    env: dict[str, Any] = {"new": constructor(cls), "checked": checked, "K": _MISSING,
                           "fl": _float, "bad": _refuse}
    lines = [f"def decode_{cls.__name__}(data):",
             "    if type(data) is not dict:",
             "        return checked(data)",
             "    try:",
             "        get = data.get"]
    args = []
    for i, (f, (_, fn, required)) in enumerate(zip(fields, plan, strict=True)):
        tp = hints[f.name]
        if tp in (str, int, bool):
            env[f"t{i}"] = tp
            expr = f"v if type(v) is t{i} else bad()"
        elif tp is float:
            expr = "v if type(v) is float else fl(v)"
        elif isinstance(tp, type) and issubclass(tp, Enum):
            env[f"m{i}"] = tp._value2member_map_  # what Enum(value) looks in first
            expr = f"m{i}[v]"
        else:
            env[f"f{i}"] = fn
            expr = f"f{i}(v)"
        if required:
            lines.append(f"        v = data[{f.name!r}]; a{i} = {expr}")
        else:
            if f.default_factory is not _MISSING:
                env[f"d{i}"] = f.default_factory
                default = f"d{i}()"
            else:
                env[f"d{i}"] = f.default
                default = f"d{i}"
            lines.append(f"        v = get({f.name!r}, K); a{i} = {default} if v is K else {expr}")
        args.append(f"{f.name}=a{i}")
    lines += [f"        return new({', '.join(args)})",
              "    except Exception:",
              "        return checked(data)  # raises the error naming the field"]
    exec("\n".join(lines) + "\n", env)  # built from field names only, never from data
    generated: Fn = env[f"decode_{cls.__name__}"]
    return generated


def _refuse() -> Any:
    raise CodecError("refused by the generated decoder")


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def value_encoder(tp: Any) -> Fn | None:
    """An encoder for values of type `tp`, or None when the value is JSON as it is."""
    if tp in (str, int, bool, type(None)):
        return None
    if tp is float:
        return float
    if tp is bytes:
        return lambda v: base64.b64encode(v).decode("ascii")
    if tp is Resources:
        return _encode_resources
    if isinstance(tp, type) and issubclass(tp, Enum):
        return lambda v: v._value_
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda v: dataclass_encoder(tp)(v)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if _is_union(tp):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            inner = value_encoder(members[0])
            if inner is None:
                return None
            return lambda v: None if v is None else inner(v)
        if all(dataclasses.is_dataclass(m) for m in members):
            return lambda v: None if v is None else {"_t": type(v).__name__, **dataclass_encoder(type(v))(v)}
        raise TypeError(f"codec: unsupported union {tp!r}")
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = value_encoder(args[0])
            if item is None:
                return list
            each: Fn = item
            return lambda v: [each(x) for x in v]
        items = [value_encoder(a) for a in args]
        return lambda v: [x if f is None else f(x) for f, x in zip(items, v, strict=True)]
    if origin in (frozenset, set):
        item = value_encoder(args[0])
        return lambda v: sorted(x if item is None else item(x) for x in v)
    if origin in (dict, Mapping, typing.Mapping):
        key, val = _key_encoder(args[0]), value_encoder(args[1])
        return lambda v: {key(k): x if val is None else val(x) for k, x in sorted(v.items())}
    raise TypeError(f"codec: unsupported type {tp!r}")


def _encode_resources(v: Resources) -> dict[str, float]:
    """A resource vector as the four floats of the user's units.

    `Resources` holds fixed-point integers but is stored as it always was
    (an object of cpu, mem_mb, disk_mb and gpu floats), so stored values
    keep their meaning and older rows read back the same.
    """
    return {"cpu": v.cpu, "mem_mb": v.mem_mb, "disk_mb": v.disk_mb, "gpu": v.gpu}


def _decode_resources(d: Any) -> Resources:
    if not isinstance(d, dict):
        raise CodecError(f"Resources: expected an object, got {type(d).__name__}")
    try:
        return Resources(*(_float(d.get(name, 0.0)) for name in FIELD_NAMES))
    except CodecError as exc:
        raise CodecError(f"Resources: {exc}") from None


def _key_encoder(tp: Any) -> Fn:
    if isinstance(tp, type) and issubclass(tp, Enum):
        return lambda k: str(k.value)
    if tp in (int, str):
        return str
    raise TypeError(f"codec: unsupported mapping key type {tp!r}")


def value_decoder(tp: Any) -> Fn:
    """A decoder for values annotated `tp` (checks types; CodecError if bad)."""
    if tp is str:
        return _check(str)
    if tp is bool:
        return _check(bool)
    if tp is int:
        return _int
    if tp is float:
        return _float
    if tp is type(None):
        return _none
    if tp is bytes:
        return _bytes
    if tp is Resources:
        return _decode_resources
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda d: dataclass_decoder(tp)(d)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if _is_union(tp):
        return _union_decoder([a for a in args if a is not type(None)], type(None) in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = value_decoder(args[0])
            return lambda d: tuple(item(x) for x in _list(d))
        items = [value_decoder(a) for a in args]

        def fixed(d: Any) -> tuple[Any, ...]:
            seq = _list(d)
            if len(seq) != len(items):
                raise CodecError(f"expected {len(items)} items, got {len(seq)}")
            return tuple(f(x) for f, x in zip(items, seq, strict=True))
        return fixed
    if origin in (frozenset, set):
        item = value_decoder(args[0])
        return lambda d: frozenset(item(x) for x in _list(d))
    if origin in (dict, Mapping, typing.Mapping):
        key, val = _key_decoder(args[0]), value_decoder(args[1])

        def mapping(d: Any) -> dict[Any, Any]:
            if not isinstance(d, dict):
                raise CodecError(f"expected an object, got {type(d).__name__}")
            return {key(k): val(x) for k, x in d.items()}
        return mapping
    raise TypeError(f"codec: unsupported type {tp!r}")


def _union_decoder(members: list[Any], optional: bool) -> Fn:
    if len(members) == 1:
        inner = value_decoder(members[0])
        return (lambda d: None if d is None else inner(d)) if optional else inner
    by_tag = {m.__name__: m for m in members}

    def tagged(d: Any) -> Any:
        if d is None and optional:
            return None
        if not isinstance(d, dict) or d.get("_t") not in by_tag:
            raise CodecError(f"expected one of {sorted(by_tag)} tagged with '_t'")
        return dataclass_decoder(by_tag[d["_t"]])(d)
    return tagged


def _key_decoder(tp: Any) -> Fn:
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum(tp)
    if tp is int:
        return _int_key
    if tp is str:
        return _check(str)
    raise TypeError(f"codec: unsupported mapping key type {tp!r}")


def _check(kind: type) -> Fn:
    def check(d: Any) -> Any:
        if type(d) is not kind:
            raise CodecError(f"expected {kind.__name__}, got {type(d).__name__}")
        return d
    return check


def _int(d: Any) -> int:
    if type(d) is not int:
        raise CodecError(f"expected int, got {type(d).__name__}")
    return d


def _int_key(d: Any) -> int:
    try:
        return int(d)
    except ValueError:
        raise CodecError(f"expected an integer key, got {d!r}") from None


def _float(d: Any) -> float:
    if type(d) is float:
        return d
    if type(d) is int:
        return float(d)
    raise CodecError(f"expected number, got {type(d).__name__}")


def _none(d: Any) -> None:
    if d is not None:
        raise CodecError(f"expected null, got {type(d).__name__}")


def _bytes(d: Any) -> bytes:
    if not isinstance(d, str):
        raise CodecError(f"expected base64 text, got {type(d).__name__}")
    try:
        return base64.b64decode(d, validate=True)
    except binascii.Error as exc:
        raise CodecError(f"bad base64: {exc}") from None


def _enum(tp: type[Enum]) -> Fn:
    def enum(d: Any) -> Enum:
        try:
            return tp(d)
        except ValueError:
            raise CodecError(f"{d!r} is not a {tp.__name__}") from None
    return enum


def _list(d: Any) -> list[Any]:
    if not isinstance(d, list):
        raise CodecError(f"expected an array, got {type(d).__name__}")
    return d
