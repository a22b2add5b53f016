"""Decoding many stored rows of one class at once: a job's task runtimes on load.

A job manager's recovery reads every task runtime of every active job (a million at
Peloton's scale) and decoding them was the largest share of its CPU: per row, `from_json`
named the entity (a formatted string, needed only for an error), parsed the text, looked
the class's decoder up and called it, and the generated decoder called `data.get` for each
field and then a constructor taking every field by keyword.  `rows_decoder(cls)` compiles
one loop per class that does all of it inline for every row: the text parsed, each field
read by subscript with its type checked, the value's slots set directly.

Same result and same errors as `codec.from_json` of each row, whatever a row holds: only
a row whose fields are all present and of the expected types takes the inline path; any
other (an older row missing a field, a wrong type, an unknown enum value, text that is not
JSON) goes through `from_json` itself, which decodes it with defaults or raises the
DataCorruption naming the row's entity.  A class the fast path cannot build (no slots, a
`__post_init__`, fields that are not init fields) decodes every row through `from_json`.

The decoded values share what repeats from row to row: a job manager keeps every task
runtime it loads for as long as the job is active, and a million runtimes spelled out the
same hosts, agent ids, messages and reasons a million times (a third of the bytes held
per task).  The inline path interns each text field (`sys.intern`: equal texts become one
object, which is freed when no value holds it any more) and gives every zero float field
the same 0.0 (unset times and health times are most of them).  Equality, hashing and the
text each value encodes to are unchanged: only which equal object a field refers to.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, TypeVar

import orjson

from peloton.storage.codec import from_json
from peloton.storage.codec_compile import value_decoder

T = TypeVar("T")
K = TypeVar("K")
#: (key, stored text) pairs -> {key: value}; `entity(key)` names a row in an error.
RowsDecoder = Callable[[Iterable[tuple[Any, "str | bytes | None"]], Callable[[Any], str]],
                       dict[Any, Any]]

_ROWS: dict[type, RowsDecoder] = {}


class _Refused(ValueError):
    """A field the inline path does not take (the row goes through `from_json`)."""


def decode_rows(cls: type[T], rows: Iterable[tuple[K, str | bytes | None]],
                entity: Callable[[K], str]) -> dict[K, T]:
    """`{key: from_json(cls, text, entity(key))}` for every (key, text) of `rows`, in
    their order, several times faster (module docstring).  DataCorruption naming the
    entity of the first row that is bad."""
    result: dict[K, T] = rows_decoder(cls)(rows, entity)
    return result


def rows_decoder(cls: type) -> RowsDecoder:
    """The (cached) compiled decoder of many rows of `cls`."""
    fn = _ROWS.get(cls)
    if fn is None:
        fn = _ROWS[cls] = _compile(cls)
    return fn


def _one_by_one(cls: type) -> RowsDecoder:
    def decode(rows: Iterable[tuple[Any, str | bytes | None]],
               entity: Callable[[Any], str]) -> dict[Any, Any]:
        return {key: from_json(cls, text, entity(key)) for key, text in rows}
    return decode


def _compile(cls: type) -> RowsDecoder:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"codec: {cls!r} is not a dataclass")
    fields = dataclasses.fields(cls)
    if ("__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__")
            or not all(f.init and f.name.isidentifier() for f in fields)):
        return _one_by_one(cls)
    hints = typing.get_type_hints(cls)
    env: dict[str, Any] = {"cls": cls, "new": object.__new__, "loads": orjson.loads,
                           "slow": from_json, "refuse": _refuse, "fl": _float,
                           "intern": sys.intern, "zero": _zero}
    lines = ["def decode_rows(rows, entity):",
             "    out = {}",
             "    for key, text in rows:",
             "        try:",
             "            d = loads(text)",
             "            if type(d) is not dict:",
             "                refuse()"]
    for i, f in enumerate(fields):
        env[f"s{i}"] = cls.__dict__[f.name].__set__
        lines.append(f"            v = d[{f.name!r}]; a{i} = {_expr(hints[f.name], i, env)}")
    lines.append("            n = new(cls)")
    lines += [f"            s{i}(n, a{i})" for i in range(len(fields))]
    lines += ["        except Exception:",
              "            n = slow(cls, text, entity(key))  # defaults, or the named error",
              "        out[key] = n",
              "    return out"]
    exec("\n".join(lines) + "\n", env)  # built from field names only, never from data
    compiled: RowsDecoder = env["decode_rows"]
    return compiled


def _expr(tp: Any, i: int, env: dict[str, Any]) -> str:
    """The inline expression decoding field `i`'s value `v` (annotated `tp`), or raising
    for one it does not take (the generated decoder's checks: codec_compile.py)."""
    if tp is str:
        # An empty text is one object already; not calling `intern` for it saves time.
        return "(intern(v) if v else v) if type(v) is str else refuse()"
    if tp in (int, bool):
        env[f"t{i}"] = tp
        return f"v if type(v) is t{i} else refuse()"
    if tp is float:
        # `zero` only for a zero (falsy), so the common non-zero time costs one test.
        return "(v if v else zero(v)) if type(v) is float else fl(v)"
    if isinstance(tp, type) and issubclass(tp, Enum):
        env[f"m{i}"] = tp._value2member_map_  # what Enum(value) looks in first
        return f"m{i}[v]"
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 2 \
            and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        if inner is str:
            return "(intern(v) if v else v) if type(v) is str else v if v is None else refuse()"
        if inner in (int, bool):
            env[f"t{i}"] = inner
            return f"v if v is None or type(v) is t{i} else refuse()"
    env[f"f{i}"] = value_decoder(tp)
    if typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis:
        # Mostly empty (a task's ports): the same empty tuple without the generic walk.
        return f"() if type(v) is list and not v else f{i}(v)"
    return f"f{i}(v)"


def _refuse() -> Any:
    raise _Refused("refused by the inline path")


def _float(v: Any) -> float:
    if type(v) is int:
        return _zero(float(v)) if v == 0 else float(v)
    raise _Refused("expected number")


#: The one 0.0 that decoded zero float fields share (module docstring).
_ZERO = 0.0


def _zero(v: float) -> float:
    """The shared 0.0 for a zero float; -0.0 stays itself (it encodes as "-0.0")."""
    return _ZERO if math.copysign(1.0, v) > 0 else v
