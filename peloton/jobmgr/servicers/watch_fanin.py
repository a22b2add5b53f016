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
  member that joins gets a stream, one that left gets none (its open stream is read to
  its end: a leaver publishes its jobs' changes until it has released them).  Before the
  directory has seen the members, a watch has this member's changes only.
* **No change is skipped silently.**  A failure ends the caller's watch where Peloton's
  would end: the receiving member's own stream failing (CANCELLED by Cancel, ABORTED
  "event overflow", ...) or any member's stream overflowing (ABORTED: the caller must
  re-list, as after a local overflow).  And, since a stream cannot be resumed where it
  stopped, the caller's watch also ends, ABORTED "event overflow: <watch id>" followed by
  the member, what ended its stream and "watch again", when another member's stream ends
  while the directory still lists that member: it failed (the connection dropped, the
  member was killed) or ended while the member may still publish, so changes it
  published may not have reached the caller, and a new stream would only start at its
  opening.  Nothing is reopened; the caller lists and watches again, as after an
  overflow.  A member **killed** (kill -9, a crash) publishes nothing after its death,
  but its last changes before it may not have arrived: its stream fails at once (its
  connections are closed) while its member node lives on until its session expires, so
  the caller's watch ends with that error (its jobs' changes come from their next
  owners' streams in the caller's next watch).  A stream that ends once its member has
  **left** the directory (the directory is read when the stream ends) ends nothing: a
  graceful leaver deletes its member node, releases its partitions (publishing up to
  that) and only then stops, ending its streams, so they were read to their end.  Left
  to the caller: a member that vanished without closing its connections (a lost
  machine) and whose session expired before its stream's failure was noticed is taken
  for a leaver.
* Backpressure: the merge holds at most `queue_size` responses; past that each member's
  stream is read no further, its own watcher's buffer fills, and it ends with overflow,
  which ends the caller's watch (bounded memory everywhere, as in watch.py).

**A Watch of one job** (`pod_filter.job_id`, or a `stateless_job_filter` naming exactly
one job; v0 has no Watch) needs no fan-in: only the member holding the job's partition
publishes its changes.  Its remote stream goes to that owner alone (`owner`: the member
directory's holder of the job's partition), besides the receiving member's own stream,
which is always opened (it gives the caller's watch id, so Cancel on the receiving member
ends the watch, and carries the job's changes while this member drives it: an owner
here opens no remote stream at all).  The owner is re-read on each change the directory
reports (partition holders included) and at least every `recheck` seconds; when it
changes (a handover, or a death once its session expires) a stream is opened on the new
owner, and the previous owner's is read for `recheck` seconds more, counted while the
merge is not backed up (its last changes, published before it released the partition,
may still be on the way), then cancelled.  An owner's stream (or a previous owner's,
while still read) that ends is judged as a fan-in's: a killed owner's failed stream
ends the caller's watch (ABORTED, as above) instead of being reopened on its successor;
a graceful owner's, ended after it left the directory, does not.  While the partition
is between owners no new stream is opened.  A Watch of several jobs, or of every job,
is fanned in.

**Who the caller is.**  Each member's stream carries the caller's metadata as a
forwarded call does (forwarding.py, `relayed_metadata` in common/auth/authenticator.py):
under mutual TLS the member's own certificate and internal credentials, naming the
caller it authenticated, so every member serves the watch as the caller.

A change may be seen twice or out of order across members while a partition moves
(its old owner's last changes and its new owner's first); within one member the order is
that member's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gevent
import gevent.queue
import grpc

from peloton.api.auth_grpc import current_principal
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as pb
from peloton.common.auth import Principal
from peloton.common.auth.authenticator import relayed_metadata
from peloton.core.errors import PelotonError

log = logging.getLogger(__name__)

#: The method fanned in.
WATCH = "peloton.api.v1alpha.watch.svc.WatchService/Watch"
#: Metadata of a Watch one member opened on another: answered with that member's own jobs.
LOCAL_KEY = "peloton-watch-local"
#: How often a merge re-reads the members even when told of no change (seconds).
RECHECK = 1.0
#: Responses a merge holds for a slow caller before the members' streams back up.
QUEUE_SIZE = 64


