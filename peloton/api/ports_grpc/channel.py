"""Calling a peer daemon's leader: where it is, retries within a deadline, errors, its term.

A `PeerChannel` calls one private service (`pelotonpy.internal.resmgr....`)
on whichever process currently leads the peer's role:

* `Target` says where that is: `StaticTarget` (one or more fixed
  addresses, tried in turn) or `LeaderTarget` (the `ip:grpc` published at
  `<root>/<role>/leader`, followed through a `LeaderDiscovery` watch);
* UNAVAILABLE (nothing listening, connection lost, or a standby answering
  "call to non-leader node") is retried with capped, jittered backoff until
  the call's deadline, looking the leader up again before every attempt, so
  a call made during a failover lands on the new leader.  Nothing else is
  retried: DEADLINE_EXCEEDED may mean the call was applied, and other codes
  are answers.  A call that runs out of time raises `Unavailable`;
* errors come back as the core error tree (`grpc_errors.error_for`), with
  the offending field from the `peloton-error-field` trailer;
* every leader answer carries the `peloton-term` trailer.  When it changes,
  the peer restarted or failed over and lost its in-memory state; term
  listeners (the job manager) hand that state back.

Channels reconnect quickly (100 ms to 1 s instead of gRPC's default of up to
two minutes), because a peer restarting on the same address is the normal
case here, not an outage to back off from.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from peloton.api.client_transport import CHANNEL_OPTIONS
from peloton.api.grpc_errors import error_for
from peloton.api.service_registry import FIELD_TRAILER
from peloton.api.tls_grpc import open_channel
from peloton.common.auth import Security
from peloton.common.discovery import LeaderDiscovery
from peloton.common.retry import RetryPolicy
from peloton.common.tls import TlsFiles
from peloton.core.errors import PelotonError, Unavailable

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

#: Trailer naming the leader term that answered (see the module docstring).
TERM_KEY = "peloton-term"

PEER_CHANNEL_OPTIONS = [
    *CHANNEL_OPTIONS,
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
#: Backoff between attempts of one call; the call's deadline bounds the total.
PEER_RETRY = RetryPolicy(attempts=1_000_000, initial_delay=0.05, max_delay=1.0, jitter=0.2)

#: Called with (old term, new term) when a peer's term changes.
TermListener = Callable[[str, str], None]


@dataclass(frozen=True)
class PeerSecurity:
    """How a daemon proves itself to its peers: the internal user's metadata and TLS files."""

    metadata: tuple[tuple[str, str], ...] = ()
    tls: TlsFiles | None = None

    @staticmethod
    def of(security: Security) -> PeerSecurity:
        """What a process with `security` sends to its peers."""
        return PeerSecurity(security.internal, security.tls)


class Target(Protocol):
    """Where a role's leader answers."""

    def current(self) -> str | None:
        """The address to try now (None: no leader known)."""
        ...

    def failed(self, address: str) -> None:
        """`address` did not answer as a leader; try elsewhere next."""
        ...


class StaticTarget:
    """Fixed addresses, tried in turn (one address: a single process, or a load balancer)."""

    def __init__(self, addresses: Sequence[str]) -> None:
        if not addresses:
            raise ValueError("at least one address is required")
        self.addresses = list(addresses)
        self._at = 0

    def current(self) -> str | None:
        """The address in turn."""
        return self.addresses[self._at % len(self.addresses)]

    def failed(self, address: str) -> None:
        """Move on to the next address."""
        if self.current() == address:
            self._at += 1


class LeaderTarget:
    """The leader a ZooKeeper discovery follows (it updates itself on every change)."""

    def __init__(self, discovery: LeaderDiscovery) -> None:
        self.discovery = discovery

    def current(self) -> str | None:
        """The published `ip:grpc` of the current leader."""
        return self.discovery.address()

    def failed(self, address: str) -> None:
        """Nothing to do: the watch brings the next leader's address."""


def _trailer(metadata: Any, key: str) -> str | None:
    for k, v in metadata or ():
        if k == key:
            return str(v)
    return None


