"""`peloton migrate copy`: copy every entity from one store to another, resumably.

Works between any two backends (SQLite, PostgreSQL, Cassandra) through
the BulkStore records of peloton/storage/bulk.py, kind by kind in
dependency order, in batches.  Revisions and versions are copied as they
are, so a daemon pointed at the destination carries on where it was.

Resuming: after each batch the destination stores a checkpoint (the
source's scan cursor) for this copy, in the same transaction as the batch
on SQL.  Run the same command again after an interruption and it
continues after the last committed batch; `--restart` starts over.

Live source: a kind that a previous pass finished is not copied again
but *caught up*: the source is scanned, each batch is compared with the
destination by fingerprint (the revision for runtimes and workflows,
which every write bumps; a hash of the payload for the rest) and only the
records that differ are written; then records that are gone from the
source are deleted from the destination.  So a cut-over is: copy while
the cluster runs, catch up (repeat until little changes), stop the
daemons, catch up once more, `verify`, switch the URL.  See
migrations/README.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from peloton.core.errors import InvalidArgument
from peloton.storage import Store, check_schema, open_store
from peloton.storage.bulk import KINDS, Checkpoint, Key, Kind, fingerprint

#: Called after every batch with (kind, records handled so far in this kind).
BatchHook = Callable[[str, int], None]
#: Called with (kind, total) when a kind starts and (kind, advance) after each batch.
Progress = Callable[[str, int, int], None]


@dataclass
class KindStats:
    """What one copy pass did to one kind."""

    kind: str
    mode: str  # "copy", "resume" or "catch-up"
    scanned: int = 0
    written: int = 0
    unchanged: int = 0
    deleted: int = 0


@dataclass
class CopyReport:
    """What a `copy_store` run did, kind by kind."""

    copy_id: str
    kinds: list[KindStats] = field(default_factory=list)

    @property
    def written(self) -> int:
        """Records written in all kinds."""
        return sum(k.written for k in self.kinds)


def open_url(url: str) -> Store:
    """Open a store for the migration tool (any schema version; the tool checks it)."""
    return open_store(url)


def copy_id_for(source: Store) -> str:
    """The name checkpoints of copies *from* `source` are kept under in a destination."""
    return hashlib.sha1(source.url.encode()).hexdigest()[:16]


def copy_store(source: Store, dest: Store, *, batch_size: int = 500, restart: bool = False,
               kinds: Sequence[str] | None = None, on_batch: BatchHook | None = None,
               progress: Progress | None = None) -> CopyReport:
    """Copy (or resume, or catch up) every kind from `source` into `dest`."""
    if source.url == dest.url:
        raise InvalidArgument("source and destination are the same store", field="to")
    if batch_size < 1:
        raise InvalidArgument("batch size must be >= 1", field="batch_size")
    check_schema(source)
    check_schema(dest)
    copy_id = copy_id_for(source)
    if restart:
        dest.clear_checkpoints(copy_id)
    wanted = [k for k in KINDS if kinds is None or k.name in kinds]
    report = CopyReport(copy_id)
    for kind in wanted:
        cp = dest.get_checkpoint(copy_id, kind.name) or Checkpoint(copy_id, kind.name)
        if progress is not None:
            progress(kind.name, -1, source.count_records(kind.name))
        run = _catch_up if cp.done else _copy
        report.kinds.append(run(kind, source, dest, cp, batch_size, on_batch, progress))
    return report


def _copy(kind: Kind, source: Store, dest: Store, cp: Checkpoint, batch: int,
          on_batch: BatchHook | None, progress: Progress | None) -> KindStats:
    stats = KindStats(kind.name, "resume" if cp.cursor is not None else "copy")
    cursor, copied = cp.cursor, cp.copied
    while True:
        records, next_cursor = source.scan_records(kind.name, cursor, batch)
        copied += len(records)
        done = next_cursor is None
        saved = Checkpoint(cp.copy_id, kind.name, next_cursor, done,
                           cp.passes + (1 if done else 0), copied)
        if records:
            dest.put_records(kind.name, records, checkpoint=saved)
        else:
            dest.put_checkpoint(saved)
        stats.scanned += len(records)
        stats.written += len(records)
        if progress is not None:
            progress(kind.name, len(records), 0)
        if on_batch is not None:
            on_batch(kind.name, stats.scanned)
        if done:
            return stats
        cursor = next_cursor


def _catch_up(kind: Kind, source: Store, dest: Store, cp: Checkpoint, batch: int,
              on_batch: BatchHook | None, progress: Progress | None) -> KindStats:
    stats = KindStats(kind.name, "catch-up")
    seen: set[Key] = set()
    cursor: str | None = None
    while True:
        records, cursor = source.scan_records(kind.name, cursor, batch)
        seen.update(r.key for r in records)
        theirs = {r.key: fingerprint(kind, r)
                  for r in dest.get_records(kind.name, [r.key for r in records])}
        changed = [r for r in records if theirs.get(r.key) != fingerprint(kind, r)]
        if changed:
            dest.put_records(kind.name, changed)
        stats.scanned += len(records)
        stats.written += len(changed)
        stats.unchanged += len(records) - len(changed)
        if progress is not None:
            progress(kind.name, len(records), 0)
        if on_batch is not None:
            on_batch(kind.name, stats.scanned)
        if cursor is None:
            break
    # Records deleted from the source since they were copied.
    cursor = None
    while True:
        records, cursor = dest.scan_records(kind.name, cursor, batch)
        gone = [r.key for r in records if r.key not in seen]
        if gone:
            dest.delete_records(kind.name, gone)
            stats.deleted += len(gone)
        if cursor is None:
            break
    dest.put_checkpoint(Checkpoint(cp.copy_id, kind.name, None, True, cp.passes + 1,
                                   cp.copied + stats.written))
    return stats
