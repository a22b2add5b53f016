"""The directory sink's own promises: crash leftovers, a lost or damaged index, rolling segments.

(What every sink promises is in tests/contract/test_archive_sinks.py.)
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from archiver.dir_sink import MAX_SEGMENT_BYTES, MAX_SEGMENT_RECORDS, DirSink
from archiver.record import ArchiveCorrupt
from archiver.segments import SegmentName
from peloton.core.errors import Unavailable
from tests.fakes.archive_records import make_record

pytestmark = pytest.mark.timeout(30)


def filled(root: Path, n: int, *, max_segment_bytes: int = MAX_SEGMENT_BYTES,
           max_segment_records: int = MAX_SEGMENT_RECORDS) -> tuple[DirSink, list[str]]:
    sink = DirSink(root, max_segment_bytes=max_segment_bytes, max_segment_records=max_segment_records)
    records = [make_record(name=f"job{i}", completed=1000.0 + i) for i in range(n)]
    for r in records:
        sink.append(r)
    sink.flush()
    return sink, [r.job_id for r in records]


def segments(root: Path) -> list[Path]:
    return sorted((root / "segments").glob("seg-*.jsonl.gz"))


def test_segments_roll_by_count_and_are_plain_checksummed_gzip_json_lines(tmp_path: Path) -> None:
    sink, ids = filled(tmp_path, 7, max_segment_records=3)
    sink.append(make_record())  # a second flush extends the open segment as a new generation
    sink.flush()
    files = segments(tmp_path)
    assert [SegmentName.parse(f.name).seq for f in files] == [1, 2, 3]  # type: ignore[union-attr]
    assert SegmentName.parse(files[-1].name).gen == 1  # type: ignore[union-attr]
    lines = []
    for f in files:
        assert hashlib.sha256(f.read_bytes()).hexdigest() in f.name
        lines += gzip.decompress(f.read_bytes()).decode().splitlines()  # `zcat | jq` works
    assert [json.loads(line)["job_id"] for line in lines][:7] == ids and len(lines) == 8


def test_segments_roll_by_size(tmp_path: Path) -> None:
    filled(tmp_path, 6, max_segment_bytes=1)  # every record alone in its segment
    assert len(segments(tmp_path)) == 6


@pytest.mark.parametrize("damage", ["delete", "garbage", "torn", "behind"])
def test_a_lost_or_damaged_index_is_rebuilt_from_the_segments(tmp_path: Path, damage: str) -> None:
    sink, ids = filled(tmp_path, 5, max_segment_records=2)
    sink.close()
    index = tmp_path / "index.jsonl"
    lines = index.read_bytes().splitlines(keepends=True)
    if damage == "delete":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(b"".join(lines[:2]) + b"0000 nonsense\n" + b"".join(lines[2:]))
    elif damage == "torn":
        index.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    else:  # killed after the segment rename, before the index append
        index.write_bytes(b"".join(lines[:2]))
    again = DirSink(tmp_path)
    assert again.count() == 5 and again.problems == []
    assert [again.get(i).summary.name for i in ids] == [f"job{i}" for i in range(5)]
    extra = make_record()
    assert again.append(again.get(ids[4])) is False  # the rebuilt index still dedups
    again.append(extra)
    again.flush()
    again.close()
    third = DirSink(tmp_path)  # the repaired index covers everything
    assert third.count() == 6 and third.get(extra.job_id).body == extra.body


def test_leftovers_of_a_crashed_writer_are_ignored_then_tidied(tmp_path: Path) -> None:
    sink, ids = filled(tmp_path, 2)
    sink.close()
    segdir = tmp_path / "segments"
    current = segments(tmp_path)[0]
    name = SegmentName.parse(current.name)
    assert name is not None
    (segdir / f".tmp-seg-00000002-g0000-{'0' * 64}.jsonl.gz").write_bytes(b"\x1f\x8b torn")
    older = segdir / SegmentName(name.seq, name.gen, "f" * 64).filename  # superseded generation
    older.write_bytes(b"old")
    newer = SegmentName(name.seq, name.gen + 1, hashlib.sha256(current.read_bytes()).hexdigest())
    current.rename(segdir / newer.filename)  # crash after rename of gen+1, before unlink of gen
    reader = DirSink(tmp_path)
    assert reader.count() == 2 and reader.get(ids[1]).summary.name == "job1"
    assert reader.problems == []
    writer = DirSink(tmp_path)
    writer.append(make_record())
    writer.flush()
    assert [p.name for p in segdir.iterdir() if not p.name.startswith("seg-0000000")] == []
    assert len(list(segdir.iterdir())) == 1 and writer.count() == 3


def test_a_reader_follows_the_writer_to_a_new_generation(tmp_path: Path) -> None:
    writer, ids = filled(tmp_path, 1)
    reader = DirSink(tmp_path)
    writer.append(make_record())
    writer.flush()  # rewrites segment 1 as generation 1 and removes generation 0
    assert reader.get(ids[0]).summary.name == "job0"


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    first, _ = filled(tmp_path, 1)
    second = DirSink(tmp_path)
    second.append(make_record())
    with pytest.raises(Unavailable, match="another process"):
        second.flush()
    first.close()
    second.flush()
    assert second.count() == 2


def test_a_damaged_segment_is_named_and_its_neighbours_stay_readable(tmp_path: Path) -> None:
    sink, ids = filled(tmp_path, 4, max_segment_records=2)
    sink.close()
    first = segments(tmp_path)[0]
    data = bytearray(first.read_bytes())
    data[-10] ^= 0xFF  # the last member's CRC trailer
    first.write_bytes(bytes(data))
    (tmp_path / "index.jsonl").unlink()  # the rebuild must read the damaged segment too
    again = DirSink(tmp_path)
    assert [p.where for p in again.problems] == [f"segments/{first.name}"] * 2
    assert again.get(ids[0]).summary.name == "job0"  # the member before the damage
    with pytest.raises(ArchiveCorrupt, match=first.name):
        again.get(ids[1])  # behind the damage: reported as damage, not as "not archived"
    assert [again.get(i).summary.name for i in ids[2:]] == ["job2", "job3"]
    assert {p.where for p in again.verify()} == {f"segments/{first.name}"}


def test_a_missing_segment_is_an_error_not_an_absence(tmp_path: Path) -> None:
    sink, ids = filled(tmp_path, 2, max_segment_records=1)
    sink.close()
    segments(tmp_path)[0].unlink()
    again = DirSink(tmp_path)
    with pytest.raises(ArchiveCorrupt, match="segment 00000001"):
        again.get(ids[0])
    assert again.get(ids[1]).summary.name == "job1"
    assert [p.where for p in again.verify()] == ["segment 00000001"]