class PeerChannel:
    """Unary calls to one service of a peer's leader; see the module docstring."""

    def __init__(self, target: Target, service: str, *, rpc_service: str, caller: str,
                 timeout: float = 10.0, retry: RetryPolicy = PEER_RETRY,
                 security: PeerSecurity | None = None) -> None:
        self.target = target
        self.service = service
        self.timeout = timeout
        self._retry = retry
        self._security = security or PeerSecurity()
        self._metadata = (("rpc-caller", caller), ("rpc-service", rpc_service),
                          ("rpc-encoding", "proto"), *self._security.metadata)
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._rpcs: dict[tuple[str, str, bool], Any] = {}
        self._term: str | None = None
        self._listeners: list[TermListener] = []

    @property
    def term(self) -> str | None:
        """The term of the last leader that answered (None before the first answer)."""
        return self._term

    def add_term_listener(self, listener: TermListener) -> None:
        """Call `listener(old, new)` whenever the answering leader's term changes."""
        self._listeners.append(listener)

    def call(self, method: str, request: Message, response_type: type[M], *,
             wait: float = 0.0, metadata: Sequence[tuple[str, str]] = ()) -> M:
        """Call `method`; `wait` is how long the server may hold it (long polls), on top of
        the channel's timeout; `metadata` is sent besides the channel's own (a leader term's
        epoch, term_fence.py).  Raises a PelotonError on failure (Unavailable when no leader
        answered in time)."""
        reply: M = self._call(method, request, response_type.FromString, wait, metadata)
        return reply

    def call_raw(self, method: str, request: Message, *, wait: float = 0.0,
                 metadata: Sequence[tuple[str, str]] = ()) -> bytes:
        """`call`, answering the reply's bytes undecoded (for a caller that decodes a large
        reply its own way, e.g. lease_offers.py)."""
        reply: bytes = self._call(method, request, None, wait, metadata)
        return reply

    def _call(self, method: str, request: Message, decode: Callable[[bytes], Any] | None,
              wait: float, metadata: Sequence[tuple[str, str]]) -> Any:
        sent = (*self._metadata, *metadata) if metadata else self._metadata
        started = time.monotonic()
        deadline = started + self.timeout + max(0.0, wait)
        attempt = 0
        while True:
            address = self.target.current()
            if address is None:
                why = "no leader is known"
            else:
                rpc = self._rpc(address, method, decode)
                try:
                    response, call = rpc.with_call(
                        request, timeout=max(0.001, deadline - time.monotonic()),
                        metadata=sent)
                except grpc.RpcError as err:
                    if err.code() != grpc.StatusCode.UNAVAILABLE:
                        raise self._error(err, method, address) from None
                    self.target.failed(address)
                    why = f"{address}: {err.details() or 'unavailable'}"
                else:
                    self._note_term(_trailer(call.trailing_metadata(), TERM_KEY))
                    return response
            attempt += 1
            delay = self._retry.delay(attempt, random.random())
            if time.monotonic() + delay >= deadline:
                raise Unavailable(f"{self.service}/{method}: {why} (tried for "
                                  f"{time.monotonic() - started:.1f}s)")
            time.sleep(delay)

    def close(self) -> None:
        """Close every channel (a later call opens new ones)."""
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._rpcs.clear()

    # -- internals ---------------------------------------------------------------------------
    def _rpc(self, address: str, method: str, decode: Callable[[bytes], Any] | None) -> Any:
        raw = decode is None
        with self._lock:
            rpc = self._rpcs.get((address, method, raw))
            if rpc is None:
                channel = self._channels.get(address)
                if channel is None:
                    channel = open_channel(address, self._security.tls, PEER_CHANNEL_OPTIONS)
                    self._channels[address] = channel
                rpc = channel.unary_unary(f"/{self.service}/{method}",
                                          request_serializer=_serialize,
                                          response_deserializer=decode)
                self._rpcs[(address, method, raw)] = rpc
            return rpc

    def _error(self, err: grpc.RpcError, method: str, address: str) -> PelotonError:
        code = err.code()
        details = err.details() or f"{self.service}/{method} at {address} failed: {code.name}"
        exc = error_for(code, details)
        exc.field = _trailer(err.trailing_metadata(), FIELD_TRAILER) or None
        return exc

    def _note_term(self, term: str | None) -> None:
        if term is None or term == self._term:
            return
        old, self._term = self._term, term
        if old is None:
            return
        log.info("%s: the leader's term changed (%s -> %s)", self.service, old, term)
        for listener in list(self._listeners):
            try:
                listener(old, term)
            except Exception:
                log.exception("%s: term listener failed", self.service)


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data
