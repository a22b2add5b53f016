"""What every Cassandra store module shares: the session and statement helpers.

Writes that span partitions are not atomic in Cassandra.  The backend
orders them so that a crash leaves nothing a reader can trust half-done:
derived rows (index and lookup tables) are written first and the row that
makes an entity exist (a runtime, a config) last, every write is an
idempotent upsert or a lightweight transaction, and so retrying the
operation completes it.  Multi-row writes into one partition go in
single-partition batches, which Cassandra applies atomically, in chunks
below the default 50 KB batch size limit.  The same limit splits the
multi-partition (logged) batches of index and lookup rows: a job at the API's
maxima (128 labels of 4 KiB, a 16 KiB description) is far above it, and
those rows are upserts the next write of the job repairs anyway (index.py);
a single row above the limit is written on its own, not as a batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from peloton.storage.cassandra.session import CqlSession, Row
from peloton.storage.cassandra.statements import STATEMENTS
from peloton.storage.store import StoreOptions

#: Bounds of one single-partition batch: Cassandra warns above 5 KB and refuses batches
#: above 50 KB by default (batch_size_fail_threshold_in_kb), so stay well under that.
BATCH_ROWS = 40
BATCH_BYTES = 24_000
#: Keys per IN list.
IN_CHUNK = 100
#: LIMIT used when the caller asked for no limit.
NO_LIMIT = 2**31 - 1


#: How an empty string is stored where it is a partition key: Cassandra refuses empty
#: partition keys ("Key may not be empty"), and a job may have no owner, pool or name.
EMPTY_KEY = "\x00"


def key_of(value: str) -> str:
    """A text value as a partition key (EMPTY_KEY for "")."""
    return value if value else EMPTY_KEY


def value_of_key(key: str) -> str:
    """The text value a partition key stands for (the inverse of key_of)."""
    return "" if key == EMPTY_KEY else key


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """`items` in slices of at most `size`."""
    for i in range(0, len(items), size):
        yield items[i:i + size]


class CassandraBase:
    """Session access by statement name."""

    s: CqlSession
    options: StoreOptions

    def q(self, name: str, *params: Any) -> list[Row]:
        """Run a statement; all rows."""
        return self.s.execute(STATEMENTS[name], params)

    def q1(self, name: str, *params: Any) -> Row | None:
        """Run a statement; the first row or None."""
        rows = self.s.execute(STATEMENTS[name], params)
        return rows[0] if rows else None

    def many(self, name: str, params: Sequence[Sequence[Any]]) -> list[list[Row]]:
        """Run a statement once per parameter list, concurrently."""
        if not params:
            return []
        return self.s.execute_many(STATEMENTS[name], params)

    def batch(self, items: Sequence[tuple[str, Sequence[Any]]]) -> None:
        """Named writes as logged batches of at most BATCH_ROWS rows and (roughly)
        BATCH_BYTES each, applied one after the other in order; usually one batch."""
        group: list[tuple[Any, Sequence[Any]]] = []
        size = 0
        for name, params in items:
            row_size = _size(params)
            if group and (len(group) >= BATCH_ROWS or size + row_size > BATCH_BYTES):
                self.s.batch(group)
                group, size = [], 0
            group.append((STATEMENTS[name], params))
            size += row_size
        if group:
            self.s.batch(group)

    def cas_batches(self, name: str, batches: Sequence[Sequence[Sequence[Any]]]
                    ) -> list[list[Row]]:
        """Conditional single-partition batches of one statement, concurrently (see CqlSession)."""
        if not batches:
            return []
        stmt = STATEMENTS[name]
        return self.s.cas_batches([[(stmt, p) for p in batch] for batch in batches])

    def partition_batches(self, name: str, rows: Sequence[Sequence[Any]]) -> None:
        """Write rows of one partition in atomic single-partition batches, each at most
        BATCH_ROWS rows and (roughly) BATCH_BYTES of values (a larger row goes alone), sent
        concurrently: plain writes, unlike LWTs, do not contend within a partition."""
        batches: list[list[tuple[Any, Sequence[Any]]]] = []
        batch: list[tuple[Any, Sequence[Any]]] = []
        size = 0
        for row in rows:
            row_size = _size(row)
            if batch and (len(batch) >= BATCH_ROWS or size + row_size > BATCH_BYTES):
                batches.append(batch)
                batch, size = [], 0
            batch.append((STATEMENTS[name], row))
            size += row_size
        if batch:
            batches.append(batch)
        if batches:
            self.s.batch_many(batches)


def _size(values: Sequence[Any]) -> int:
    """Roughly the bytes `values` take in a batch (text as UTF-8)."""
    return sum(len(v.encode("utf-8")) if isinstance(v, str) else 8 for v in values)


def applied(row: Row | None) -> bool:
    """Whether a lightweight transaction applied."""
    return bool(row and row.get("[applied]"))
