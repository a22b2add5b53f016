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
  (ZooKeeper watches) on each change it reports and at least every `recheck` seconds.
  The caller's first response (its watch id) is sent only once every member's stream
  opened at the start has answered, so everything published after it is covered.  A
  member that **joins** later gets a stream asking for the changes it published since
  its own start (watch.py's young publisher's history, `peloton-watch-from: start`), so
  what it published before the merge heard of it is not missed; if its history no
  longer covers its start (too many changes, or a minute gone) the stream is refused
  OUT_OF_RANGE and the caller's watch ends as below.  Before the directory has seen any
  member, every member seen later counts as a joiner.
* **No change is skipped silently.**  A failure ends the caller's watch where Peloton's
  would end: the receiving member's own stream failing (CANCELLED by Cancel, ABORTED
  "event overflow", ...) or any member's stream overflowing (ABORTED: the caller must
  re-list, as after a local overflow).  A member that **leaves** gracefully (SIGTERM)
  deletes its member node, releases its partitions, stops its job manager and only then
  ends every watch stream *cleanly* (OK with the trailer `peloton-watch-left`,
  watch.py's `leave`): that stream was read to its end, the watch goes on, and the
  member is not reopened until the directory stops listing it (or `leave_grace` has
  passed: then as a joiner).  **Any other end** of a member's stream, listed or not,
  ends the caller's watch ABORTED "event overflow: <watch id>" followed by the member,
  what ended its stream and "list and watch again": it failed (connection dropped,
  member killed, or a lost machine's connection noticed late, after its session expired
  and the directory dropped it) or ended without the leave's trailer, so changes it
  published may not have reached the caller, and a stream cannot be resumed where it
  stopped.  Nothing is reopened.  A member out of the directory for `leave_grace`
  seconds whose stream neither ended cleanly nor failed (a lost machine whose
  connection hangs) ends the watch the same way; the grace is derived from the members'
  ZooKeeper session and stop timeouts (`leave_grace()`: as long as a leave can take).
  When the receiving member itself leaves, its own stream's clean end ends the caller's
  watch ABORTED too (the caller watches again through another member).
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
may still be on the way), then cancelled; a previous owner that left the directory is
read to its end instead.  An owner's stream (or a previous owner's, while still read)
that ends is judged as a fan-in's: a killed owner's failed stream ends the caller's
watch (ABORTED, as above) instead of being reopened on its successor; a graceful
owner's clean end does not.  A stream opened on a new owner asks for what it published
since it claimed the job's partition (watch.py's per-claim history,
`peloton-watch-from: claim`), so the changes it made between its claim and the
stream's opening (its recovery's first ones, before the directory reported the move)
are not missed; a claim whose history is no longer whole refuses the stream and the
caller's watch ends as above.  While the partition is between owners no new stream is
opened.  The owner is followed by its claim (holder and epoch, member_directory.py's
`PartitionClaim`): a partition that moved away and back between two looks (b -> c -> b,
or a holder's release and claim again) comes back with a new epoch under the same
holder, and c, which drove the job in between, was never read, so the caller's watch
ends ABORTED ("list and watch again") instead of going on past c's changes.  A move
through an owner the directory never showed to a *different* next owner (b -> c -> d
seen as b -> d) is told apart by d: the stream opened on it from its claim names the
epoch of the claim this merge read last (`peloton-watch-after`), and d's claim took over
from c's epoch, not b's, so d refuses the stream (OUT_OF_RANGE, or an overflow when d
claims after the stream opened: watch.py) and the caller's watch ends as above.  The
same move ending at the receiving member itself (b -> c -> here) is checked here, against
this member's own claim (`claim_here`) once it has made it.  A Watch of several jobs, or
of every job, is fanned in.

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
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gevent
import gevent.event
import gevent.queue
import grpc

from peloton.api.auth_grpc import current_principal
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as pb
from peloton.common.auth import Principal
from peloton.common.auth.authenticator import relayed_metadata
from peloton.common.member_directory import PartitionClaim
from peloton.common.membership import LEAVE_TIMEOUT
from peloton.core.errors import PelotonError
from peloton.jobmgr.config import JobManagerConfig
from peloton.jobmgr.servicers.watch import AFTER_KEY, FROM_KEY, LEFT_KEY

log = logging.getLogger(__name__)

#: The method fanned in.
WATCH = "peloton.api.v1alpha.watch.svc.WatchService/Watch"
#: Metadata of a Watch one member opened on another: answered with that member's own jobs.
LOCAL_KEY = "peloton-watch-local"
#: How often a merge re-reads the members even when told of no change (seconds).
RECHECK = 1.0
#: How long a new watch waits for the streams it opens at its start (seconds).
OPEN_TIMEOUT = 10.0
#: Responses a merge holds for a slow caller before the members' streams back up.
QUEUE_SIZE = 64


def leave_grace(session_timeout: float = JobManagerConfig().member_session_timeout,
                stop_timeout: float = LEAVE_TIMEOUT) -> float:
    """How long a member may stay out of the directory with its stream open, neither
    ended cleanly nor failed, before it is taken for lost (seconds), from the members'
    ZooKeeper session timeout and graceful-leave (stop) timeout.

    A graceful leaver deletes its member node, releases its partitions (its membership's
    stop gives that `stop_timeout`; what it still holds then goes when its session ends,
    up to `session_timeout` later), then stops its job manager and only then ends its
    streams cleanly.  The grace is twice that span, for the job manager's stop after the
    release and a loaded machine: a leaver within it is read to its end, while a member
    that vanished is taken for lost `session_timeout + grace` after its loss (32 s with the
    defaults: 3 s and 10 s give 26 s).  A cluster whose members stop more slowly raises
    it with their stop timeout rather than ending every watch across a slow leave."""
    return 2.0 * (stop_timeout + session_timeout)


#: `leave_grace` with the default timeouts.
LEAVE_GRACE = leave_grace()


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
    stream is always opened.  `owner(job_id)`: the claim of the job's partition (its
    holder's member id and epoch), None while it has none (None instead of a function: a
    one-job Watch is fanned in too); `claim_here(job_id)`: this member's own current claim
    of the job's partition as (epoch, the epoch it took over from), None while it holds
    none (None instead of a function: not checked);
    it may raise a PelotonError (Unavailable) when it cannot tell: the streams stay as
    they are.  `identity`: the metadata this member presents to the others (the internal
    user's credentials; empty without any); `caller()`: who the call being served is
    (auth_grpc's `current_principal`).  `wake()` is the directory's listener.
    """

    def __init__(self, members: Callable[[], Mapping[str, str]], me: str, my_address: str, *,
                 owner: Callable[[str], PartitionClaim | None] | None = None,
                 claim_here: Callable[[str], tuple[int, int | None] | None] | None = None,
                 identity: Sequence[tuple[str, str]] = (),
                 caller: Callable[[], Principal | None] = current_principal,
                 connect: Callable[[str], grpc.Channel] = grpc.insecure_channel,
                 recheck: float = RECHECK, queue_size: int = QUEUE_SIZE,
                 leave_grace: float = LEAVE_GRACE, open_timeout: float = OPEN_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.members = members
        self.me = me
        self.my_address = my_address
        self.owner = owner
        self.claim_here = claim_here
        self.identity = tuple(identity)
        self.caller = caller
        self.recheck = recheck
        self.queue_size = queue_size
        self.leave_grace = leave_grace
        self.open_timeout = open_timeout
        self.clock = clock
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
        self.watch_id = ""
        # (member id, its call, a response / its `_End` / _WAKE)
        self.queue: gevent.queue.Queue[tuple[str, Any, Any]] = gevent.queue.Queue(
            fan.queue_size)
        self.calls: dict[str, Any] = {}  # member id -> its open Watch call
        self.readers: dict[str, gevent.Greenlet[Any, Any]] = {}
        self.opened: dict[str, gevent.event.Event] = {}  # set at its first response or end
        self.unwanted: dict[str, float] = {}  # member id -> since when its stream is not
        self.unlisted: dict[str, float] = {}  # member id -> since when, its stream open
        self.left: dict[str, float] = {}  # member id -> when it ended cleanly, still listed
        self.listed: set[str] | None = None  # the members at the last look (None: none yet)
        self.claim: PartitionClaim | None = None  # a one-job watch's last claim seen
        #: The claim seen before the current holder's (a new owner's stream must follow it).
        self.before: PartitionClaim | None = None
        #: The epoch of this member's own claim last checked against `before`.
        self.checked_here: int | None = None
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
            self.watch_id = watch_id = first.watch_id
            self._read(self.fan.me, mine, skip_first=False)
            # The caller's watch covers what is published after its first response (a
            # client may list then), so every member's watcher exists before it is sent.
            self._sync()
            self._await_opened()
            yield first.SerializeToString()
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
                        self.context.abort(grpc.StatusCode.ABORTED, _leaving(watch_id, source)
                                           if item.clean else _broken(watch_id, source, None))
                    if item.clean:  # everything it will ever publish was read
                        self._left(source)
                        continue
                    if _overflowed(item.error):  # watch.py's overflow text, the caller's id
                        self.context.abort(grpc.StatusCode.ABORTED, f"event overflow: {watch_id}")
                    # Failed or cut, listed or not: what it published last may be missing.
                    self.context.abort(grpc.StatusCode.ABORTED,
                                       _broken(watch_id, source, item.error))
                item.watch_id = watch_id
                yield item.SerializeToString()
        finally:
            self.closing = True
            self.fan._merges.discard(self)
            for call in self.calls.values():
                call.cancel()
            gevent.killall(list(self.readers.values()), block=False)

    def _open(self, member: str, address: str, *, since: str = "") -> Any:
        """Open the Watch on `member`, read from `since` ("start", "claim"; "": now); from
        a claim, that claim must follow the one this merge read before (`before`)."""
        remaining = self.context.time_remaining()
        metadata = [*self.metadata, (FROM_KEY, since)] if since else self.metadata
        if since == "claim" and self.before is not None:
            metadata = [*metadata, (AFTER_KEY, str(self.before.epoch))]
        call = self.fan.channel(address).unary_stream(
            f"/{WATCH}", request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchResponse.FromString)(
            self.request, timeout=remaining, metadata=metadata)
        self.calls[member] = call
        return call

    def _read(self, member: str, call: Any, *, skip_first: bool) -> None:
        opened = self.opened[member] = gevent.event.Event()

        def read() -> None:
            error: grpc.RpcError | None = None
            try:
                for n, response in enumerate(call):
                    opened.set()
                    if (n or not skip_first) and (response.pods or response.stateless_jobs):
                        self.queue.put((member, call, response))
            except grpc.RpcError as err:
                error = err
            opened.set()
            if not self.closing:
                self.queue.put((member, call, _End(error, error is None and _clean(call))))

        self.readers[member] = gevent.spawn(read)

    def _await_opened(self) -> None:
        """Wait until every other member's stream opened at the start has answered (its
        watcher registered) or ended; UNAVAILABLE if one does not within `open_timeout`."""
        waiting = {m: e for m, e in self.opened.items() if m != self.fan.me}
        gevent.wait(list(waiting.values()), timeout=self.fan.open_timeout)
        late = sorted(m for m, e in waiting.items() if not e.is_set())
        if late:
            self.context.abort(grpc.StatusCode.UNAVAILABLE,
                               f"the watch streams of job manager members {', '.join(late)} "
                               f"did not open within {self.fan.open_timeout:g} s; watch again")

    def _wanted(self, members: Mapping[str, str]) -> dict[str, str] | None:
        """The other members this watch should have a stream on, by id, with their
        addresses; None when the owner of its job cannot be told now (keep the streams)."""
        if self.job is None or self.fan.owner is None:
            return {m: a for m, a in members.items() if m != self.fan.me}
        try:
            claim = self.fan.owner(self.job)
        except PelotonError as exc:
            log.info("watch of job %s: its owner is unknown for now (%s)", self.job, exc)
            return None
        if claim is None:
            return {}  # between owners
        self._follow(claim)
        owner = claim.holder
        if owner == self.fan.me:
            self._check_here(claim)
            return {}
        if owner not in members:
            return {}
        return {owner: members[owner]}

    def _follow(self, claim: PartitionClaim) -> None:
        """Note the job's partition's current claim; end the watch when its holder is the
        last one seen but its epoch is not: the partition went away and came back, and
        whoever drove the job in between was never read (module docstring)."""
        seen, self.claim = self.claim, claim
        if seen is None or seen == claim:
            return
        if seen.holder == claim.holder:
            self.context.abort(grpc.StatusCode.ABORTED,
                               _reclaimed(self.watch_id, self.job or "", claim.holder))
        self.before = seen

    def _check_here(self, claim: PartitionClaim) -> None:
        """The job moved to this member: once this member has made the claim the directory
        shows, end the watch if that claim took over from an epoch other than the one read
        before (`before`: someone this watch never read drove the job in between)."""
        if (self.fan.claim_here is None or self.before is None or self.job is None
                or self.checked_here == claim.epoch):
            return
        mine = self.fan.claim_here(self.job)
        if mine is None or mine[0] != claim.epoch:
            return  # not made here yet: looked at again at the next look
        self.checked_here = claim.epoch
        if mine[1] != self.before.epoch:
            self.context.abort(grpc.StatusCode.ABORTED, _skipped(
                self.watch_id, self.job, self.fan.me, mine[1], self.before.epoch))

    def _sync(self) -> None:
        """Follow the directory: end the watch on a member lost from it (`_unlisted`); open
        a stream to each wanted member that has none (from where `_since` says); for a
        one-job watch, close a listed previous owner's stream once it has been unwanted
        for `recheck` seconds while the merge was not backed up."""
        members = self.fan.members()
        now = self.fan.clock()
        self._unlisted(members, now)
        for member in [m for m in self.left if m not in members]:
            del self.left[member]  # gone from the directory: its next listing is a join
        wanted = self._wanted(members)
        if wanted is not None:
            for member, address in wanted.items():
                self.unwanted.pop(member, None)
                if member in self.calls or now - self.left.get(member, -math.inf) < \
                        self.fan.leave_grace:
                    continue  # has a stream; or it left cleanly and the directory lags
                since = self._since(member)
                self.left.pop(member, None)
                self._read(member, self._open(member, address, since=since), skip_first=True)
            if self.job is not None:
                self._drop_previous_owners(wanted, members, now)
        self.listed = set(members)

    def _since(self, member: str) -> str:
        """Where a stream opened now on `member` starts, so that nothing it published
        since this watch began is missed (watch.py's histories; a history no longer whole
        refuses the stream, ending the watch, never a gap).  At the watch's start: now
        (its first response is sent once every stream answered).  Later, for a one-job
        watch, the member is the job's new owner: from its claim of the job's partition
        (whatever it published of the job came after that claim, perhaps before the
        directory reported it).  For a fan-in, a member not listed at the last look (a
        joiner) or whose last stream ended cleanly (a new process of that id): from its
        own start; any other member had a stream all along."""
        if self.listed is None:
            return ""
        if self.job is not None:
            return "claim"
        return "start" if member not in self.listed or member in self.left else ""

    def _unlisted(self, members: Mapping[str, str], now: float) -> None:
        """End the watch on a member out of the directory for `leave_grace` seconds whose
        stream neither ended cleanly nor failed (a lost machine: its session expired,
        its connection hangs).  Counted only while the merge has taken every change its
        readers handed over, so a leaver's clean end waiting in the queue is not missed."""
        for member in [m for m in self.calls if m != self.fan.me]:
            if member in members:
                self.unlisted.pop(member, None)
                continue
            since = self.unlisted.setdefault(member, now)
            if not self.queue.empty():
                continue
            if now - since >= self.fan.leave_grace:
                self.context.abort(grpc.StatusCode.ABORTED,
                                   _lost(self.watch_id, member, now - since))

    def _drop_previous_owners(self, wanted: Mapping[str, str], members: Mapping[str, str],
                              now: float) -> None:
        """A one-job watch reads a previous owner that is still a member (a handover) for
        `recheck` seconds more, then closes it; one that left is read to its end."""
        backed_up = self.queue.full()  # its readers may be waiting to hand changes over
        for member in [m for m in self.calls if m != self.fan.me and m not in wanted]:
            if member not in members:
                continue  # it leaves: its clean end, a failure or `_unlisted` decides
            since = self.unwanted.setdefault(member, now)
            if backed_up:
                self.unwanted[member] = now  # its last changes may be unread yet
            elif now - since >= self.fan.recheck:
                self._close(member)

    def _close(self, member: str) -> None:
        """Stop reading a member that no longer drives the watched job."""
        call = self.calls.pop(member)
        self.readers.pop(member, None)
        self.opened.pop(member, None)
        self.unwanted.pop(member, None)
        call.cancel()  # its reader's end is then ignored: the call is no longer this member's
        log.info("watch of job %s: member %s no longer drives it; its stream is closed",
                 self.job, member)

    def _left(self, member: str) -> None:
        """A member's stream ended cleanly (it left, having sent everything): it is
        remembered until the directory stops listing it, so it is not reopened meanwhile."""
        self.calls.pop(member, None)
        self.readers.pop(member, None)
        self.opened.pop(member, None)
        self.unwanted.pop(member, None)
        self.unlisted.pop(member, None)
        self.left[member] = self.fan.clock()
        log.info("watch fan-in: member %s left; its stream was read to its end", member)


class _End:
    """A member's stream ended: `error` None if with OK; `clean`: with OK and the
    leaver's trailer (watch.py's `leave`: everything it will publish was sent)."""

    __slots__ = ("clean", "error")

    def __init__(self, error: grpc.RpcError | None, clean: bool) -> None:
        self.error = error
        self.clean = clean


def _clean(call: Any) -> bool:
    """Whether a stream that ended with OK carries the leaver's trailer."""
    try:
        return any(k == LEFT_KEY for k, _ in call.trailing_metadata() or ())
    except Exception:  # no trailer to read: not a clean end
        log.exception("watch fan-in: could not read a stream's trailer")
        return False


def _broken(watch_id: str, member: str, error: grpc.RpcError | None) -> str:
    """Why the caller's watch ends: a member's stream ended other than by its leave."""
    why = (f"failed ({error.code().name}: {error.details() or ''})" if error is not None
           else "ended without the clean end of a leave")
    return (f"event overflow: {watch_id}: the watch stream of job manager member {member} "
            f"{why}, so changes it published may be missing; list and watch again")


def _lost(watch_id: str, member: str, seconds: float) -> str:
    """Why the caller's watch ends: a member left the directory and its stream hangs."""
    return (f"event overflow: {watch_id}: job manager member {member} left the members "
            f"{seconds:.0f} s ago and its watch stream has neither ended cleanly nor failed "
            f"(it is lost), so changes it published may be missing; list and watch again")


def _reclaimed(watch_id: str, job: str, member: str) -> str:
    """Why the caller's one-job watch ends: its job's partition left `member` and came back
    between two looks, so changes made by whoever held it in between may be missing."""
    return (f"event overflow: {watch_id}: the partition of job {job} left job manager member "
            f"{member} and came back to it, so changes made while another member drove "
            "the job may be missing; list and watch again")


def _skipped(watch_id: str, job: str, member: str, after: int | None, read_last: int) -> str:
    """Why the caller's one-job watch ends: the job's partition came to `member` (the one
    serving the watch) from a claim other than the one the watch read last."""
    return (f"event overflow: {watch_id}: job manager member {member} claimed the partition "
            f"of job {job} over from epoch {after if after is not None else 'none'}, not "
            f"from {read_last} (the claim this watch read last), so changes made while "
            "another member drove the job may be missing; list and watch again")


def _leaving(watch_id: str, member: str) -> str:
    """Why the caller's watch ends: the member serving it is leaving."""
    return (f"event overflow: {watch_id}: job manager member {member}, which serves this "
            f"watch, is leaving; list and watch again through another member")


def _overflowed(error: grpc.RpcError | None) -> bool:
    return error is not None and error.code() is grpc.StatusCode.ABORTED


def _reproduce(err: grpc.RpcError, context: grpc.ServicerContext) -> None:
    """End the caller's watch with a member's status and details."""
    context.abort(err.code(), err.details() or "")
