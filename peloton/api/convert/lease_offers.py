"""AcquireHosts replies -> HostLease, decoding each host's offer only when its bytes changed.

A placement round leases thousands of hosts (4 per task it places), and decoding their
offers was a third or more of the placement engine's CPU: ~20 µs an offer for the messages
and the `Resources`, labels and port ranges built from them, against well under 1 µs for
gRPC to read the reply.  Most offers a round gets are byte for byte what the engine got
for the same host before (a host is offered while it has room, and once its runs end its
offer is the one it had before them; the host manager even sends each unchanged offer as
the same encoded bytes, hostmgr_servicer.py): at the 100,000-task scale shape, 10,000 of
400,000 leased offers were new.  So `LeaseDecoder` walks the reply's wire format, cutting
out each offer's bytes, and decodes an offer only when it has not seen those exact bytes:
an offer is a pure function of its bytes and `HostOffer` is immutable, so the one decoded
before is reused.  It is also the same object as before, so a placer that still holds the
host sees at once that it did not change (`Placer.sync` checks identity first).

Same result and same errors as `offer_from_pb` over `AcquireHostsResponse.FromString`:
a reply the walk does not take (a wire type other than varint, 64-bit, length-delimited
or 32-bit, a length past the end) is decoded by protobuf itself, which raises its
DecodeError for a malformed one.

Memory: one decoded offer and its bytes per host (the newest seen); a host's older offer is
dropped when its new one is decoded, and everything is dropped when `max_hosts` distinct
hosts have been seen (hosts that left the cluster are forgotten that way).
"""

from __future__ import annotations

from peloton.api.convert.private_hosts import offer_from_pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.api.gen.pelotonpy.internal.sched import sched_pb2 as sched_pb
from peloton.core.model.host import HostOffer
from peloton.core.model.sched import HostLease

#: Tags of AcquireHostsResponse's fields as they appear on the wire (field << 3 | 2).
_LEASE_ID = 1 << 3 | 2
_OFFER = 2 << 3 | 2
#: Hosts remembered before the cache starts over.
MAX_HOSTS = 200_000


class _Unwalkable(ValueError):
    """A reply the walk does not take (protobuf decodes it, or says why it cannot)."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Unwalkable("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def split_reply(data: bytes) -> tuple[str, list[bytes]]:
    """An encoded AcquireHostsResponse's lease id and each offer's bytes, in order."""
    lease_id = ""
    offers: list[bytes] = []
    pos, end = 0, len(data)
    while pos < end:
        tag = data[pos]
        if tag & 0x80:  # a field number above 15: not one of ours, but valid
            tag, pos = _varint(data, pos)
        else:
            pos += 1
        if tag >> 3 == 0:
            raise _Unwalkable("field number 0")
        kind = tag & 7
        if kind == 2:
            size = data[pos] if pos < end else 0x80
            if size & 0x80:
                size, pos = _varint(data, pos)
            else:
                pos += 1
            stop = pos + size
            if stop > end:
                raise _Unwalkable("field past the end")
            if tag == _OFFER:
                offers.append(data[pos:stop])
            elif tag == _LEASE_ID:
                lease_id = data[pos:stop].decode()
            pos = stop
        elif kind == 0:
            _, pos = _varint(data, pos)
        elif kind == 1 or kind == 5:
            pos += 8 if kind == 1 else 4
            if pos > end:
                raise _Unwalkable("field past the end")
        else:
            raise _Unwalkable(f"wire type {kind}")
    return lease_id, offers


class LeaseDecoder:
    """Decodes AcquireHosts replies for one placement engine; see the module docstring.

    Shared by whoever holds the client (copies of it too, term_fence.py): every entry is a
    pure function of its key, so calls that interleave can at worst decode an offer twice.
    """

    def __init__(self, max_hosts: int = MAX_HOSTS) -> None:
        self.max_hosts = max_hosts
        #: An offer's bytes -> the offer they decode to (the newest bytes of each host).
        self._offers: dict[bytes, HostOffer] = {}
        #: Hostname -> the bytes its entry in `_offers` is under.
        self._bytes_of: dict[str, bytes] = {}
        #: Offers decoded (not found by their bytes), for tests and metrics.
        self.decoded = 0

    def lease(self, data: bytes) -> HostLease:
        """The lease an encoded AcquireHostsResponse holds."""
        try:
            lease_id, chunks = split_reply(data)
        except (_Unwalkable, UnicodeDecodeError, IndexError):
            reply = pb.AcquireHostsResponse.FromString(data)
            return HostLease(reply.lease_id, tuple(offer_from_pb(o) for o in reply.offers))
        known = self._offers
        offers = []
        for chunk in chunks:
            offer = known.get(chunk)
            if offer is None:
                offer = self._decode(chunk)
            offers.append(offer)
        return HostLease(lease_id, tuple(offers))

    def _decode(self, chunk: bytes) -> HostOffer:
        offer = offer_from_pb(sched_pb.HostOffer.FromString(chunk))
        self.decoded += 1
        old = self._bytes_of.get(offer.hostname)
        if old is not None:
            self._offers.pop(old, None)
        elif len(self._bytes_of) >= self.max_hosts:
            self._offers.clear()
            self._bytes_of.clear()
        self._offers[chunk] = offer
        self._bytes_of[offer.hostname] = chunk
        return offer
