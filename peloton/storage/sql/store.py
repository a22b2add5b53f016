"""The SQL store: SQLite (embedded default) or PostgreSQL behind one class.

`SqlStore` is the per-table-group modules composed; the only backend
differences (engine set-up, the batched runtime CAS, upsert syntax) live
in database.py and tasks.py.
"""

from __future__ import annotations

from peloton.storage.schema import SchemaStatus
from peloton.storage.sql.bulk import SqlBulk
from peloton.storage.sql.cluster import SqlCluster
from peloton.storage.sql.cron import SqlCron
from peloton.storage.sql.database import Database
from peloton.storage.sql.history import SqlHistory
from peloton.storage.sql.job_query import SqlJobQuery
from peloton.storage.sql.jobs import SqlJobs
from peloton.storage.sql.leaders import SqlLeaders
from peloton.storage.sql.tasks import SqlTasks
from peloton.storage.store import Store, StoreOptions


class SqlStore(SqlJobs, SqlJobQuery, SqlTasks, SqlHistory, SqlCluster, SqlCron, SqlBulk,
               SqlLeaders):
    """A Store over SQLAlchemy Core; see peloton/storage/store.py for the contract."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.url = db.url
        self.backend = db.dialect

    def schema_status(self) -> SchemaStatus:
        """The alembic revision of the database against the revisions this code knows."""
        return self.db.schema_status()

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.db.close()

    def __repr__(self) -> str:
        return f"SqlStore({self.url!r})"


def open_sql_store(url: str, options: StoreOptions) -> Store:
    """Backend factory for sqlite:// and postgresql:// URLs (see registry.py).

    An in-memory SQLite database (`sqlite://`) always gets the current
    schema, since no migration tool could reach it; other databases get it
    only with `options.bootstrap` and only while empty.
    """
    db = Database(url, options)
    if db.memory or options.bootstrap:
        db.bootstrap()
    store: Store = SqlStore(db)
    return store
