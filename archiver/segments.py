"""On-disk formats of the directory sink: segment files and index lines.

A segment is a gzip file of JSON lines in which every line (one record) is
its own gzip member, so `zcat seg-*.jsonl.gz | jq` reads the archive with
no Peloton code, and one record can be read by seeking to its member's
offset.  Its name carries its checksum:

    segments/seg-<seq:08>-g<generation:04>-<sha256 of the file>.jsonl.gz

A segment is written to a temporary file, fsync'd, then renamed into
place and the directory fsync'd, so a name either does not exist or
names complete bytes whose SHA-256 is in the name; a torn write leaves
only a `.tmp-*` file, which is ignored.  The open (newest) segment grows
by writing a new generation (old bytes + new members) and removing the
old one; readers of an old generation find the new one by its sequence
number.  Each member also carries gzip's CRC-32, so a damaged byte is
caught per record even without re-hashing the whole segment.

Index lines (`index.jsonl`) are `<crc32 hex> <json>` of (seq, offset,
length, record summary); a line with a bad CRC marks the index damaged
and it is rebuilt from the segments.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NAME = re.compile(r"^seg-(\d{8})-g(\d{4})-([0-9a-f]{64})\.jsonl\.gz$")
TMP_PREFIX = ".tmp-"


@dataclass(frozen=True, slots=True, order=True)
class SegmentName:
    """A segment file's identity: sequence number, generation and checksum."""

    seq: int
    gen: int
    sha256: str

    @property
    def filename(self) -> str:
        """The file name in the segments directory."""
        return f"seg-{self.seq:08d}-g{self.gen:04d}-{self.sha256}.jsonl.gz"

    @classmethod
    def parse(cls, filename: str) -> SegmentName | None:
        """The name's parts, or None if `filename` is not a segment."""
        m = _NAME.match(filename)
        return cls(int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


@dataclass(frozen=True, slots=True)
class Member:
    """One record's gzip member inside a segment."""

    offset: int
    length: int
    body: bytes


def encode_member(body: bytes) -> bytes:
    """A record body as one gzip member holding one JSON line (mtime 0: same body, same bytes)."""
    return gzip.compress(body + b"\n", compresslevel=6, mtime=0)


def decode_member(data: bytes) -> bytes:
    """The record body of one member (zlib.error or ValueError if damaged or torn)."""
    d = zlib.decompressobj(wbits=31)  # 31 = gzip wrapper; checks the member's CRC-32
    out = d.decompress(data)
    if not d.eof or d.unused_data:
        raise ValueError("member is torn or has trailing bytes")
    if not out.endswith(b"\n") or out.count(b"\n") != 1:
        raise ValueError("member is not exactly one JSON line")
    return out[:-1]


def scan_members(data: bytes, start: int = 0) -> Iterator[Member]:
    """Members of a segment's bytes from `start`; ValueError naming the offset at the first bad one."""
    pos = start
    while pos < len(data):
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(data[pos:])
        except zlib.error as exc:
            raise ValueError(f"damaged member at offset {pos}: {exc}") from exc
        if not d.eof:
            raise ValueError(f"damaged or torn member at offset {pos}")
        length = len(data) - pos - len(d.unused_data)
        if not out.endswith(b"\n") or out.count(b"\n") != 1:
            raise ValueError(f"member at offset {pos} is not exactly one JSON line")
        yield Member(pos, length, out[:-1])
        pos += length


def check_segment(directory: Path, name: SegmentName) -> list[str]:
    """What is wrong with one segment file: checksum, then every member (empty: intact)."""
    try:
        data = (directory / name.filename).read_bytes()
    except FileNotFoundError:
        return ["missing"]
    found = [] if sha256_hex(data) == name.sha256 else ["SHA-256 does not match its name"]
    try:
        for _member in scan_members(data):
            pass
    except ValueError as exc:
        found.append(str(exc))
    return found


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def list_segments(directory: Path) -> dict[int, list[SegmentName]]:
    """Every segment in `directory` by sequence number, generations in ascending order."""
    found: dict[int, list[SegmentName]] = {}
    for entry in os.listdir(directory):
        name = SegmentName.parse(entry)
        if name is not None:
            found.setdefault(name.seq, []).append(name)
    for gens in found.values():
        gens.sort()
    return found


def write_segment(directory: Path, seq: int, gen: int, data: bytes) -> SegmentName:
    """Write a complete segment durably; return its name."""
    name = SegmentName(seq, gen, sha256_hex(data))
    replace_durably(directory / name.filename, [data])
    return name


def replace_durably(path: Path, chunks: Iterable[bytes]) -> None:
    """Create or replace `path` atomically: temp file, fsync, rename, fsync the directory."""
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    with open(tmp, "wb") as fh:
        fh.writelines(chunks)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def index_line(entry: dict[str, Any]) -> bytes:
    """One index line: CRC-32 of the JSON, a space, the JSON, a newline."""
    payload = json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def parse_index_line(line: bytes) -> dict[str, Any]:
    """The entry of one index line (ValueError if its CRC or JSON is wrong)."""
    crc, _, payload = line.rstrip(b"\n").partition(b" ")
    if len(crc) != 8 or int(crc, 16) != zlib.crc32(payload):
        raise ValueError("index line fails its CRC")
    entry: dict[str, Any] = json.loads(payload)
    return entry


def read_index(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Entries of an index file, and whether its last append was torn (then it must be rewritten).

    A missing file reads as empty; a bad line anywhere raises ValueError.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], False
    lines = raw.split(b"\n")
    torn = lines.pop() != b""  # bytes after the last newline: an append cut short
    return [parse_index_line(line) for line in lines], torn


def append_index(path: Path, lines: Iterable[bytes]) -> None:
    """Append index lines and fsync them."""
    with open(path, "ab") as fh:
        fh.writelines(lines)
        fh.flush()
        os.fsync(fh.fileno())
