"""Fencing a leader's calls to its peers, not only its store writes.

A job manager leader SIGSTOPped for 25 s and then resumed keeps believing it leads until
kazoo tells it otherwise; in the 45 ms before it stepped down it killed 2 runs of a job
the new leader had just created and took a placement meant for the new leader.  Its store
writes were refused (peloton/storage/leader_store.py); its calls to the resource and host
managers were not.

So every call a leader's term makes to a peer carries the term's epoch in the
`peloton-leader-epoch` metadata (`<role>:<epoch>`, the epoch the term claimed in the store,
peloton/cluster/daemons/leadership.py), and the peer keeps, per calling role, the newest
epoch it has seen (`EpochWatermark`), starting from the one stored when it first hears of
the role.  A call stamped with an older epoch is refused with FAILED_PRECONDITION (not
UNAVAILABLE: retrying cannot help, and the old leader steps down on its own).  Epochs
only grow (ZooKeeper zxids; the store's counter when solo), so the newest one seen is
the current term or a later one.  Unstamped calls (the placement engine, tools, `peloton
up`'s in-process ports) are not fenced here.

What this does not close: a stale leader's call that reaches a peer before the new
leader's first call and after the peer last read the store.  The new leader's recovery
calls both peers before it serves, so that window ends when recovery starts.

All-active job managers (docs/design/all-active-jobmgr.md) have no single `jobmgr` term:
each member holds some job partitions, each claimed with its own epoch in the store
(fence `jobmgr/partition/<p>`, peloton/storage/partition_fences.py).  A member's calls
carry every partition it holds with its epoch, in one `peloton-partition-epochs` item
(`<p>:<epoch>,...`), and the peer keeps a watermark per partition's fence name (the
same `EpochWatermark`, the same stored epochs).  A call is refused if *any* partition it
names has been called with a newer epoch: the member still believes it owns a partition
that has moved (paused, cut off from ZooKeeper), and until it finds out and lets go, its
kill or launch could be about that partition's runs.  Members compare only per
partition, so two members holding different partitions never fence each other.  A
member holding nothing sends no item (it makes no call about a job).

A call admitted before a partition moved is not refused half-way, but a long poll for
placements looks again before each take (`still_current`): it ends, empty, once a
partition it names has a newer epoch, so a leaving member need not wait for its poll to
end before the new owner starts.
"""

from __future__ import annotations

import abc
import copy
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from peloton.core.errors import FailedPrecondition
from peloton.core.partitions import fence_name

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

#: Metadata key of a leader's call: "<role>:<epoch>".
EPOCH_KEY = "peloton-leader-epoch"
#: Metadata key of a partition member's call: "<partition>:<epoch>,..." (what it holds).
PARTITIONS_KEY = "peloton-partition-epochs"


class StaleTerm(FailedPrecondition):
    """A call from a leader term older than one the peer has already heard from."""


def stamp(role: str, epoch: int) -> tuple[str, str]:
    """The metadata item of a call made by `role`'s term `epoch`."""
    return EPOCH_KEY, f"{role}:{epoch}"


def parse(value: str) -> tuple[str, int]:
    """(role, epoch) from a stamp's value; StaleTerm for one that cannot be read (a caller
    that stamps its calls but says nothing sensible is not admitted)."""
    role, sep, epoch = value.rpartition(":")
    if not sep or not role or not epoch.isdigit():
        raise StaleTerm(f"unreadable {EPOCH_KEY} {value!r}", field=EPOCH_KEY)
    return role, int(epoch)


def stamp_partitions(epochs: Mapping[int, int]) -> tuple[str, str]:
    """The metadata item of a call made by a member holding `epochs` (partition -> epoch)."""
    return PARTITIONS_KEY, ",".join(f"{p}:{e}" for p, e in sorted(epochs.items()))


def parse_partitions(value: str) -> dict[str, int]:
    """Fence name -> epoch from a partition stamp's value; StaleTerm if unreadable."""
    out: dict[str, int] = {}
    for item in value.split(","):
        partition, sep, epoch = item.partition(":")
        if not sep or not partition.isdigit() or not epoch.isdigit():
            raise StaleTerm(f"unreadable {PARTITIONS_KEY} {value!r}", field=PARTITIONS_KEY)
        out[fence_name(int(partition))] = int(epoch)
    return out


