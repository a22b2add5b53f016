"""Versioned, reversible SQL schema migrations: alembic, run programmatically.

Why alembic rather than a runner of our own: it already does what a
schema tool must get right - one ordered revision graph, up *and* down
steps, the version stamped in the database inside the same transaction
as the DDL (PostgreSQL and SQLite both have transactional DDL, so a
failed migration leaves the old schema intact), and batch mode for
SQLite's missing ALTER COLUMN.  What we add is only the wiring: the
script directory is migrations/sql/ inside this package (found by path,
so no alembic.ini is needed anywhere), and the connection is the one the
store itself would use (same SQLite pragmas, psycopg 3), handed to
env.py through `config.attributes`.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from peloton.storage.schema import SchemaStatus
from peloton.storage.sql.database import Database
from peloton.storage.sql.tables import SCHEMA_VERSIONS
from peloton.storage.store import StoreOptions

SCRIPT_DIR = Path(__file__).resolve().parent / "sql"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_DIR))
    return cfg


def revisions() -> tuple[str, ...]:
    """Every revision in migrations/sql/versions, oldest first."""
    script = ScriptDirectory.from_config(_config())
    return tuple(reversed([s.revision for s in script.walk_revisions()]))


def status(url: str, options: StoreOptions | None = None) -> SchemaStatus:
    """The revision stamped in the database at `url` against the code's revisions."""
    db = Database(url, options or StoreOptions())
    try:
        return db.schema_status()
    finally:
        db.close()


def _run(url: str, options: StoreOptions | None, upgrade: bool, target: str) -> list[str]:
    db = Database(url, options or StoreOptions())
    try:
        before = db.schema_status()
        cfg = _config()

        def migrate(conn: object) -> None:
            cfg.attributes["connection"] = conn
            if upgrade:
                command.upgrade(cfg, target)
            else:
                command.downgrade(cfg, target)

        db.run("migrate schema", migrate)
        after = db.schema_status()
    finally:
        db.close()
    return _steps(before.current, after.current)


def _steps(before: str | None, after: str | None) -> list[str]:
    """The revisions passed between two versions, in the order they were applied."""
    order = list(SCHEMA_VERSIONS)
    i = -1 if before is None else order.index(before)
    j = -1 if after is None else order.index(after)
    return order[i + 1:j + 1] if j >= i else list(reversed(order[j + 1:i + 1]))


def upgrade(url: str, target: str = "head", options: StoreOptions | None = None) -> list[str]:
    """Apply migrations up to `target` (default: the newest); returns the revisions applied."""
    return _run(url, options, True, target)


def downgrade(url: str, target: str = "-1", options: StoreOptions | None = None) -> list[str]:
    """Revert migrations down to `target` (a revision, "-1" for one step, "base" for all);
    returns the revisions reverted, newest first."""
    return _run(url, options, False, target)
