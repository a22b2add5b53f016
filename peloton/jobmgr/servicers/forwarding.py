"""Any job manager answers any call: a call about another member's job goes to its owner.

With all-active job managers (docs/design/all-active-jobmgr.md, "Routing calls") each
member caches and writes only the jobs of the partitions it holds.  A unary call about one
job (the request's JobID, a PodName's job, an UpdateID's job: `job_of`) whose partition
another member holds is sent **unchanged** (same method, same bytes, the caller's
metadata) to that owner, whose reply, or status, is the answer.  Reads are forwarded like
writes: the owner's cache is the freshest view of its jobs, and one rule is simpler to
trust than a read path per method.

* One hop: a forwarded call carries `peloton-forwarded`; a member receiving one for a job
  it does not drive answers UNAVAILABLE (retryable) instead of forwarding again, so a
  membership race cannot make a call loop.
* Between owners (the partition's node is gone, its next owner has not claimed it yet)
  the call waits up to `wait` seconds for one, then answers UNAVAILABLE, as a leader
  failover does.
* Server-streaming calls about one job (v1 ListPods) are relayed the same way.  Calls
  about no single job (queries, lists, watches, a create without an id) are answered
  here; a create without an id picks one in a partition this member holds
  (ownership.py), so it is never forwarded.

Writes are never applied here under the owner's fence: the owner's cache would not see
them (the one-writer rule of aggregate.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf.message import Message

from peloton.core.errors import InvalidArgument, NotFound, Unavailable
from peloton.core.model.ids import TaskId

log = logging.getLogger(__name__)

#: Metadata of a call one member forwarded to another.
FORWARDED_KEY = "peloton-forwarded"
#: Message types naming a job, a pod (`<job id>-<instance>`) and a workflow.
JOB_IDS = frozenset({"peloton.api.v0.peloton.JobID", "peloton.api.v1alpha.peloton.JobID"})
POD_NAME = "peloton.api.v1alpha.peloton.PodName"
UPDATE_ID = "peloton.api.v0.peloton.UpdateID"
_NAMING = JOB_IDS | {POD_NAME, UPDATE_ID}
#: How long a call waits for a partition between owners (seconds).
OWNER_WAIT = 5.0
#: Default deadline of a forwarded call whose caller set none (seconds).
FORWARD_TIMEOUT = 30.0


def job_of(request: Message, update_job: Callable[[str], str | None]) -> str | None:
    """The job a request is about: its first set top-level JobID, PodName or UpdateID
    (`update_job` maps a workflow to its job), or None (it is about no single job)."""
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


class MemberForwarder:
    """A `service_registry.Forwarder` for one member; see the module docstring.

    `drives(job_id)`: this member holds the job's partition.  `owner(job_id)`: the gRPC
    address of the member holding it now, None while it has none (a ZooKeeper read).
    `update_job(update_id)`: the job of a workflow (a store read; None if unknown).
    """

    def __init__(self, drives: Callable[[str], bool], owner: Callable[[str], str | None],
                 update_job: Callable[[str], str | None], *,
                 connect: Callable[[str], grpc.Channel] = grpc.insecure_channel,
                 wait: float = OWNER_WAIT, sleep: Callable[[float], None] = time.sleep) -> None:
        self.drives = drives
        self.owner = owner
        self.update_job = update_job
        self.wait = wait
        self._connect = connect
        self._sleep = sleep
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()
        #: Calls forwarded (tests and logs).
        self.forwarded = 0

    def forward(self, where: str, request: Any, context: grpc.ServicerContext) -> bytes | None:
        """The owner's serialized reply if another member drives the request's job; None
        to answer here.  Unavailable when it cannot be forwarded (see the docstring)."""
        target = self._target(request, context)
        if target is None:
            return None
        address, metadata, timeout = target
        call = self._channel(address).unary_unary(
            f"/{where}", request_serializer=_serialize, response_deserializer=None)
        self.forwarded += 1
        try:
            reply: bytes = call(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as err:
            _reproduce(err, context)
            raise  # unreachable: abort raises
        return reply

    def forward_stream(self, where: str, request: Any,
                       context: grpc.ServicerContext) -> Iterator[bytes] | None:
        """The owner's serialized replies of a server-streaming call about another member's
        job (v1 ListPods), or None to answer here; as `forward`."""
        target = self._target(request, context)
        if target is None:
            return None
        address, metadata, timeout = target
        call = self._channel(address).unary_stream(
            f"/{where}", request_serializer=_serialize, response_deserializer=None)
        self.forwarded += 1
        return self._relay(call(request, timeout=timeout, metadata=metadata), context)

    @staticmethod
    def _relay(replies: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        try:
            yield from replies
        except grpc.RpcError as err:
            _reproduce(err, context)

    def _target(self, request: Any, context: grpc.ServicerContext
                ) -> tuple[str, list[tuple[str, str]], float] | None:
        """(owner address, metadata to send, timeout) of a call to forward, or None."""
        job_id = job_of(request, self.update_job)
        if job_id is None or self.drives(job_id):
            return None
        metadata = tuple(context.invocation_metadata() or ())
        if any(k == FORWARDED_KEY for k, _ in metadata):
            raise Unavailable(f"job {job_id} is not driven by this job manager (its partition "
                              "moved while the call was forwarded); try again")
        address = self._await_owner(job_id)
        if address is None:
            return None  # its partition came here while the call waited
        passed = [(k, v) for k, v in metadata
                  if not k.startswith((":", "grpc-")) and k != "user-agent"]
        remaining = context.time_remaining()
        timeout = remaining if remaining is not None and remaining < FORWARD_TIMEOUT \
            else FORWARD_TIMEOUT
        return address, [*passed, (FORWARDED_KEY, "1")], max(0.1, timeout)

    def close(self) -> None:
        """Close the channels to other members."""
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()

    def _await_owner(self, job_id: str) -> str | None:
        """The owner's address, waiting while the partition is between owners; None if it
        came to this member meanwhile."""
        deadline = time.monotonic() + self.wait
        while True:
            if self.drives(job_id):
                return None
            address = self.owner(job_id)
            if address is not None:
                return address
            if time.monotonic() >= deadline:
                raise Unavailable(f"the job manager driving job {job_id} is changing over; "
                                  "try again")
            self._sleep(0.05)

    def _channel(self, address: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = self._connect(address)
            return channel


def _reproduce(err: grpc.RpcError, context: grpc.ServicerContext) -> None:
    """End the call with the owner's status, details and trailers (its error field)."""
    context.set_trailing_metadata(tuple(err.trailing_metadata() or ()))
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
