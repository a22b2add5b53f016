"""`peloton migrate schema`: one entry point over both schema tools.

SQL databases (sqlite://, postgresql://) are migrated by alembic
(sql_runner.py), Cassandra keyspaces by the numbered CQL files
(cql_runner.py); both report a `SchemaStatus` and take a target version
("head" / "base" / a version id / "-1" for one step down).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from migrations import cql_runner, sql_runner
from peloton.core.errors import InvalidArgument
from peloton.storage.registry import redact
from peloton.storage.schema import SchemaStatus


def _is_cassandra(url: str) -> bool:
    scheme = urlsplit(url).scheme.lower()
    if scheme == "cassandra":
        return True
    if scheme.split("+")[0] in ("sqlite", "postgresql"):
        return False
    raise InvalidArgument(f"cannot migrate {redact(url)}: expected a sqlite://, "
                          "postgresql:// or cassandra:// URL", field="store")


def status(url: str) -> SchemaStatus:
    """Current and known schema versions of the database at `url`."""
    if _is_cassandra(url):
        return cql_runner.status(url)
    return sql_runner.status(url)


def upgrade(url: str, target: str = "head") -> list[str]:
    """Apply pending migrations up to `target`; returns the versions applied, in order."""
    if _is_cassandra(url):
        return cql_runner.upgrade(url, target)
    return sql_runner.upgrade(url, target)


def downgrade(url: str, target: str = "-1") -> list[str]:
    """Revert migrations down to `target`; returns the versions reverted, newest first."""
    if _is_cassandra(url):
        return cql_runner.downgrade(url, target)
    return sql_runner.downgrade(url, target)