def watched_job(request: Any) -> str | None:
    """The one job a Watch is about (`pod_filter.job_id`, a `stateless_job_filter` naming
    one job), or None: several jobs, or every job."""
    if request.HasField("pod_filter"):
        return str(request.pod_filter.job_id.value) or None
    if request.HasField("stateless_job_filter"):
        named = {str(j.value) for j in request.stateless_job_filter.job_ids}
        if len(named) == 1:
            return named.pop() or None
    return None


class WatchFanIn:
    """Merges a Watch over every live member, or follows one job's owner; see the module
    docstring.

    `members()`: the live members' gRPC addresses by member id (member_directory's
    `members`, this one's included or not); `me`, `my_address`: this member, whose own
    stream is always opened.  `owner(job_id)`: the member id holding the job's partition,
    None while it has none (None instead of a function: a one-job Watch is fanned in too);
    it may raise a PelotonError (Unavailable) when it cannot tell: the streams stay as
    they are.  `identity`: the metadata this member presents to the others (the internal
    user's credentials; empty without any); `caller()`: who the call being served is
    (auth_grpc's `current_principal`).  `wake()` is the directory's listener.
    """

    def __init__(self, members: Callable[[], Mapping[str, str]], me: str, my_address: str, *,
                 owner: Callable[[str], str | None] | None = None,
                 identity: Sequence[tuple[str, str]] = (),
                 caller: Callable[[], Principal | None] = current_principal,
                 connect: Callable[[str], grpc.Channel] = grpc.insecure_channel,
                 recheck: float = RECHECK, queue_size: int = QUEUE_SIZE) -> None:
        self.members = members
        self.me = me
        self.my_address = my_address
        self.owner = owner
        self.identity = tuple(identity)
        self.caller = caller
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
        passed = relayed_metadata(metadata, self.caller(), self.identity)
        job = watched_job(request) if self.owner is not None else None
        return _Merge(self, request, [*passed, (LOCAL_KEY, "1")], context, job).run()

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


