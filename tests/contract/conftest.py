"""The `store` fixture: every contract test runs once per backend.

- sqlite: a file in tmp_path, copied from a template migrated once per session.
- postgresql: a database per test module, created from a migrated template
  on the session's real server; every test starts from empty tables.
- cassandra: the session's real Cassandra node (tests/harness/cassandra.py,
  or PELOTON_TEST_CASSANDRA=host:port); one keyspace for the run, migrated
  with the CQL files once, and before each test the tables that hold rows
  are truncated (TRUNCATE is slow enough that emptying all 25 tables for
  every test would double the suite's time).  This is the verdict on the
  Cassandra backend.
- cql-fake: the Cassandra backend's code over an in-memory interpreter of
  its declared statements (tests/contract/cql_fake.py): a fast unit fake
  that also checks each statement is one CQL accepts; not evidence about a
  real Cassandra.

Stores get a fake clock (pod-event expiry) and a Retrier whose sleeps are
recorded, not slept, so fault tests can assert on the backoff.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from migrations import sql_runner
from peloton.common.clock import FakeClock
from peloton.common.retry import Retrier, RetryPolicy
from peloton.storage import Store, StoreOptions, open_store
from peloton.storage.cassandra.schema import CQL_SCHEMA_VERSIONS
from peloton.storage.cassandra.statements import SCANNED
from peloton.storage.cassandra.store import DERIVED_TABLES, CassandraStore
from peloton.storage.sql.tables import metadata
from tests.contract.cql_fake import FakeCqlSession
from tests.harness import cql_schema
from tests.harness.postgres import PostgresServer

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
    pytest.param("cassandra", id="cassandra", marks=pytest.mark.cassandra),
    pytest.param("cql-fake", id="cql-fake"),
]
SQL_BACKENDS = BACKENDS[:2]


class Clocks:
    """The fake clocks a test store runs on: `wall` for expiry, `retry` for backoff."""

    def __init__(self) -> None:
        self.wall = FakeClock(wall=1_000_000.0)
        self.retry = FakeClock()

    def options(self, attempts: int = 3) -> StoreOptions:
        """Store options wired to these clocks."""
        retrier = Retrier(RetryPolicy(attempts=attempts, initial_delay=0.01),
                          sleep=self.retry.sleep, clock=self.retry)
        return StoreOptions(retrier=retrier, clock=self.wall.wall)


@pytest.fixture
def clocks() -> Clocks:
    """Fresh fake clocks for one test."""
    return Clocks()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with the newest schema, made once by running the migrations."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    sql_runner.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def pg_template(postgres_server: PostgresServer) -> str:
    """Name of a PostgreSQL database with the newest schema, made by the migrations."""
    postgres_server.create_database("peloton_template")
    sql_runner.upgrade(postgres_server.url("peloton_template"))
    return "peloton_template"


@pytest.fixture(scope="module")
def pg_module_url(postgres_server: PostgresServer, pg_template: str) -> Iterator[str]:
    """A fresh migrated PostgreSQL database for one test module."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(name, template=pg_template)
    yield url
    postgres_server.drop_database(name)


@pytest.fixture(scope="session")
def cassandra_url(cassandra: str) -> Iterator[str]:
    """A keyspace with the newest schema on the session's Cassandra, for the whole run."""
    from migrations import cql_runner

    url = f"cassandra://{cassandra}/peloton_test_{uuid.uuid4().hex[:10]}"
    cql_runner.upgrade(url)
    yield url
    cql_runner.drop_keyspace(url)


def empty_cassandra(store: Store) -> None:
    """Truncate the tables of the store's keyspace that hold rows (the others stay as they are)."""
    session = store.s  # type: ignore[attr-defined]
    for table in cassandra_tables():
        if session.execute_text(f"SELECT * FROM {table} LIMIT 1"):
            session.truncate(table)


def cassandra_tables() -> list[str]:
    """Every table the Cassandra backend writes (not the migrations' own)."""
    return sorted({spec[0] for spec in SCANNED.values()} | set(DERIVED_TABLES))


def open_cassandra(request: pytest.FixtureRequest, options: StoreOptions | None = None) -> Store:
    """A store on the session's keyspace, emptied of the previous test's rows."""
    store = open_store(request.getfixturevalue("cassandra_url"), options or StoreOptions())
    empty_cassandra(store)
    return store


def fake_cassandra_store(options: StoreOptions | None = None) -> Store:
    """A CassandraStore over the in-memory CQL interpreter (see cql_fake.py)."""
    url = f"cassandra://fake:9042/fake_{uuid.uuid4().hex[:8]}"
    session = FakeCqlSession(cql_schema.schema())
    for version in CQL_SCHEMA_VERSIONS:  # as if `peloton migrate schema up` had run
        session.data["schema_migrations"][(int(version),)] = {(): {"version": int(version)}}
    return CassandraStore(url, session, options or StoreOptions())


def empty_sql(store: Store) -> None:
    """Delete every row of every table (PostgreSQL modules share a database)."""
    db = store.db  # type: ignore[attr-defined]

    def wipe(conn: object) -> None:
        for table in reversed(metadata.sorted_tables):
            conn.execute(table.delete())  # type: ignore[attr-defined]
    db.run("wipe", wipe)


def open_backend(backend: str, request: pytest.FixtureRequest, tmp_path: Path,
                 options: StoreOptions) -> Store:
    """Open an empty store of `backend` with the newest schema."""
    if backend == "sqlite":
        path = tmp_path / f"store-{uuid.uuid4().hex[:6]}.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return open_store(f"sqlite:///{path}", options)
    if backend == "postgresql":
        store = open_store(request.getfixturevalue("pg_module_url"), options)
        empty_sql(store)
        return store
    if backend == "cql-fake":
        return fake_cassandra_store(options)
    return open_cassandra(request, options)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, clocks: Clocks) -> Iterator[Store]:
    """An empty store of each backend in turn."""
    s = open_backend(request.param, request, tmp_path, clocks.options())
    yield s
    s.close()


@pytest.fixture(params=SQL_BACKENDS)
def sql_store(request: pytest.FixtureRequest, tmp_path: Path, clocks: Clocks) -> Iterator[Store]:
    """An empty store of each SQL backend (for tests that reach into SQL directly)."""
    s = open_backend(request.param, request, tmp_path, clocks.options())
    yield s
    s.close()
