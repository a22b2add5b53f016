"""gRPC plumbing under the typed client: channels, YARPC metadata, deadlines, errors.

Peloton's daemons sit behind YARPC's gRPC transport, which wants three
metadata keys on every call (`rpc-caller`, `rpc-service`, `rpc-encoding`)
and a deadline; we always send both, so the same client talks to Uber's
Go daemons and to ours.  Every failure leaves this module as a
`PelotonError` (via `grpc_errors.error_for`), never as a `grpc.RpcError`:
callers (the CLI, the Aurora bridge, the archiver) map one error tree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from peloton.api.grpc_errors import error_for
from peloton.api.tls_grpc import open_channel
from peloton.common.tls import TlsFiles
from peloton.core.errors import PelotonError, Unavailable

#: Peloton's gRPC servers and clients accept messages up to 256 MiB (a
#: 50,000-instance job does not fit grpcio's 4 MiB default).
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]

M = TypeVar("M", bound=Message)
#: What a standby answers (Peloton's LeaderCheckInboundMiddleware).
NON_LEADER = "call to non-leader node"
#: UNAVAILABLE details that a server sent, not a failed connection (AdminService lockdown,
#: a standby's leader check).
SERVER_SAID = ("locked down", NON_LEADER)
#: Pause between attempts while a just-elected leader recovers (see Transport.await_leader).
LEADER_RETRY_DELAY = 0.1


class DeadlineExceeded(Unavailable):
    """A call did not finish within its deadline (the CLI's `--timeout`)."""

    kind = "deadline_exceeded"


def _to_error(err: grpc.RpcError, where: str, address: str, timeout: float | None) -> PelotonError:
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else "") or ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(f"{where} did not answer within {timeout:g}s (address {address})"
                                if timeout else f"{where}: deadline exceeded ({details})")
    if code == grpc.StatusCode.UNAVAILABLE:
        if any(said in details for said in SERVER_SAID):
            # The server answered (an API lockdown, a standby): say what it said.
            return Unavailable(f"{where} at {address}: {details}")
        # Name the address: "nothing listens there" is the usual cause.
        return Unavailable(f"cannot reach {where} at {address}: {details}")
    return error_for(code, details or f"{where} failed with {code.name}")


def _non_leader(err: grpc.RpcError) -> bool:
    """Did a standby (or a leader still recovering) refuse the call?"""
    return (hasattr(err, "code") and err.code() == grpc.StatusCode.UNAVAILABLE
            and NON_LEADER in ((err.details() if hasattr(err, "details") else "") or ""))


class Transport:
    """Owns one channel per address (TLS with `tls`) and the metadata every call carries."""

    def __init__(self, *, caller: str, timeout: float, headers: Mapping[str, str] | None = None,
                 tls: TlsFiles | None = None, await_leader: bool = False) -> None:
        # With `await_leader` (addresses read from ZooKeeper leader znodes), a "call to
        # non-leader node" answer is retried within the call's deadline: the znode names a
        # candidate as soon as it is elected, and it answers so until its recovery is done.
        # The gate refuses before any handler runs, so a retry never applies a call twice.
        # Fixed addresses fail at once, as Peloton's clients do.
        self.await_leader = await_leader
        self.caller = caller
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.tls = tls
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def channel(self, address: str) -> grpc.Channel:
        """The (shared, lazily opened) channel to `address`."""
        with self._lock:
            ch = self._channels.get(address)
            if ch is None:
                ch = open_channel(address, self.tls, CHANNEL_OPTIONS)
                self._channels[address] = ch
            return ch

    def derive(self, headers: Mapping[str, str]) -> Transport:
        """A transport sharing these channels that sends `headers` instead."""
        other = Transport(caller=self.caller, timeout=self.timeout, headers=headers, tls=self.tls,
                          await_leader=self.await_leader)
        other._channels, other._lock = self._channels, self._lock
        return other

    def metadata(self, rpc_service: str) -> Sequence[tuple[str, str]]:
        """YARPC metadata for a call to the daemon whose dispatcher is `rpc_service`."""
        return (("rpc-caller", self.caller), ("rpc-service", rpc_service),
                ("rpc-encoding", "proto"), *self.headers.items())

    def close(self) -> None:
        """Close every channel (a later call opens a new one)."""
        with self._lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()


class ServiceHandle:
    """Calls the methods of one gRPC service on one daemon.

    `name` is the service path as served (`peloton.api.job.JobManager` for
    Peloton's renamed v0 services); `rpc_service` is the YARPC dispatcher
    name of the daemon (`peloton-jobmgr`, ...).
    """

    def __init__(self, transport: Transport, address: str, rpc_service: str, name: str) -> None:
        self.transport = transport
        self.address = address
        self.rpc_service = rpc_service
        self.name = name
        # Multi-callables are reused (the bridge and archiver make many calls per second),
        # per channel: after Transport.close() the next call opens a fresh channel.
        self._unary: dict[str, tuple[grpc.Channel, Any]] = {}

    def _where(self, method: str) -> str:
        return f"{self.rpc_service} ({self.name}/{method})"

    def call(self, method: str, request: Message, response_type: type[M],
             *, timeout: float | None = None,
             metadata: Sequence[tuple[str, str | bytes]] = ()) -> M:
        """One unary call; raises a PelotonError on any failure.  `metadata` is sent after
        the transport's own (our extensions' side channels, e.g. update options)."""
        deadline = timeout if timeout is not None else self.transport.timeout
        channel = self.transport.channel(self.address)
        cached = self._unary.get(method)
        if cached is not None and cached[0] is channel:
            rpc = cached[1]
        else:
            rpc = channel.unary_unary(f"/{self.name}/{method}", request_serializer=_serialize,
                                      response_deserializer=response_type.FromString)
            self._unary[method] = (channel, rpc)
        give_up = time.monotonic() + deadline if deadline else None
        while True:
            left = None if give_up is None else max(give_up - time.monotonic(), 0.001)
            try:
                response: M = rpc(request, timeout=left,
                                  metadata=(*self.transport.metadata(self.rpc_service), *metadata))
            except grpc.RpcError as err:
                if (self.transport.await_leader and _non_leader(err) and give_up is not None
                        and time.monotonic() + LEADER_RETRY_DELAY < give_up):
                    time.sleep(LEADER_RETRY_DELAY)
                    continue
                raise _to_error(err, self._where(method), self.address, deadline) from None
            return response

    def stream(self, method: str, request: Message, response_type: type[M],
               *, timeout: float | None = None) -> Iterator[M]:
        """A server-streaming call; `timeout=None` streams until the server ends it."""
        rpc = self.transport.channel(self.address).unary_stream(
            f"/{self.name}/{method}",
            request_serializer=_serialize,
            response_deserializer=response_type.FromString,
        )
        responses = rpc(request, timeout=timeout, metadata=self.transport.metadata(self.rpc_service))
        try:
            yield from responses
        except grpc.RpcError as err:
            raise _to_error(err, self._where(method), self.address, timeout) from None
        finally:
            responses.cancel()


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data
