"""The directory archive sink: checksummed gzip JSON-lines segments plus a rebuildable index.

Layout of `dir:///path`:

    FORMAT                 "peloton.archive.dir/v1" (marks the directory as an archive)
    LOCK                   flock'd by the one writer (readers never lock)
    index.jsonl            job record locations, CRC'd lines (archiver/segments.py)
    segments/seg-*.jsonl.gz

Durability: `flush` writes segments by temp file + fsync + rename + dir
fsync (segments.write_segment), then appends index lines and fsyncs them.
The segment rename is the commit point; the index only speeds reads up and
is rebuilt from segments whenever it is missing, damaged or behind them
(a crash between the rename and the index append), because every record
carries its own summary.

Damage is reported, never skipped: a record whose bytes fail their
checksum raises `ArchiveCorrupt` naming its segment; a segment whose
SHA-256 does not match its name is listed by `verify()` (and at open, in
`problems`), and its undamaged members stay readable.
"""

from __future__ import annotations

import fcntl
import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from archiver import segments as seg
from archiver.record import ArchiveCorrupt, ArchiveRecord, RecordSummary
from archiver.sinks import Problem, RecordQuery, select
from peloton.core.errors import InvalidArgument, NotFound, Unavailable

log = logging.getLogger(__name__)

FORMAT = "peloton.archive.dir/v1"
MAX_SEGMENT_BYTES = 4 << 20
MAX_SEGMENT_RECORDS = 1000


@dataclass(frozen=True, slots=True)
class _Entry:
    """Where one record lives: segment sequence number, member offset and length."""

    seq: int
    offset: int
    length: int
    summary: RecordSummary

    def line(self) -> bytes:
        return seg.index_line({"seq": self.seq, "off": self.offset, "len": self.length,
                               "summary": self.summary.to_json()})