class EpochWatermark:
    """The newest epoch seen per calling role; `admit` refuses an older one.

    `stored(role)` (optional) gives the epoch the role's newest term claimed in the store,
    read once when a role is first heard of, so a peer that restarted still refuses a term
    older than the stored one.  Thread-safe.
    """

    def __init__(self, stored: Callable[[str], int | None] | None = None) -> None:
        self._stored = stored
        self._newest: dict[str, int] = {}
        self._lock = threading.Lock()

    def newest(self, role: str) -> int | None:
        """The newest epoch admitted (or read from the store) for `role`."""
        with self._lock:
            return self._newest.get(role)

    def admit(self, role: str, epoch: int) -> None:
        """Record a call of `role`'s term `epoch`; StaleTerm if a newer term has been seen."""
        self.admit_all({role: epoch})

    def admit_all(self, epochs: Mapping[str, int]) -> None:
        """Record one call made under several terms (role or fence name -> epoch): StaleTerm,
        recording nothing, if any of them is older than one seen."""
        for role in epochs:
            if role not in self._newest and self._stored is not None:
                self._load(role)
        with self._lock:
            for role, epoch in epochs.items():
                newest = self._newest.get(role)
                if newest is not None and epoch < newest:
                    raise StaleTerm(f"{role} epoch {epoch} is over: a newer leader (epoch "
                                    f"{newest}) has called; this call is refused")
            for role, epoch in epochs.items():
                self._newest[role] = epoch

    def _load(self, role: str) -> None:
        assert self._stored is not None
        try:
            found = self._stored(role)
        except Exception:  # the store is down: fence on what calls tell us
            log.warning("term fence: cannot read the stored epoch of %s", role, exc_info=True)
            found = None
        with self._lock:
            if found is not None and found > self._newest.get(role, -1):
                self._newest[role] = found


def still_current(watermark: EpochWatermark, metadata: Sequence[tuple[str, str]] | None
                  ) -> Callable[[], bool] | None:
    """For a long poll: whether every partition the caller's stamp names is still the
    caller's (no newer epoch of it has called since); None for an unstamped call.

    The poll was admitted with the caller's epochs; a member that lets a partition go
    while its poll waits must not be handed what the partition's new owner queued
    meanwhile (it would drop it as no longer its own, and the run would wait out the
    launch timeout).  The new owner's every call is stamped, so its epoch is admitted
    before anything it queues can be placed: a poll that looks at this before each take
    never takes the new owner's work."""
    held = next((v for k, v in metadata or () if k == PARTITIONS_KEY), None)
    if held is None:
        return None
    stamped = parse_partitions(str(held))

    def current() -> bool:
        return all((newest := watermark.newest(name)) is None or newest <= epoch
                   for name, epoch in stamped.items())

    return current


class TermFenceInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped
    """Refuses stamped calls from a stale term before the handler runs (FAILED_PRECONDITION)."""

    def __init__(self, watermark: EpochWatermark) -> None:
        self.watermark = watermark

    def intercept_service(self, continuation: Callable[[Any], Any],
                          details: grpc.HandlerCallDetails) -> Any:
        metadata = details.invocation_metadata or ()
        value = next((v for k, v in metadata if k == EPOCH_KEY), None)
        held = next((v for k, v in metadata if k == PARTITIONS_KEY), None)
        if value is None and held is None:
            return continuation(details)
        try:
            if value is not None:
                self.watermark.admit(*parse(str(value)))
            if held is not None:
                self.watermark.admit_all(parse_partitions(str(held)))
        except StaleTerm as exc:
            log.warning("%s refused: %s", details.method, exc.message)
            return _refusal(continuation(details), exc.message)
        return continuation(details)


def _refusal(handler: Any, message: str) -> Any:
    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, message)

    if handler is None:
        return None
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            refuse, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            refuse, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    return handler


