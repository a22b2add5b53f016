"""The placement engine's lease decoder (lease_offers.py): the same lease protobuf decodes,
with an offer decoded only when its bytes are new."""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError

from peloton.api.convert.lease_offers import LeaseDecoder
from peloton.api.convert.private_hosts import offer_from_pb, offer_to_pb
from peloton.api.gen.pelotonpy.internal.hostmgr import hostmgr_pb2 as pb
from peloton.core.model.constraints import Label
from peloton.core.model.host import HostOffer
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import HostLease
from peloton.core.states import HostState


def offer(i: int, used: int = 0, *, gpu: float = 0.0) -> HostOffer:
    """Host `i` with `used` half-cpu tasks of job j-<k> on it."""
    cap = Resources(cpu=2, mem_mb=1024, disk_mb=4096, gpu=gpu)
    return HostOffer(f"host-{i:05d}", f"agent-{i:05d}", cap,
                     Resources(cpu=2 - used / 2, mem_mb=1024 - 64 * used, disk_mb=4096, gpu=gpu),
                     (PortRange(31000 + used, 31999), PortRange(32010, 32020)),
                     (Label("zone", "abc"[i % 3]), Label("rack", f"r{i // 40}")),
                     HostState.DRAINING if i % 17 == 0 else HostState.UP, 0.25 * (i % 3),
                     tuple((Label("job", f"j-{k}"), k + 1) for k in range(used)))


def encode(lease_id: str, offers: list[HostOffer]) -> bytes:
    return pb.AcquireHostsResponse(lease_id=lease_id,
                                   offers=[offer_to_pb(o) for o in offers]).SerializeToString()


def by_protobuf(data: bytes) -> HostLease:
    """What the client decoded before the lease decoder (and still must equal)."""
    reply = pb.AcquireHostsResponse.FromString(data)
    return HostLease(reply.lease_id, tuple(offer_from_pb(o) for o in reply.offers))


def test_leases_decode_as_protobuf_decodes_them_round_after_round() -> None:
    rng = random.Random(7)
    hosts = [offer(i, gpu=4.0 if i % 23 == 0 else 0.0) for i in range(300)]
    decoder = LeaseDecoder()
    for round_no in range(20):
        for i in rng.sample(range(len(hosts)), 30):  # placed on, or a task ended
            hosts[i] = offer(i, rng.randrange(4))
        data = encode(f"lease-{round_no}", rng.sample(hosts, 120))
        assert decoder.lease(data) == by_protobuf(data)


def test_an_offer_seen_before_is_not_decoded_again_and_is_the_same_value() -> None:
    decoder = LeaseDecoder()
    first = decoder.lease(encode("a", [offer(1), offer(2), offer(3)]))
    assert decoder.decoded == 3
    second = decoder.lease(encode("b", [offer(3), offer(2, used=1), offer(1)]))
    assert second.lease_id == "b"
    assert decoder.decoded == 4  # only host 2 changed
    assert second.offers[2] is first.offers[0] and second.offers[0] is first.offers[2]
    assert second.offers[1] == offer(2, used=1)
    # A host's older offer is forgotten once its new one is decoded: one entry per host.
    assert len(decoder._offers) == 3
    assert decoder.lease(encode("c", [offer(2)])).offers == (offer(2),)
    assert decoder.decoded == 5


def test_fields_it_does_not_know_are_passed_over_as_protobuf_does() -> None:
    known = encode("lease", [offer(1), offer(2)])
    reply = pb.AcquireHostsResponse()
    reply.MergeFromString(known)
    # Unknown fields of every wire type a newer host manager could add: a varint, a
    # 64-bit, a length-delimited and a 32-bit field, and one whose number needs two bytes.
    unknown = (bytes([3 << 3 | 0, 0x96, 0x01]) + bytes([4 << 3 | 1]) + b"\x00" * 8
               + bytes([5 << 3 | 2, 3]) + b"abc" + bytes([6 << 3 | 5]) + b"\x01" * 4
               + bytes([0x82, 0x01, 1]) + b"z")
    data = unknown[:3] + known + unknown[3:]
    assert LeaseDecoder().lease(data) == by_protobuf(data)
    assert LeaseDecoder().lease(b"") == HostLease("", ())


def test_a_malformed_reply_raises_what_protobuf_raises() -> None:
    data = encode("lease", [offer(1)])
    for bad in (data[:-5], data + bytes([2 << 3 | 2, 0x7F]), b"\x00\x01", bytes([1 << 3 | 3])):
        with pytest.raises(DecodeError):
            by_protobuf(bad)
        with pytest.raises(DecodeError):
            LeaseDecoder().lease(bad)


def test_it_starts_over_after_max_hosts_hosts() -> None:
    decoder = LeaseDecoder(max_hosts=4)
    decoder.lease(encode("a", [offer(i) for i in range(4)]))
    lease = decoder.lease(encode("b", [offer(i) for i in range(3, 6)]))
    assert lease.offers == tuple(offer(i) for i in range(3, 6))
    assert decoder.decoded == 6  # hosts 4 and 5 were new
    assert len(decoder._offers) <= 4
