"""Small pieces every converter shares: times, labels, ids, entity versions, documents.

Times: the core keeps epoch seconds as floats (0.0 = never); Peloton's wire
carries job and task times as RFC 3339 strings in UTC ("" = never) and
change-log stamps as integer nanoseconds.  Both are written here only.

Documents: a job keeps the request it was created from (`JobSpec.document`)
so that Get returns every field the client sent; `document_kind` names the
message type by its protobuf full name (see DOC_V0_JOB_CONFIG, DOC_V1_JOB_SPEC).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from peloton.api.gen.peloton.api.v0 import peloton_pb2 as v0_peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1_peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.ids import RunId, validate_uuid
from peloton.core.model.resources import check_amount

#: `JobSpec.document_kind` of a job created or last replaced through the v0 API.
DOC_V0_JOB_CONFIG: str = job_pb2.JobConfig.DESCRIPTOR.full_name
#: `JobSpec.document_kind` of a job created or last replaced through the v1alpha API.
DOC_V1_JOB_SPEC: str = stateless_pb2.JobSpec.DESCRIPTOR.full_name

_NS = 1_000_000_000


#: Bytes of documents whose parsed form is kept (at least the last one is kept, whatever
#: its size, so rendering every instance of one big job parses its document once).
DOCUMENT_CACHE_BYTES = 64 * 1024 * 1024
_M = TypeVar("_M", bound=Message)


class _ParsedDocuments(Generic[_M]):
    """Parsed documents by their bytes, least recently used out first once the documents
    add up to more than DOCUMENT_CACHE_BYTES.  (A count bound kept 32 of them: 32 parsed
    48 MB documents of jobs with per-instance configs, for good.)"""

    def __init__(self, parse: Callable[[bytes], _M]) -> None:
        self._parse = parse
        self._parsed: OrderedDict[bytes, _M] = OrderedDict()
        self._bytes = 0

    def __call__(self, document: bytes) -> _M:
        parsed = self._parsed.get(document)
        if parsed is not None:
            self._parsed.move_to_end(document)
            return parsed
        parsed = self._parse(document)
        self._parsed[document] = parsed
        self._bytes += len(document)
        while self._bytes > DOCUMENT_CACHE_BYTES and len(self._parsed) > 1:
            old, _ = self._parsed.popitem(last=False)
            self._bytes -= len(old)
        return parsed


#: A stored v0 JobConfig document, parsed once and shared: callers must not change it.
v0_document = _ParsedDocuments(job_pb2.JobConfig.FromString)
#: A stored v1alpha JobSpec document, parsed once and shared: callers must not change it.
v1_document = _ParsedDocuments(stateless_pb2.JobSpec.FromString)


class WireLabel(Protocol):
    """What v0 and v1alpha `peloton.Label` messages have in common."""

    key: str
    value: str


def time_to_rfc3339(seconds: float) -> str:
    """Epoch seconds -> RFC 3339 in UTC with up to microsecond precision ("" for 0 = unset).

    Peloton writes Go's RFC3339Nano, which drops trailing zeros of the fraction; so do we.
    """
    if seconds <= 0:
        return ""
    stamp = datetime.fromtimestamp(seconds, tz=UTC)
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S")
    if stamp.microsecond:
        text += "." + f"{stamp.microsecond:06d}".rstrip("0")
    return text + "Z"


def time_from_rfc3339(text: str, field: str) -> float:
    """RFC 3339 -> epoch seconds ("" -> 0.0); a time without offset is taken as UTC."""
    if not text:
        return 0.0
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"{field} must be an RFC 3339 time, got {text!r}",
                              field=field) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def time_to_ns(seconds: float) -> int:
    """Epoch seconds -> integer nanoseconds, as Peloton's ChangeLog/Revision stamps are."""
    return max(0, round(seconds * _NS))


def time_from_ns(nanos: int) -> float:
    """Integer nanoseconds -> epoch seconds."""
    return nanos / _NS


def _seconds(ts: Timestamp) -> float:
    return ts.seconds + ts.nanos / 1e9


def time_range_from_wire(
        msg: v0_peloton_pb2.TimeRange | v1_peloton_pb2.TimeRange) -> tuple[float | None, float | None]:
    """A wire TimeRange (either API) -> (start, end) epoch seconds; an unset bound is open."""
    return (_seconds(msg.min) if msg.HasField("min") else None,
            _seconds(msg.max) if msg.HasField("max") else None)


def labels_from_wire(labels: Iterable[WireLabel]) -> tuple[Label, ...]:
    """Wire labels (either API) -> core labels, order kept."""
    return tuple(Label(lb.key, lb.value) for lb in labels)


def job_id_from_wire(value: str, field: str = "id") -> str:
    """A job id from a request, which must be a UUID (returned lower-cased)."""
    return validate_uuid(value, field)


def run_id_text(job_id: str, instance: int, run: int) -> str:
    """The host-level task id of one run: `<job>-<instance>-<run>` (Peloton's mesos task id)."""
    return str(RunId(job_id, instance, run))


def run_of(text: str, field: str) -> int:
    """The run number at the end of a `<job>-<instance>-<run>` id ("" -> 0)."""
    if not text:
        return 0
    try:
        return RunId.parse(text).run
    except InvalidArgument:
        raise InvalidArgument(f"{field} must look like '<job uuid>-<instance>-<run>', got {text!r}",
                              field=field) from None


def pod_entity_version(config_version: int) -> str:
    """A pod's entity version: `<config version>-0-0` (Peloton's GetPodEntityVersion)."""
    return f"{config_version}-0-0"


def parse_entity_version(text: str, field: str = "version") -> tuple[int, int, int]:
    """Split `<config>-<desired state>-<workflow>` into its three numbers."""
    parts = text.split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise InvalidArgument(f"{field} must look like '<config>-<state>-<workflow>', got {text!r}",
                              field=field)
    return int(parts[0]), int(parts[1]), int(parts[2])


def require_amount(value: float, field: str) -> float:
    """A resource amount from the wire: the core's rule (`check_amount`: finite, >= 0, at
    most MAX_AMOUNT), refused naming the wire's `field`."""
    return check_amount(value, field)
