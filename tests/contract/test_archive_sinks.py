"""One contract for every ArchiveSink: the directory sink, SQLite and PostgreSQL.

Each test gets a `Backend`: a URL to (re)open the same empty archive and a
way to damage one stored record the way a bad disk would.  What a user of
the archive sees must be the same on every backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from archiver.record import ArchiveCorrupt
from archiver.sinks import ArchiveSink, RecordQuery, open_sink
from peloton.core.errors import InvalidArgument, NotFound
from tests.fakes.archive_records import make_record
from tests.harness.postgres import PostgresServer

pytestmark = pytest.mark.timeout(60)


@dataclass
class Backend:
    """An empty archive of one kind: its URL, and how to flip a byte of one stored record."""

    url: str
    damage: Callable[[str], None]
    #: Text the corruption error must contain to point an operator at the damaged unit.
    names: str

    def open(self) -> ArchiveSink:
        return open_sink(self.url)


def _flip_segment_byte(root: Path) -> Callable[[str], None]:
    def damage(job_id: str) -> None:
        index = (root / "index.jsonl").read_text()
        assert job_id in index
        for seg in sorted((root / "segments").glob("seg-*.jsonl.gz")):
            data = bytearray(seg.read_bytes())
            data[len(data) // 2] ^= 0x40  # inside a member's deflate data
            seg.write_bytes(bytes(data))
    return damage


def _flip_sql_byte(url: str) -> Callable[[str], None]:
    def damage(job_id: str) -> None:
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        table = sa.table("archive_records", sa.column("id"), sa.column("job_id"),
                         sa.column("body", sa.LargeBinary))
        with engine.begin() as conn:
            rid, body = conn.execute(sa.select(table.c.id, table.c.body)
                                     .where(table.c.job_id == job_id)).one()
            data = bytearray(body)
            data[len(data) // 2] ^= 0x40
            conn.execute(table.update().where(table.c.id == rid).values(body=bytes(data)))
        engine.dispose()
    return damage


@pytest.fixture(params=["dir", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """An empty archive of each kind in turn."""
    if request.param == "dir":
        root = tmp_path / "archive"
        yield Backend(f"dir://{root}", _flip_segment_byte(root), "segments/seg-")
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'archive.db'}"
        yield Backend(url, _flip_sql_byte(url), "archive_records id=")
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        name = f"archive_{uuid.uuid4().hex[:10]}"
        url = server.create_database(name)
        yield Backend(url, _flip_sql_byte(url), "archive_records id=")
        server.drop_database(name)


def test_flushed_records_read_back_byte_identical(backend: Backend) -> None:
    sink = backend.open()
    small, big = make_record(name="small"), make_record(name="big", tasks=50, padding=200_000)
    assert sink.append(small) and sink.append(big)
    with pytest.raises(NotFound):  # reads see flushed records only
        sink.get(small.job_id)
    sink.flush()
    for record in (small, big):
        back = sink.get(record.job_id)
        assert back.body == record.body and back.summary == record.summary
    assert sink.count() == 2
    sink.close()


def test_reappending_the_same_record_is_a_no_op(backend: Backend) -> None:
    sink = backend.open()
    record = make_record()
    assert sink.append(record) is True
    assert sink.append(record) is False  # queued already
    sink.flush()
    assert sink.append(record) is False  # stored already
    sink.flush()
    sink.close()
    sink = backend.open()  # and after a restart (the crash-between-append-and-delete case)
    assert sink.append(record) is False
    sink.flush()
    assert sink.count() == 1 and sink.get(record.job_id).body == record.body
    assert sink.verify() == []
    sink.close()


def test_a_changed_record_becomes_the_newest_version(backend: Backend) -> None:
    sink = backend.open()
    job_id = str(uuid.uuid4())
    first, second = make_record(job_id, note="first"), make_record(job_id, note="second", state="FAILED")
    sink.append(first)
    sink.flush()
    assert sink.append(second) is True
    sink.flush()
    assert sink.get(job_id).body == second.body
    assert sink.append(first) is True  # A, B, A: A is the newest again
    sink.flush()
    assert sink.get(job_id).body == first.body
    assert sink.count() == 1
    assert [s.state for s in sink.query()] == ["SUCCEEDED"]
    sink.close()


def test_query_filters_and_order(backend: Backend) -> None:
    sink = backend.open()
    recs = [make_record(name="Nightly-ETL", owner="alice", state="SUCCEEDED", completed=100.0),
            make_record(name="etl-backfill", owner="bob", owning_team="data", state="FAILED",
                        completed=200.0),
            make_record(name="report", owner="carol", state="KILLED", completed=300.0),
            make_record(name="100%_done", owner="dave", state="SUCCEEDED", completed=300.0)]
    for r in recs:
        sink.append(r)
    sink.flush()

    def names(**kw: object) -> list[str]:
        return [s.name for s in sink.query(RecordQuery(**kw))]  # type: ignore[arg-type]

    tie = sorted(recs[2:], key=lambda r: r.job_id)
    assert names() == [r.summary.name for r in tie] + ["etl-backfill", "Nightly-ETL"]
    assert names(name="etl") == ["etl-backfill", "Nightly-ETL"]  # case-insensitive substring
    assert names(name="%_") == ["100%_done"]  # LIKE wildcards are literal
    assert names(owner="bob") == names(owner="data") == ["etl-backfill"]
    assert names(states=frozenset({"FAILED", "KILLED"})) == ["report", "etl-backfill"]
    assert names(since=200.0) == [r.summary.name for r in tie] + ["etl-backfill"]
    assert names(since=100.0, until=300.0) == ["etl-backfill", "Nightly-ETL"]
    assert len(names(limit=1)) == 1
    assert names(owner="nobody") == []
    summary = sink.query(RecordQuery(owner="alice"))[0]
    assert summary == recs[0].summary
    sink.close()


def test_records_survive_reopen_and_unflushed_ones_do_not(backend: Backend) -> None:
    sink = backend.open()
    kept, dropped = make_record(), make_record()
    sink.append(kept)
    sink.flush()
    sink.append(dropped)
    sink.close()  # without flush: dropped is not durable, and says so by being absent
    again = backend.open()
    assert again.get(kept.job_id).body == kept.body
    with pytest.raises(NotFound):
        again.get(dropped.job_id)
    assert again.count() == 1
    again.close()


def test_a_flipped_byte_is_reported_naming_where_it_is(backend: Backend) -> None:
    sink = backend.open()
    victim = make_record(tasks=20, padding=5000)
    sink.append(victim)
    sink.flush()
    sink.close()
    backend.damage(victim.job_id)
    sink = backend.open()
    with pytest.raises(ArchiveCorrupt) as err:
        sink.get(victim.job_id)
    assert backend.names in str(err.value) and victim.job_id in str(err.value)
    problems = sink.verify()
    assert problems and backend.names in problems[0].where
    # The archive stays usable: new records go in and read back.
    other = make_record()
    sink.append(other)
    sink.flush()
    assert sink.get(other.job_id).body == other.body
    sink.close()


def test_opening_for_read_does_not_create_an_archive(backend: Backend) -> None:
    with pytest.raises(NotFound):  # no directory / file / tables yet
        open_sink(backend.url, create=False)
    backend.open().close()
    open_sink(backend.url, create=False).close()


def test_unknown_archive_url_is_refused() -> None:
    with pytest.raises(InvalidArgument) as err:
        open_sink("s3://bucket/archive")
    assert err.value.field == "archive"
