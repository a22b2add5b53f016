"""`peloton migrate verify`: do two stores hold the same entities?

For every kind, both stores are scanned and each record is reduced to a
digest of its key and its *canonical* payload (decoded, then encoded
again by the current codec, so two backends that stored the same value
with different JSON spelling still agree, and a payload that does not
decode is caught).  The digests are summed modulo 2**128, which does not
depend on scan order (Cassandra scans in token order, SQL in key order).
A kind matches when counts and checksums are equal and nothing is
corrupt.  For a kind that does not match, a second pass compares the
digests key by key and names up to `max_diffs` keys that are missing,
extra or different.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from peloton.core.errors import DataCorruption
from peloton.storage import Store
from peloton.storage.bulk import KINDS, Kind, Record, canonical_payload

_MOD = 2**128


@dataclass
class KindReport:
    """Verification of one kind."""

    kind: str
    source_count: int = 0
    dest_count: int = 0
    source_checksum: int = 0
    dest_checksum: int = 0
    corrupt: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Counts and checksums agree and nothing is corrupt."""
        return (self.source_count == self.dest_count
                and self.source_checksum == self.dest_checksum and not self.corrupt)


@dataclass
class VerifyReport:
    """Verification of every kind."""

    kinds: list[KindReport]

    @property
    def ok(self) -> bool:
        """Every kind matches."""
        return all(k.ok for k in self.kinds)


def digest(kind: Kind, record: Record) -> tuple[int, str | None]:
    """(digest, None) for a record, or (digest of the raw payload, error) if it is corrupt."""
    error = None
    try:
        canonical = canonical_payload(kind, record)
    except DataCorruption as exc:
        canonical, error = "corrupt:" + record.payload, str(exc)
    h = hashlib.sha256(f"{json.dumps(list(record.key))}\0{canonical}".encode()).digest()
    return int.from_bytes(h[:16], "big"), error


def _records(store: Store, kind: str, batch: int) -> Iterator[Record]:
    cursor: str | None = None
    while True:
        records, cursor = store.scan_records(kind, cursor, batch)
        yield from records
        if cursor is None:
            return


def verify_stores(source: Store, dest: Store, *, batch_size: int = 1000,
                  max_diffs: int = 10) -> VerifyReport:
    """Compare every kind of `source` and `dest`."""
    reports = []
    for kind in KINDS:
        rep = KindReport(kind.name)
        for side, store in (("source", source), ("destination", dest)):
            count = checksum = 0
            for record in _records(store, kind.name, batch_size):
                value, error = digest(kind, record)
                count += 1
                checksum = (checksum + value) % _MOD
                if error is not None and len(rep.corrupt) < max_diffs:
                    rep.corrupt.append(f"{side}: {error}")
            if side == "source":
                rep.source_count, rep.source_checksum = count, checksum
            else:
                rep.dest_count, rep.dest_checksum = count, checksum
        if not rep.ok:
            rep.differences = _differences(kind, source, dest, batch_size, max_diffs)
        reports.append(rep)
    return VerifyReport(reports)


def _differences(kind: Kind, source: Store, dest: Store, batch: int, limit: int) -> list[str]:
    theirs = {r.key: digest(kind, r)[0] for r in _records(dest, kind.name, batch)}
    out: list[str] = []
    for record in _records(source, kind.name, batch):
        other = theirs.pop(record.key, None)
        name = kind.describe(record.key)
        if other is None:
            out.append(f"{name}: missing in the destination")
        elif other != digest(kind, record)[0]:
            out.append(f"{name}: differs")
    out.extend(f"{kind.describe(key)}: only in the destination" for key in theirs)
    return out[:limit]