class Caller(Protocol):
    """What a port adapter calls its peer through (PeerChannel, or a stamped view of it)."""

    def call(self, method: str, request: Message, response_type: type[M], *,
             wait: float = 0.0, metadata: Sequence[tuple[str, str]] = ()) -> M:
        """One unary call (see PeerChannel.call)."""
        ...

    def call_raw(self, method: str, request: Message, *, wait: float = 0.0,
                 metadata: Sequence[tuple[str, str]] = ()) -> bytes:
        """One unary call answering the reply's bytes (see PeerChannel.call_raw)."""
        ...


class _Stamping(abc.ABC):
    """A channel whose every call (decoded or raw) carries what `_stamp` adds (each
    subclass says what: a term's epoch, a member's partition epochs)."""

    def __init__(self, channel: Caller) -> None:
        self._channel = channel

    def __getattr__(self, name: str) -> Any:
        return getattr(self._channel, name)  # term listeners, close, target: the channel's

    def call(self, method: str, request: Message, response_type: type[M], *,
             wait: float = 0.0, metadata: Sequence[tuple[str, str]] = ()) -> M:
        """The channel's call, stamped."""
        return self._channel.call(method, request, response_type, wait=wait,
                                  metadata=self._stamp(metadata))

    def call_raw(self, method: str, request: Message, *, wait: float = 0.0,
                 metadata: Sequence[tuple[str, str]] = ()) -> bytes:
        """The channel's raw call, stamped."""
        return self._channel.call_raw(method, request, wait=wait, metadata=self._stamp(metadata))

    @abc.abstractmethod
    def _stamp(self, metadata: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        """`metadata` with this caller's stamp added."""


class StampedCaller(_Stamping):
    """A channel whose every call carries `role`'s current term epoch (none while `epoch()`
    is None: a term that never led makes no calls)."""

    def __init__(self, channel: Caller, role: str, epoch: Callable[[], int | None]) -> None:
        super().__init__(channel)
        self._role = role
        self._epoch = epoch

    def _stamp(self, metadata: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        epoch = self._epoch()
        return (*metadata, stamp(self._role, epoch)) if epoch is not None else tuple(metadata)


class PartitionStampedCaller(_Stamping):
    """A channel whose every call carries the partitions a member holds now, with their
    epochs (`epochs()`, e.g. PartitionFences.epochs; nothing while it holds none)."""

    def __init__(self, channel: Caller, epochs: Callable[[], Mapping[int, int]]) -> None:
        super().__init__(channel)
        self._epochs = epochs

    def _stamp(self, metadata: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        epochs = self._epochs()
        return (*metadata, stamp_partitions(epochs)) if epochs else tuple(metadata)


P = TypeVar("P")


def stamped(port: P, role: str, epoch: Callable[[], int | None]) -> P:
    """A copy of a gRPC port adapter (its `channel` attribute) whose calls carry `role`'s
    term epoch; the copy shares the original's connections."""
    view = copy.copy(port)
    channel = getattr(port, "channel")  # noqa: B009  (every ports_grpc adapter has one)
    view.channel = StampedCaller(channel, role, epoch)  # type: ignore[attr-defined]
    return view


def term_epoch(current: Callable[[], int | None]) -> Callable[[], int | None]:
    """The epoch a term's calls carry: its epoch while it leads and, once it has stopped,
    still the last one it had (a call left over from a stopped term is a stale term's call,
    never an unstamped one)."""
    last: list[int] = []

    def epoch() -> int | None:
        now = current()
        if now is not None:
            last[:] = [now]
        return last[0] if last else None

    return epoch


def stamped_by_partition(port: P, epochs: Callable[[], Mapping[int, int]]) -> P:
    """A copy of a gRPC port adapter whose calls carry a member's partition epochs (as
    `stamped` does a leader's term epoch); the copy shares the original's connections."""
    view = copy.copy(port)
    channel = getattr(port, "channel")  # noqa: B009  (every ports_grpc adapter has one)
    view.channel = PartitionStampedCaller(channel, epochs)  # type: ignore[attr-defined]
    return view
