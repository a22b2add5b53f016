"""Any job manager answers any call: a call about another member's job goes to its owner.

With all-active job managers (docs/design/all-active-jobmgr.md, "Routing calls") each
member caches and writes only the jobs of the partitions it holds.  A unary call about one
job (the request's JobID, a PodName's job, an UpdateID's job: `job_of`) whose partition
another member holds is sent **unchanged** (same method, same bytes, the caller's
metadata but its credentials: see below) to that owner, whose reply, or status, is the
answer.  Reads are forwarded like
writes: the owner's cache is the freshest view of its jobs, and one rule is simpler to
trust than a read path per method.

* One hop: a forwarded call carries `peloton-forwarded`; a member receiving one for a job
  it does not drive answers UNAVAILABLE (retryable) instead of forwarding again, so a
  membership race cannot make a call loop.  That refusal carries the `peloton-not-owner`
  trailer: it is given before the servicer runs, so nothing was done, and the forwarding
  member reads the owner from ZooKeeper again and tries once more (then gives the caller
  the refusal).
* Owners are looked up in memory (`Owners`: common/member_directory.py keeps ZooKeeper's
  partition holders and member addresses under watches), so an entry may be a watch
  delivery behind.  A stale entry can only send the call to a member that refuses it
  (above: one more hop), or to one that still believes it owns the partition, whose
  write its partition fence refuses (UNAVAILABLE, relayed: the servicer may have done
  part of the call, so it is not repeated here; the caller retries as for a leader
  failover).  Every UNAVAILABLE from an owner makes the next lookup read ZooKeeper.
* Between owners (the partition's node is gone, its next owner has not claimed it yet)
  the call waits up to `wait` seconds for one, then answers UNAVAILABLE, as a leader
  failover does.
* Server-streaming calls about one job (v1 ListPods) are relayed the same way.  A
  v1alpha Watch is answered by every member, merged, and a Watch of one job by its
  owner, followed from owner to owner (watch_fanin.py).  Calls about no
  single job (queries, lists, a create without an id) are answered here; a create
  without an id picks one in a partition this member holds (ownership.py), so it is
  never forwarded.

* The owner authorizes the original caller, not this member: under mutual TLS its
  transport sees this member's certificate, so the call carries this member's identity
  (its internal user's credentials in place of the caller's, and its certificate) and
  names the caller this member authenticated (`peloton-caller`), which the owner
  believes from an internal peer only (`relayed_metadata` and the trust rule in
  common/auth/authenticator.py).

Writes are never applied here under the owner's fence: the owner's cache would not see
them (the one-writer rule of aggregate.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from peloton.api.auth_grpc import current_principal
from peloton.common.auth import Principal
from peloton.common.auth.authenticator import relayed_metadata
from peloton.core.errors import InvalidArgument, NotFound, Unavailable
from peloton.core.model.ids import TaskId, new_id
from peloton.jobmgr.servicers.watch_fanin import WATCH

log = logging.getLogger(__name__)

#: Metadata of a call one member forwarded to another.
FORWARDED_KEY = "peloton-forwarded"
#: Trailer of a forwarded call refused, before any work, by a member not driving its job.
NOT_OWNER_KEY = "peloton-not-owner"
#: Message types naming a job, a pod (`<job id>-<instance>`) and a workflow.
JOB_IDS = frozenset({"peloton.api.v0.peloton.JobID", "peloton.api.v1alpha.peloton.JobID"})
POD_NAME = "peloton.api.v1alpha.peloton.PodName"
UPDATE_ID = "peloton.api.v0.peloton.UpdateID"
_NAMING = JOB_IDS | {POD_NAME, UPDATE_ID}
#: Creates whose id field may be left empty (the job manager then draws one), by request type.
CREATE_IDS: dict[str, str] = {
    "peloton.api.v0.job.CreateRequest": "id",
    "peloton.api.v1alpha.job.stateless.svc.CreateJobRequest": "job_id",
}
#: Calls that change a cron schedule name it, not a job: a schedule lives in its name's
#: partition (core/cron/model.schedule_partition, the same hash as a job id's), so the name
#: routes it.  Reads of schedules are answered from the store by any member.
CRON_NAMES: dict[str, Callable[[Any], str]] = {
    "pelotonpy.api.cron.ScheduleCronJobRequest": lambda r: str(r.job.name),
    "pelotonpy.api.cron.DescheduleCronJobRequest": lambda r: str(r.name),
    "pelotonpy.api.cron.StartCronJobRequest": lambda r: str(r.name),
}
#: How long a call waits for a partition between owners (seconds).
OWNER_WAIT = 5.0
#: Default deadline of a forwarded call whose caller set none (seconds).
FORWARD_TIMEOUT = 30.0
#: Seconds between ZooKeeper reads of a call waiting for a partition's next owner.
FRESH_EVERY = 0.5


T = TypeVar("T")


class Owners(Protocol):
    """Where the member driving a job is found (common/member_directory.MemberDirectory)."""

    def address_of(self, job_id: str, fresh: bool = False) -> str | None:
        """The gRPC address of the *other* member holding `job_id`'s partition now, or None
        while there is none (between owners, or held by this member).  May be a watch
        delivery stale unless `fresh` (read ZooKeeper now).  Unavailable if it cannot be
        read."""
        ...

    def forget(self, job_id: str) -> None:
        """The owner's call failed: the next lookup of `job_id`'s partition reads ZooKeeper."""
        ...


def job_of(request: Message, update_job: Callable[[str], str | None]) -> str | None:
    """The job a request is about: its first set top-level JobID, PodName or UpdateID
    (`update_job` maps a workflow to its job), or None (it is about no single job).  For a
    call changing a cron schedule, the schedule's name (`CRON_NAMES`): it is routed like a
    job id."""
    by_name = CRON_NAMES.get(request.DESCRIPTOR.full_name)
    if by_name is not None:
        return by_name(request) or None
    for field in request.DESCRIPTOR.fields:
        kind = field.message_type.full_name if field.message_type is not None else ""
        if kind not in _NAMING or field.is_repeated or not request.HasField(field.name):
            continue
        value = str(getattr(request, field.name).value)
        if not value:
            continue
        if kind in JOB_IDS:
            return value
        if kind == POD_NAME:
            try:
                return TaskId.parse(value).job_id
            except InvalidArgument:
                return None  # the servicer says what is wrong with it
        if kind == UPDATE_ID:
            return update_job(value)
    return None


class FanIn(Protocol):
    """Answers a call on every member and merges the answers (watch_fanin.WatchFanIn)."""

    def stream(self, request: Any, context: grpc.ServicerContext) -> Iterator[bytes] | None:
        """The merged serialized responses, or None to answer the call here."""
        ...


class MemberForwarder:
    """A `service_registry.Forwarder` for one member; see the module docstring.

    `drives(job_id)`: this member holds the job's partition.  `owners`: where the other
    member holding it is found.  `update_job(update_id)`: the job of a workflow (a store
    read; None if unknown).  `watch_fan_in`: answers v1alpha Watch on every member (None:
    a Watch sees this member's jobs only).  `identity`: the metadata this member presents
    to the owner (the internal user's credentials; empty without any); `caller()`: who the
    call being served is (auth_grpc's `current_principal`).
    """

    def __init__(self, drives: Callable[[str], bool], owners: Owners,
                 update_job: Callable[[str], str | None], *,
                 connect: Callable[[str], grpc.Channel] = grpc.insecure_channel,
                 wait: float = OWNER_WAIT, sleep: Callable[[float], None] = time.sleep,
                 watch_fan_in: FanIn | None = None,
                 holds_none: Callable[[], bool] = lambda: False,
                 draw: Callable[[], str] = new_id,
                 identity: Sequence[tuple[str, str]] = (),
                 caller: Callable[[], Principal | None] = current_principal) -> None:
        self.drives = drives
        self.identity = tuple(identity)
        self.caller = caller
        self.holds_none = holds_none
        self._draw = draw
        self.watch_fan_in = watch_fan_in
        self.owners = owners
        self.update_job = update_job
        self.wait = wait
        self._connect = connect
        self._sleep = sleep
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        #: Calls forwarded, and calls sent again after a NOT_OWNER refusal (tests and logs).
        self.forwarded = 0
        self.retried = 0

    def forward(self, where: str, request: Any, context: grpc.ServicerContext) -> bytes | None:
        """The owner's serialized reply if another member drives the request's job; None
        to answer here.  Unavailable when it cannot be forwarded (see the docstring)."""
        target = self._target(request, context)
        if target is None:
            return None
        job_id, address, metadata = target

        def call(address: str) -> bytes:
            stub = self._channel(address).unary_unary(
                f"/{where}", request_serializer=_serialize, response_deserializer=None)
            reply: bytes = stub(request, timeout=_timeout(context), metadata=metadata)
            return reply

        try:
            return self._at_most_twice(job_id, address, call)
        except grpc.RpcError as err:
            _reproduce(err, context)
            raise  # unreachable: abort raises

    def forward_stream(self, where: str, request: Any,
                       context: grpc.ServicerContext) -> Iterator[bytes] | None:
        """The owner's serialized replies of a server-streaming call about another member's
        job (v1 ListPods), or None to answer here; as `forward`.  A Watch is merged over
        every member."""
        if where == WATCH and self.watch_fan_in is not None:
            return self.watch_fan_in.stream(request, context)
        target = self._target(request, context)
        if target is None:
            return None
        job_id, address, metadata = target
        return self._relay(where, request, job_id, address, metadata, context)

    def _at_most_twice(self, job_id: str, address: str, call: Callable[[str], T]) -> T | None:
        """`call(address)`; if that member refused with NOT_OWNER, the owner read afresh is
        called once more (None: the job came to this member meanwhile, answer here)."""
        try:
            self.forwarded += 1
            return call(address)
        except grpc.RpcError as err:
            if not self._failed(job_id, err):
                raise
        again = self._await_owner(job_id, fresh=True)
        if again is None:
            return None
        self.retried += 1
        self.forwarded += 1
        try:
            return call(again)
        except grpc.RpcError as err:
            self._failed(job_id, err)
            raise

    def _relay(self, where: str, request: Any, job_id: str, address: str,
               metadata: list[tuple[str, str | bytes]],
               context: grpc.ServicerContext) -> Iterator[bytes]:
        retried = False
        while True:
            self.forwarded += 1
            replies = self._channel(address).unary_stream(
                f"/{where}", request_serializer=_serialize, response_deserializer=None)(
                request, timeout=_timeout(context), metadata=metadata)
            relayed = False
            try:
                for reply in replies:
                    relayed = True
                    yield reply
                return
            except grpc.RpcError as err:
                # NOT_OWNER comes before any reply; once one was relayed nothing is repeated.
                if not self._failed(job_id, err) or retried or relayed:
                    _reproduce(err, context)
                    return
                again = self._await_owner(job_id, fresh=True)
                if again is None:  # it came here, but this stream already left the servicer
                    _reproduce(err, context)
                    return
                retried, address = True, again
                self.retried += 1

    def _failed(self, job_id: str, err: grpc.RpcError) -> bool:
        """Note an owner's failed call; True if it was a NOT_OWNER refusal (nothing done)."""
        if err.code() is not grpc.StatusCode.UNAVAILABLE:
            return False
        # Unreachable, between owners, fenced out or not the owner: the entry may be stale.
        self.owners.forget(job_id)
        return any(k == NOT_OWNER_KEY for k, _ in err.trailing_metadata() or ())

    def _target(self, request: Any, context: grpc.ServicerContext
                ) -> tuple[str, str, list[tuple[str, str | bytes]]] | None:
        """(job id, owner address, metadata to send) of a call to forward, or None."""
        job_id = job_of(request, self.update_job) or self._assign_id(request)
        if job_id is None or self.drives(job_id):
            return None
        metadata = tuple(context.invocation_metadata() or ())
        if any(k == FORWARDED_KEY for k, _ in metadata):
            # Refused before any work: the forwarding member may safely try the owner again.
            context.set_trailing_metadata(((NOT_OWNER_KEY, job_id),))
            raise Unavailable(f"job {job_id} is not driven by this job manager (its partition "
                              "moved while the call was forwarded); try again")
        address = self._await_owner(job_id)
        if address is None:
            return None  # its partition came here while the call waited
        passed = relayed_metadata(metadata, self.caller(), self.identity)
        return job_id, address, [*passed, (FORWARDED_KEY, "1")]

    def close(self) -> None:
        """Close the channels to other members."""
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()

    def _assign_id(self, request: Any) -> str | None:
        """A create without an id on a member holding no partition (just joined, or
        between a leave and its claims) could only draw an id it cannot write: give the
        request an id here and route it like any call about that job (the owner creates it
        with the id, as if the client had sent it).  None: answered here as it is."""
        id_field = CREATE_IDS.get(request.DESCRIPTOR.full_name)
        if id_field is None or not self.holds_none():
            return None
        job_id = self._draw()
        getattr(request, id_field).value = job_id
        return job_id

    def _await_owner(self, job_id: str, fresh: bool = False) -> str | None:
        """The owner's address, waiting while the partition is between owners; None if it
        came to this member meanwhile.  The first look may be answered from memory; while
        waiting, ZooKeeper is read at once and then every FRESH_EVERY seconds, and memory
        (which the directory's watches keep current) in between: calls waiting out a
        takeover by the dozen read ZooKeeper over the same client the membership uses,
        and every 50 ms each they slowed the takeover they waited for."""
        now = time.monotonic()
        deadline = now + self.wait
        last_fresh = now if fresh else -FRESH_EVERY
        while True:
            if self.drives(job_id):
                return None
            address = self.owners.address_of(job_id, fresh)
            if address is not None:
                return address
            if time.monotonic() >= deadline:
                raise Unavailable(f"the job manager driving job {job_id} is changing over; "
                                  "try again")
            self._sleep(0.05)
            now = time.monotonic()
            fresh = now - last_fresh >= FRESH_EVERY
            if fresh:
                last_fresh = now

    def _channel(self, address: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = self._connect(address)
            return channel


def _timeout(context: grpc.ServicerContext) -> float:
    """The deadline of a forwarded call: the caller's remaining time, at most
    FORWARD_TIMEOUT (and at least 0.1 s, so a call about to expire still gets an answer)."""
    remaining = context.time_remaining()
    timeout = remaining if remaining is not None and remaining < FORWARD_TIMEOUT \
        else FORWARD_TIMEOUT
    return max(0.1, timeout)


def _reproduce(err: grpc.RpcError, context: grpc.ServicerContext) -> None:
    """End the call with the owner's status, details and trailers (its error field)."""
    # (Without our NOT_OWNER marker: it is meant for a forwarding member, not a client.)
    context.set_trailing_metadata(tuple((k, v) for k, v in err.trailing_metadata() or ()
                                        if k != NOT_OWNER_KEY))
    context.abort(err.code(), err.details() or "")


def _serialize(request: Message) -> bytes:
    return request.SerializeToString()


def update_job_from(get_update: Callable[[str], Any]) -> Callable[[str], str | None]:
    """`update_job` over a store's `get_update` (None for an unknown workflow: the call is
    answered here, with the servicer's own NotFound)."""

    def job(update_id: str) -> str | None:
        try:
            return str(get_update(update_id).job_id)
        except (NotFound, InvalidArgument):
            return None

    return job
