"""A watch through any member sees every member's jobs (v1alpha WatchService.Watch).

With all-active job managers each member publishes the changes of the jobs it drives
only (watch.py, fed by its own cache).  A Watch received from a client is therefore
answered by a **fan-in**: the receiving member opens the same Watch, unchanged, on every
live member *including itself* (over gRPC, so its own part is the ordinary watch.py
stream), each marked `peloton-watch-local` so the member answers it with its own events
and does not fan out again (one level, as forwarding is one hop), and merges the streams
into the caller's.  It is served through the forwarder's `forward_stream`
(forwarding.py), so the watch servicer stays what it is on a lone job manager.

* The caller's watch id is the one its receiving member's own stream gave (its first
  response, sent before anything else); changes from the other members are relayed with
  that id, so Cancel on the receiving member ends the whole watch: its own stream ends
  CANCELLED, and with it the merge, which cancels the other members' streams.
* Membership is followed: the live members are re-read from the member directory
  (ZooKeeper watches) on each change it reports and at least every `recheck` seconds; a
  member that joins gets a stream, one that left is no longer reopened (its open stream
  is read to its end: a leaver publishes its jobs' changes until it has released them).
  Before the directory has seen the members, a watch has this member's changes only.
* A failure ends the caller's watch only where Peloton's would end: the receiving
  member's own stream failing (CANCELLED by Cancel, ABORTED "event overflow", ...) or
  any member's stream overflowing (ABORTED: the caller must re-list, as after a local
  overflow).  Another member's stream that fails otherwise (it left, was killed, or the
  connection dropped) is reopened while the member is still live, after `recheck`; the
  changes it published between the failure and the reopening are not delivered (a dead
  member publishes none; its jobs' changes come from their next owner's stream once it
  holds them).
* Backpressure: the merge holds at most `queue_size` responses; past that each member's
  stream is read no further, its own watcher's buffer fills, and it ends with overflow,
  which ends the caller's watch (bounded memory everywhere, as in watch.py).

A change may be seen twice or out of order across members while a partition moves
(its old owner's last changes and its new owner's first); within one member the order is
that member's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import gevent
import gevent.queue
import grpc

from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as pb

log = logging.getLogger(__name__)

#: The method fanned in.
WATCH = "peloton.api.v1alpha.watch.svc.WatchService/Watch"
#: Metadata of a Watch one member opened on another: answered with that member's own jobs.
LOCAL_KEY = "peloton-watch-local"
#: How often a merge re-reads the members even when told of no change (seconds).
RECHECK = 1.0
#: Responses a merge holds for a slow caller before the members' streams back up.
QUEUE_SIZE = 64


class WatchFanIn:
    """Merges a Watch over every live member; see the module docstring.

    `members()`: the live members' gRPC addresses by member id (member_directory's
    `members`, this one's included or not); `me`, `my_address`: this member, whose own
    stream is always opened.  `wake()` is the directory's listener.
    """

    def __init__(self, members: Callable[[], Mapping[str, str]], me: str, my_address: str, *,
                 connect: Callable[[str], grpc.Channel] = grpc.insecure_channel,
                 recheck: float = RECHECK, queue_size: int = QUEUE_SIZE) -> None:
        self.members = members
        self.me = me
        self.my_address = my_address
        self.recheck = recheck
        self.queue_size = queue_size
        self._connect = connect
        self._channels: dict[str, grpc.Channel] = {}
        self._merges: set[_Merge] = set()

    def stream(self, request: Any, context: grpc.ServicerContext) -> Iterator[bytes] | None:
        """The merged serialized responses of a client's Watch, or None to answer it here
        (a Watch another member's fan-in opened)."""
        metadata = tuple(context.invocation_metadata() or ())
        if any(k == LOCAL_KEY for k, _ in metadata):
            return None
        passed = [(k, v) for k, v in metadata
                  if not k.startswith((":", "grpc-")) and k != "user-agent"]
        return _Merge(self, request, [*passed, (LOCAL_KEY, "1")], context).run()

    def wake(self) -> None:
        """The membership changed: every merge re-reads it now."""
        for merge in list(self._merges):
            merge.poke()

    def channel(self, address: str) -> grpc.Channel:
        """The channel to a member (one per address, kept until `close`)."""
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = self._connect(address)
        return channel

    def close(self) -> None:
        """Close the channels to the members (the merges' streams end with them)."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()


_WAKE = object()
_ENDED = object()


class _Merge:
    """One caller's merged watch: a reader greenlet per member feeding one bounded queue."""

    def __init__(self, fan: WatchFanIn, request: Any, metadata: list[tuple[str, str]],
                 context: grpc.ServicerContext) -> None:
        self.fan = fan
        self.request = request
        self.metadata = metadata
        self.context = context
        self.queue: gevent.queue.Queue[tuple[str, Any]] = gevent.queue.Queue(fan.queue_size)
        self.calls: dict[str, Any] = {}  # member id -> its Watch call
        self.readers: dict[str, gevent.Greenlet[Any, Any]] = {}
        self.not_before: dict[str, float] = {}  # member id -> when it may be reopened
        self.closing = False

    def poke(self) -> None:
        try:
            self.queue.put_nowait(("", _WAKE))
        except gevent.queue.Full:
            pass  # busy: it re-reads the members before its next response anyway

    def run(self) -> Iterator[bytes]:
        self.fan._merges.add(self)
        try:
            mine = self._open(self.fan.me, self.fan.my_address)
            try:
                first = next(mine)  # this member's watch id, or its refusal of the request
            except grpc.RpcError as err:
                _reproduce(err, self.context)
                return
            watch_id = first.watch_id
            yield first.SerializeToString()
            self._read(self.fan.me, mine, skip_first=False)
            while True:
                self._sync()
                try:
                    source, item = self.queue.get(timeout=self.fan.recheck)
                except gevent.queue.Empty:
                    if not self.context.is_active():
                        return
                    continue
                if item is _WAKE:
                    continue
                if item is _ENDED or isinstance(item, grpc.RpcError):
                    if source == self.fan.me:
                        if isinstance(item, grpc.RpcError):
                            _reproduce(item, self.context)
                        return
                    if _overflowed(item):  # watch.py's overflow text, with the caller's id
                        self.context.abort(grpc.StatusCode.ABORTED, f"event overflow: {watch_id}")
                    self._lost(source, item)
                    continue
                item.watch_id = watch_id
                yield item.SerializeToString()
        finally:
            self.closing = True
            self.fan._merges.discard(self)
            for call in self.calls.values():
                call.cancel()
            gevent.killall(list(self.readers.values()), block=False)

    def _open(self, member: str, address: str) -> Any:
        remaining = self.context.time_remaining()
        call = self.fan.channel(address).unary_stream(
            f"/{WATCH}", request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchResponse.FromString)(
            self.request, timeout=remaining, metadata=self.metadata)
        self.calls[member] = call
        return call

    def _read(self, member: str, call: Any, *, skip_first: bool) -> None:
        def read() -> None:
            try:
                for n, response in enumerate(call):
                    if (n or not skip_first) and (response.pods or response.stateless_jobs):
                        self.queue.put((member, response))
                end: Any = _ENDED
            except grpc.RpcError as err:
                end = err
            if not self.closing:
                self.queue.put((member, end))

        self.readers[member] = gevent.spawn(read)

    def _sync(self) -> None:
        """Open a stream to each live member that has none (not before its reopen time)."""
        now = time.monotonic()
        for member, address in self.fan.members().items():
            if member == self.fan.me or member in self.calls \
                    or self.not_before.get(member, 0.0) > now:
                continue
            self._read(member, self._open(member, address), skip_first=True)

    def _lost(self, member: str, why: Any) -> None:
        self.calls.pop(member, None)
        self.readers.pop(member, None)
        self.not_before[member] = time.monotonic() + self.fan.recheck
        log.info("watch fan-in: the stream of member %s ended (%s); reopened while it is live",
                 member, why.code().name if isinstance(why, grpc.RpcError) else "finished")


def _overflowed(item: Any) -> bool:
    return isinstance(item, grpc.RpcError) and item.code() is grpc.StatusCode.ABORTED


def _reproduce(err: grpc.RpcError, context: grpc.ServicerContext) -> None:
    """End the caller's watch with a member's status and details."""
    context.abort(err.code(), err.details() or "")
