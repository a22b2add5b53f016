"""Schema versions: migrate up / down / status on both SQL databases, and the start-up
check that refuses an old, missing or newer schema with the command to run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from click.testing import CliRunner

from cli.main import cli
from migrations import sql_runner
from peloton.core.errors import FailedPrecondition
from peloton.storage import SchemaMismatch, StoreOptions, check_schema, open_store
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import SCHEMA_VERSIONS, metadata
from tests.harness.postgres import PostgresServer


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database of each SQL backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = f"e_{uuid.uuid4().hex[:10]}"
    yield server.create_database(name)
    server.drop_database(name)


def test_up_down_status_round_trip(empty_url: str) -> None:
    assert sql_runner.status(empty_url).current is None
    assert sql_runner.upgrade(empty_url, "0001") == ["0001"]
    assert sql_runner.status(empty_url).pending == ("0002", "0003", "0004")
    assert sql_runner.upgrade(empty_url) == ["0002", "0003", "0004"]
    assert sql_runner.upgrade(empty_url) == []
    assert sql_runner.status(empty_url).ok
    assert sql_runner.downgrade(empty_url) == ["0004"]
    assert sql_runner.downgrade(empty_url, "base") == ["0003", "0002", "0001"]
    assert sql_runner.status(empty_url).current is None
    db = Database(empty_url, StoreOptions())
    names = db.run("list tables", lambda c: sa.inspect(c).get_table_names(), write=False)
    db.close()
    assert set(names) <= {"alembic_version"}


def test_migrations_build_exactly_the_code_schema(empty_url: str) -> None:
    sql_runner.upgrade(empty_url)
    db = Database(empty_url, StoreOptions())
    diff = db.run("compare", lambda c: compare_metadata(MigrationContext.configure(c), metadata),
                  write=False)
    db.close()
    assert diff == []
    assert sql_runner.revisions() == SCHEMA_VERSIONS


def test_check_schema_refuses_missing_old_and_newer(empty_url: str) -> None:
    store = open_store(empty_url)
    with pytest.raises(SchemaMismatch, match=r"no Peloton schema.*peloton migrate schema up "
                                             r"--store"):
        check_schema(store)
    with pytest.raises(SchemaMismatch, match="peloton migrate schema up"):
        store.get_active_jobs()  # a missing table is reported the same way
    sql_runner.upgrade(empty_url, "0001")
    with pytest.raises(SchemaMismatch) as old:
        check_schema(store)
    assert isinstance(old.value, FailedPrecondition)
    assert "version 0001 but this code needs 0004" in str(old.value)
    assert f"peloton migrate schema up --store {store.url}" in str(old.value)
    sql_runner.upgrade(empty_url)
    assert check_schema(store).ok
    store.db.run("fake a newer schema", lambda c: c.execute(  # type: ignore[attr-defined]
        sa.text("UPDATE alembic_version SET version_num = '0099'")))
    with pytest.raises(SchemaMismatch, match="newer than this code"):
        check_schema(store)
    store.close()


def test_bootstrap_creates_schema_only_in_an_empty_database(empty_url: str) -> None:
    store = open_store(empty_url, StoreOptions(bootstrap=True))
    assert check_schema(store).ok
    store.close()
    sql_runner.downgrade(empty_url, "0001")
    store = open_store(empty_url, StoreOptions(bootstrap=True))
    with pytest.raises(SchemaMismatch):  # an old schema is never silently "fixed"
        check_schema(store)
    store.close()


def test_cli_schema_commands(empty_url: str) -> None:
    runner = CliRunner()
    status = runner.invoke(cli, ["migrate", "schema", "status", "--store", empty_url])
    assert status.exit_code == 1, status.output
    assert "no schema" in status.output and "0001" in status.output
    up = runner.invoke(cli, ["migrate", "schema", "up", "--store", empty_url])
    assert up.exit_code == 0, up.output
    assert "0001" in up.output and "0002" in up.output and "0003" in up.output
    assert "0004" in up.output
    status = runner.invoke(cli, ["migrate", "schema", "status", "--store", empty_url])
    assert status.exit_code == 0 and "up to date" in status.output
    down = runner.invoke(cli, ["migrate", "schema", "down", "--store", empty_url])
    assert down.exit_code == 0 and "0004" in down.output
    status = runner.invoke(cli, ["migrate", "schema", "status", "--store", empty_url])
    assert status.exit_code == 1 and "0004" in status.output
