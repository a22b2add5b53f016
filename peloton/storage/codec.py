"""The one serializer of stored blobs: core dataclasses <-> JSON.

Every table keeps a few indexed columns plus one blob holding the whole
value as JSON text, in every backend, so a value read back from SQLite,
PostgreSQL or Cassandra is the same object.  The codec is generic over
the frozen dataclasses of `peloton.core.model` and compiles one encoder
and one decoder per class on first use (codec_compile.py; task runtimes
are encoded on the hot path, where reflection per call would cost more
than the database write).

Mapping to JSON: dataclass -> object in field order; Enum -> its value;
tuple / frozenset -> array (sets sorted); Mapping -> object with string
keys, sorted, decoded back through the key type (int, str or Enum);
bytes -> base64 text; `X | None` -> value or null; a union of dataclasses
(the Constraint tree) -> object tagged with `"_t": <class name>`; an int
stored in a float field is written as a float, so each value has exactly
one spelling (copy verification compares text).

Decoding is strict about types and tolerant about evolution: unknown keys
are ignored (a newer writer may have added a field) and a missing key
takes the field's default; a missing required field, a wrong type or an
unknown enum value is a `CodecError`, which `from_json` turns into
`DataCorruption` naming the entity, so a daemon reports which record is
bad instead of crashing on a KeyError.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson

from peloton.core.errors import DataCorruption
from peloton.core.model.evolve import replacer
from peloton.storage.codec_compile import (
    CodecError,
    dataclass_decoder,
    dataclass_encoder,
    dataclass_json,
    json_encode,
)

T = TypeVar("T")

__all__ = ["CodecError", "dataclass_json", "decode", "dumps", "encode", "from_json", "replace_field",
           "to_json"]


def encode(obj: Any) -> Any:
    """`obj` (a dataclass instance) as JSON-able data."""
    return dataclass_encoder(type(obj))(obj)


def decode(cls: type[T], data: Any) -> T:
    """Rebuild a `cls` from `encode`d data; raises CodecError if it does not fit."""
    result: T = dataclass_decoder(cls)(data)
    return result


def to_json(obj: Any) -> str:
    """Canonical compact JSON text of a dataclass instance (same value -> same text)."""
    return dataclass_json(type(obj))(obj)


def dumps(data: Any) -> str:
    """Compact JSON text of already `encode`d data."""
    return json_encode(data)


def replace_field(obj: T, name: str, value: Any) -> T:
    """`dataclasses.replace(obj, name=value)`, several times faster (core.model.evolve's
    `replacer`, compiled per class and field).

    Used to stamp new revisions on the hot write path.  An unknown field is a TypeError.
    """
    return replacer(type(obj), name)(obj, value)


def from_json(cls: type[T], text: str | bytes | None, entity: str) -> T:
    """Decode stored JSON into a `cls`; any failure is DataCorruption naming `entity`."""
    try:
        if text is None:
            raise CodecError("the stored value is empty")
        return decode(cls, orjson.loads(text))
    except (CodecError, ValueError, TypeError, RecursionError, orjson.JSONDecodeError) as exc:
        raise DataCorruption(f"{entity} is corrupt: {exc}") from exc
    except DataCorruption:
        raise
    except Exception as exc:  # a model's own validation (e.g. InvalidArgument) on bad data
        raise DataCorruption(f"{entity} is corrupt: {exc}") from exc