class _Merge:
    """One caller's merged watch: a reader greenlet per member stream feeding one bounded
    queue.  `job`: the one job it follows the owner of (None: every live member)."""

    def __init__(self, fan: WatchFanIn, request: Any, metadata: list[tuple[str, Any]],
                 context: grpc.ServicerContext, job: str | None = None) -> None:
        self.fan = fan
        self.request = request
        self.metadata = metadata
        self.context = context
        self.job = job
        # (member id, its call, a response / its `_End` / _WAKE)
        self.queue: gevent.queue.Queue[tuple[str, Any, Any]] = gevent.queue.Queue(
            fan.queue_size)
        self.calls: dict[str, Any] = {}  # member id -> its open Watch call
        self.readers: dict[str, gevent.Greenlet[Any, Any]] = {}
        self.unwanted: dict[str, float] = {}  # member id -> since when its stream is not
        self.closing = False

    def poke(self) -> None:
        try:
            self.queue.put_nowait(("", None, _WAKE))
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
                    source, call, item = self.queue.get(timeout=self.fan.recheck)
                except gevent.queue.Empty:
                    if not self.context.is_active():
                        return
                    continue
                if item is _WAKE:
                    continue
                if isinstance(item, _End):
                    if self.calls.get(source) is not call:
                        continue  # a stream this merge closed (`_close`): not a failure
                    if source == self.fan.me:
                        if item.error is not None:
                            _reproduce(item.error, self.context)
                        return
                    if _overflowed(item.error):  # watch.py's overflow text, the caller's id
                        self.context.abort(grpc.StatusCode.ABORTED, f"event overflow: {watch_id}")
                    if item.listed:  # it may have published what the caller will not see
                        self.context.abort(grpc.StatusCode.ABORTED,
                                           _broken(watch_id, source, item.error))
                    self._left(source, item.error)
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
            error: grpc.RpcError | None = None
            try:
                for n, response in enumerate(call):
                    if (n or not skip_first) and (response.pods or response.stateless_jobs):
                        self.queue.put((member, call, response))
            except grpc.RpcError as err:
                error = err
            if not self.closing:
                # Read now, not when the merge takes the end: a killed member's session
                # may have expired by then, and it would pass for a leaver.
                self.queue.put((member, call, _End(error, self._listed(member))))

        self.readers[member] = gevent.spawn(read)

    def _listed(self, member: str) -> bool:
        """Whether the directory still lists `member` (True if it cannot tell: the safe
        answer, which ends the caller's watch)."""
        if member == self.fan.me:
            return True
        try:
            return member in self.fan.members()
        except Exception:  # any doubt ends the watch rather than lets a change go
            log.exception("watch fan-in: could not read the members")
            return True

    def _wanted(self) -> dict[str, str] | None:
        """The other members this watch should have a stream on, by id, with their
        addresses; None when the owner of its job cannot be told now (keep the streams)."""
        members = self.fan.members()
        if self.job is None or self.fan.owner is None:
            return {m: a for m, a in members.items() if m != self.fan.me}
        try:
            owner = self.fan.owner(self.job)
        except PelotonError as exc:
            log.info("watch of job %s: its owner is unknown for now (%s)", self.job, exc)
            return None
        if owner is None or owner == self.fan.me or owner not in members:
            return {}
        return {owner: members[owner]}

    def _sync(self) -> None:
        """Open a stream to each wanted member that has none (a joiner, a new owner: a
        member whose stream failed while it was listed ended the watch instead); for a
        one-job watch, close a previous owner's stream once it has been unwanted for
        `recheck` seconds while the merge was not backed up (a fan-in reads a leaver's
        stream to its end)."""
        wanted = self._wanted()
        if wanted is None:
            return
        now = time.monotonic()
        for member, address in wanted.items():
            self.unwanted.pop(member, None)
            if member not in self.calls:
                self._read(member, self._open(member, address), skip_first=True)
        if self.job is None:
            return
        backed_up = self.queue.full()  # its readers may be waiting to hand changes over
        for member in [m for m in self.calls if m != self.fan.me and m not in wanted]:
            since = self.unwanted.setdefault(member, now)
            if backed_up:
                self.unwanted[member] = now  # its last changes may be unread yet
            elif now - since >= self.fan.recheck:
                self._close(member)

    def _close(self, member: str) -> None:
        """Stop reading a member that no longer drives the watched job."""
        call = self.calls.pop(member)
        self.readers.pop(member, None)
        self.unwanted.pop(member, None)
        call.cancel()  # its reader's end is then ignored: the call is no longer this member's
        log.info("watch of job %s: member %s no longer drives it; its stream is closed",
                 self.job, member)

    def _left(self, member: str, error: grpc.RpcError | None) -> None:
        """The stream of a member that left the directory ended: read to its end."""
        self.calls.pop(member, None)
        self.readers.pop(member, None)
        self.unwanted.pop(member, None)
        log.info("watch fan-in: the stream of member %s, which left, ended (%s)", member,
                 error.code().name if error is not None else "finished")


class _End:
    """A member's stream ended: `error` None if normally; `listed`: whether the member
    directory still listed the member then."""

    __slots__ = ("error", "listed")

    def __init__(self, error: grpc.RpcError | None, listed: bool) -> None:
        self.error = error
        self.listed = listed


def _broken(watch_id: str, member: str, error: grpc.RpcError | None) -> str:
    """Why the caller's watch ends: a member's stream ended while the member is live."""
    why = (f"failed ({error.code().name}: {error.details() or ''})" if error is not None
           else "ended")
    return (f"event overflow: {watch_id}: the watch stream of job manager member {member} "
            f"{why} while it is a member, so changes it published may be missing; "
            f"list and watch again")


def _overflowed(error: grpc.RpcError | None) -> bool:
    return error is not None and error.code() is grpc.StatusCode.ABORTED


def _reproduce(err: grpc.RpcError, context: grpc.ServicerContext) -> None:
    """End the caller's watch with a member's status and details."""
    context.abort(err.code(), err.details() or "")