class DirSink:
    """An `ArchiveSink` in a directory; see the module docstring."""

    def __init__(self, root: Path, *, create: bool = True, max_segment_bytes: int = MAX_SEGMENT_BYTES,
                 max_segment_records: int = MAX_SEGMENT_RECORDS) -> None:
        self.root = root.resolve()
        self.url = f"dir://{self.root}"
        self.segdir = self.root / "segments"
        self.index_path = self.root / "index.jsonl"
        self.max_bytes, self.max_records = max_segment_bytes, max_segment_records
        if not (self.root / "FORMAT").exists():
            if not create:
                raise NotFound(f"no archive at {self.root}", field="archive")
            self.segdir.mkdir(parents=True, exist_ok=True)
            (self.root / "FORMAT").write_text(FORMAT + "\n")
            seg.fsync_dir(self.root)
        self.problems: list[Problem] = []
        self._pending: list[ArchiveRecord] = []
        self._pending_sha: dict[str, str] = {}
        self._lock_fd: int | None = None
        self._load()

    # -- opening -----------------------------------------------------------------------------
    def _load(self) -> None:
        found = seg.list_segments(self.segdir)
        self._segments = {s: gens[-1] for s, gens in found.items()}
        self._superseded = [g for gens in found.values() for g in gens[:-1]]
        self._index: dict[str, _Entry] = {}
        self._covered: dict[int, int] = {}
        self._records: dict[int, int] = {}
        self._bad: set[int] = set()  # segments not to extend (damaged)
        self._unreadable: list[str] = []  # segments whose scan stopped at damage
        self._unindexed: list[_Entry] = []
        entries, self._rewrite_index = self._read_index()
        for entry in entries:
            self._add(entry)
        for s in sorted({e.seq for e in entries} - set(self._segments)):
            self.problems.append(Problem(f"segment {s:08d}", "missing, but the index lists records in it"))
        for s, name in sorted(self._segments.items()):
            self._scan_tail(s, name)
        for p in self.problems:
            log.error("archive %s: %s: %s", self.root, p.where, p.detail)

    def _read_index(self) -> tuple[list[_Entry], bool]:
        """Index entries, and whether the file must be rewritten (damaged: rebuilt from segments)."""
        try:
            raw, torn = seg.read_index(self.index_path)
            entries = [_Entry(int(e["seq"]), int(e["off"]), int(e["len"]),
                              RecordSummary.from_json(e["summary"])) for e in raw]
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("archive %s: index damaged (%s); rebuilding it from the segments", self.root, exc)
            return [], True
        return entries, torn or (not entries and bool(self._segments))

    def _add(self, entry: _Entry) -> None:
        old = self._index.get(entry.summary.job_id)
        if old is None or (old.seq, old.offset) < (entry.seq, entry.offset):
            self._index[entry.summary.job_id] = entry
        end = entry.offset + entry.length
        self._covered[entry.seq] = max(self._covered.get(entry.seq, 0), end)
        self._records[entry.seq] = self._records.get(entry.seq, 0) + 1

    def _scan_tail(self, s: int, name: seg.SegmentName) -> None:
        """Index the members of segment `s` past what the index covers (all of them if no index)."""
        path = self.segdir / name.filename
        covered, size = self._covered.get(s, 0), path.stat().st_size
        if size < covered:
            self._bad.add(s)
            self.problems.append(Problem(f"segments/{name.filename}", "shorter than the index says"))
        if size <= covered:
            return
        data = path.read_bytes()
        if seg.sha256_hex(data) != name.sha256:
            self._bad.add(s)
            self.problems.append(Problem(f"segments/{name.filename}", "SHA-256 does not match its name"))
        try:
            for m in seg.scan_members(data, covered):
                where = f"segments/{name.filename} offset {m.offset}"
                entry = _Entry(s, m.offset, m.length, ArchiveRecord.from_body(m.body, where=where).summary)
                self._add(entry)
                self._unindexed.append(entry)
        except (ValueError, ArchiveCorrupt) as exc:
            self._bad.add(s)
            self._unreadable.append(f"segments/{name.filename}")
            self.problems.append(Problem(f"segments/{name.filename}", str(exc)))

    # -- writing -----------------------------------------------------------------------------
    def append(self, record: ArchiveRecord) -> bool:
        """See ArchiveSink.append."""
        newest = self._pending_sha.get(record.job_id)
        if newest is None and record.job_id in self._index:
            newest = self._index[record.job_id].summary.sha256
        if newest == record.sha256:
            return False
        self._pending.append(record)
        self._pending_sha[record.job_id] = record.sha256
        return True

    def flush(self) -> None:
        """See ArchiveSink.flush."""
        if not (self._pending or self._unindexed or self._rewrite_index):
            return
        self._take_lock()
        s, gen, data, count = self._open_tail()
        batch: list[_Entry] = []
        for record in self._pending:
            member = seg.encode_member(record.body)
            if count and (len(data) + len(member) > self.max_bytes or count >= self.max_records):
                self._seal(s, gen, data, batch)
                s, gen, data, count, batch = s + 1, 0, bytearray(), 0, []
            batch.append(_Entry(s, len(data), len(member), record.summary))
            data += member
            count += 1
        if batch:
            self._seal(s, gen, data, batch)
        self._pending.clear()
        self._pending_sha.clear()
        self._write_index()

    def _open_tail(self) -> tuple[int, int, bytearray, int]:
        """(seq, generation, bytes, records) of the segment to extend, or of a fresh one."""
        if not self._segments:
            return 1, 0, bytearray(), 0
        s = max(self._segments)
        name = self._segments[s]
        count = self._records.get(s, 0)
        if s not in self._bad and count < self.max_records:
            data = (self.segdir / name.filename).read_bytes()
            if seg.sha256_hex(data) != name.sha256:  # never re-checksum damaged bytes as good
                self._bad.add(s)
                self.problems.append(Problem(f"segments/{name.filename}", "SHA-256 does not match its name"))
            elif len(data) < self.max_bytes:
                return s, name.gen + 1, bytearray(data), count
        return s + 1, 0, bytearray(), 0

    def _seal(self, s: int, gen: int, data: bytearray, batch: list[_Entry]) -> None:
        """Write segment `s` durably, then index its new records (in memory) and drop the old gen."""
        name = seg.write_segment(self.segdir, s, gen, bytes(data))
        old = self._segments.get(s)
        self._segments[s] = name
        for entry in batch:
            self._add(entry)
            self._unindexed.append(entry)
        if old is not None and old != name:
            (self.segdir / old.filename).unlink(missing_ok=True)
            seg.fsync_dir(self.segdir)

    def _write_index(self) -> None:
        if self._rewrite_index:  # lost, damaged or torn: replace it whole
            entries = sorted(self._index.values(), key=lambda e: (e.seq, e.offset))
            seg.replace_durably(self.index_path, (e.line() for e in entries))
        elif self._unindexed:
            seg.append_index(self.index_path, (e.line() for e in self._unindexed))
        self._rewrite_index = False
        self._unindexed.clear()

    def _take_lock(self) -> None:
        """Become the single writer (flock), and tidy what a crashed writer left behind."""
        if self._lock_fd is not None:
            return
        fd = os.open(self.root / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise Unavailable(f"archive {self.root} is being written by another process") from None
        self._lock_fd = fd
        self.problems = []
        self._load()  # a writer that ran since we opened may have moved the tail on
        self._pending = [r for r in self._pending if r.job_id not in self._index
                         or self._index[r.job_id].summary.sha256 != r.sha256]
        for old in self._superseded:
            (self.segdir / old.filename).unlink(missing_ok=True)
        for stray in self.segdir.glob(f"{seg.TMP_PREFIX}*"):
            stray.unlink(missing_ok=True)
        self._superseded.clear()

    # -- reading -----------------------------------------------------------------------------
    def get(self, job_id: str) -> ArchiveRecord:
        """See ArchiveSink.get."""
        entry = self._index.get(job_id)
        if entry is None and self._unreadable:  # it may be behind the damage: do not say "absent"
            raise ArchiveCorrupt(", ".join(self._unreadable), f"job {job_id} is not in the index and "
                                 "these segments could not be read to the end; it may be in them")
        if entry is None:
            raise NotFound(f"job {job_id} is not in the archive {self.url}", field="job_id")
        data, where = self._read_member(entry)
        try:
            body = seg.decode_member(data)
        except (zlib.error, ValueError) as exc:
            raise ArchiveCorrupt(where, f"record of job {job_id} is damaged: {exc}") from exc
        if seg.sha256_hex(body) != entry.summary.sha256:
            raise ArchiveCorrupt(where, f"record of job {job_id} fails its SHA-256")
        return ArchiveRecord.from_body(body, where=where)

    def _read_member(self, entry: _Entry) -> tuple[bytes, str]:
        for attempt in range(2):
            name = self._segments.get(entry.seq)
            if name is not None:
                try:
                    with open(self.segdir / name.filename, "rb") as fh:
                        fh.seek(entry.offset)
                        return fh.read(entry.length), f"segments/{name.filename} offset {entry.offset}"
                except FileNotFoundError:
                    pass
            if attempt == 0:  # a writer may have rolled a new generation since we opened
                self._segments.update({s: g[-1] for s, g in seg.list_segments(self.segdir).items()})
        raise ArchiveCorrupt(f"segment {entry.seq:08d}", "missing, but the index lists records in it")

    def query(self, query: RecordQuery = RecordQuery()) -> list[RecordSummary]:
        """See ArchiveSink.query."""
        return select(query, (e.summary for e in self._index.values()))

    def count(self) -> int:
        """See ArchiveSink.count."""
        return len(self._index)

    def verify(self) -> list[Problem]:
        """See ArchiveSink.verify: re-hash every segment and decode every member."""
        problems = [p for p in self.problems if p.where.startswith("segment ")]  # missing ones
        for _, name in sorted(self._segments.items()):
            problems += [Problem(f"segments/{name.filename}", detail)
                         for detail in seg.check_segment(self.segdir, name)]
        return problems

    def close(self) -> None:
        """See ArchiveSink.close (releases the writer lock)."""
        self._pending.clear()
        self._pending_sha.clear()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def open_dir_sink(url: str, *, create: bool = True) -> DirSink:
    """`dir:///abs/path` or `dir:relative/path` (the registry's entry point)."""
    parts = urlsplit(url)
    path = (parts.netloc + parts.path) if parts.netloc else parts.path
    if not path:
        raise InvalidArgument(f"archive URL {url!r} names no directory", field="archive")
    return DirSink(Path(path), create=create)
