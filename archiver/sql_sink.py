"""The SQL archive sink: the archive's own two tables in any SQLAlchemy database.

    archive_records  every stored version: (id, job_id, sha256, gzip body); (job_id, sha256) unique
    archive_jobs     one row per job: the newest version's id and its summary (what queries read)

The sink creates its tables (`sqlite:///archive.db`, `postgresql://u@h/db`);
they share nothing with hot storage's schema, so the archive may live in
the same PostgreSQL database or an entirely different one.  Bodies are
stored gzip-compressed and checked against their SHA-256 on every read,
so a damaged row raises `ArchiveCorrupt` naming its id instead of
returning wrong bytes.  `flush` writes every queued record in one
transaction: after its commit the records are durable, before it none is.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from archiver.record import ArchiveCorrupt, ArchiveRecord, RecordSummary
from archiver.sinks import Problem, RecordQuery
from peloton.core.errors import NotFound

metadata = sa.MetaData()

records = sa.Table(
    "archive_records", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(64), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.UniqueConstraint("job_id", "sha256", name="uq_archive_records_job_sha"),
)

jobs = sa.Table(
    "archive_jobs", metadata,
    sa.Column("job_id", sa.String(64), primary_key=True),
    sa.Column("record_id", sa.Integer, sa.ForeignKey("archive_records.id"), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("owning_team", sa.Text, nullable=False),
    sa.Column("job_type", sa.String(16), nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("creation_time", sa.Float, nullable=False),
    sa.Column("completion_time", sa.Float, nullable=False, index=True),
    sa.Column("instance_count", sa.Integer, nullable=False),
    sa.Column("task_stats", sa.Text, nullable=False),
)


def _summary_row(s: RecordSummary) -> dict[str, Any]:
    return {"job_id": s.job_id, "sha256": s.sha256, "name": s.name, "owner": s.owner,
            "owning_team": s.owning_team, "job_type": s.job_type, "state": s.state,
            "creation_time": s.creation_time, "completion_time": s.completion_time,
            "instance_count": s.instance_count,
            "task_stats": json.dumps(dict(s.task_stats), sort_keys=True)}


def _summary(row: Any) -> RecordSummary:
    return RecordSummary.from_json({**row._mapping, "type": row.job_type,
                                    "task_stats": json.loads(row.task_stats)})


class SqlSink:
    """An `ArchiveSink` in an SQL database; see the module docstring."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        parsed = make_url(url)
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")  # psycopg 3, as hot storage uses
        if parsed.drivername == "sqlite" and parsed.database and create:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        elif parsed.drivername == "sqlite" and parsed.database and not Path(parsed.database).exists():
            raise NotFound(f"no archive database at {parsed.database}", field="archive")
        self.engine = sa.create_engine(parsed)
        if create:
            metadata.create_all(self.engine)
        elif not sa.inspect(self.engine).has_table("archive_jobs"):
            self.engine.dispose()
            raise NotFound(f"no archive tables in {parsed.render_as_string(hide_password=True)}",
                           field="archive")
        self._pending: list[ArchiveRecord] = []
        self._pending_sha: dict[str, str] = {}

    # -- writing -----------------------------------------------------------------------------
    def append(self, record: ArchiveRecord) -> bool:
        """See ArchiveSink.append."""
        newest = self._pending_sha.get(record.job_id)
        if newest is None:
            with self.engine.connect() as conn:
                newest = conn.execute(sa.select(jobs.c.sha256).where(
                    jobs.c.job_id == record.job_id)).scalar_one_or_none()
        if newest == record.sha256:
            return False
        self._pending.append(record)
        self._pending_sha[record.job_id] = record.sha256
        return True

    def flush(self) -> None:
        """See ArchiveSink.flush: one transaction for every queued record."""
        if not self._pending:
            return
        with self.engine.begin() as conn:
            for record in self._pending:
                rid = conn.execute(sa.select(records.c.id).where(
                    records.c.job_id == record.job_id,
                    records.c.sha256 == record.sha256)).scalar_one_or_none()
                if rid is None:  # A, then B, then A again reuses A's row as the newest
                    body = gzip.compress(record.body, compresslevel=6, mtime=0)
                    inserted = conn.execute(records.insert().values(
                        job_id=record.job_id, sha256=record.sha256, body=body)).inserted_primary_key
                    assert inserted is not None
                    rid = inserted[0]
                row = {**_summary_row(record.summary), "record_id": rid}
                updated = conn.execute(jobs.update().where(jobs.c.job_id == record.job_id)
                                       .values(**row)).rowcount
                if not updated:
                    conn.execute(jobs.insert().values(**row))
        self._pending.clear()
        self._pending_sha.clear()

    # -- reading -----------------------------------------------------------------------------
    def get(self, job_id: str) -> ArchiveRecord:
        """See ArchiveSink.get."""
        query = (sa.select(records.c.id, records.c.body, jobs.c.sha256)
                 .join(jobs, jobs.c.record_id == records.c.id).where(jobs.c.job_id == job_id))
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise NotFound(f"job {job_id} is not in the archive {self._safe_url()}", field="job_id")
        where = f"{self._safe_url()} archive_records id={row.id}"
        return ArchiveRecord.from_body(_checked_body(row.body, row.sha256, where, job_id), where=where)

    def query(self, query: RecordQuery = RecordQuery()) -> list[RecordSummary]:
        """See ArchiveSink.query (the WHERE clause mirrors sinks.matches)."""
        stmt = sa.select(jobs)
        if query.name is not None:
            stmt = stmt.where(sa.func.lower(jobs.c.name).contains(query.name.lower(), autoescape=True))
        if query.owner is not None:
            stmt = stmt.where(sa.or_(jobs.c.owner == query.owner, jobs.c.owning_team == query.owner))
        if query.states:
            stmt = stmt.where(jobs.c.state.in_(sorted(query.states)))
        if query.since is not None:
            stmt = stmt.where(jobs.c.completion_time >= query.since)
        if query.until is not None:
            stmt = stmt.where(jobs.c.completion_time < query.until)
        stmt = stmt.order_by(jobs.c.completion_time.desc(), jobs.c.job_id.asc())
        if query.limit is not None:
            stmt = stmt.limit(query.limit)
        with self.engine.connect() as conn:
            return [_summary(row) for row in conn.execute(stmt)]

    def count(self) -> int:
        """See ArchiveSink.count."""
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(jobs)).scalar_one())

    def verify(self) -> list[Problem]:
        """See ArchiveSink.verify: decompress and re-hash every stored version."""
        problems = []
        with self.engine.connect() as conn:
            for row in conn.execute(sa.select(records).order_by(records.c.id)):
                where = f"{self._safe_url()} archive_records id={row.id}"
                try:
                    _checked_body(row.body, row.sha256, where, row.job_id)
                except ArchiveCorrupt as exc:
                    problems.append(Problem(where, exc.detail))
        return problems

    def close(self) -> None:
        """See ArchiveSink.close."""
        self._pending.clear()
        self._pending_sha.clear()
        self.engine.dispose()

    def _safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)


def _checked_body(stored: bytes, sha: str, where: str, job_id: str) -> bytes:
    try:
        body = gzip.decompress(stored)
    except (OSError, EOFError, zlib.error) as exc:
        raise ArchiveCorrupt(where, f"record of job {job_id} is damaged: {exc}") from exc
    if hashlib.sha256(body).hexdigest() != sha:
        raise ArchiveCorrupt(where, f"record of job {job_id} fails its SHA-256")
    return body


def open_sql_sink(url: str, *, create: bool = True) -> SqlSink:
    """The registry's entry point for sqlite:// and postgresql:// URLs."""
    return SqlSink(url, create=create)
