"""Schema versions of the Cassandra backend (the numbered files in migrations/cql/).

The migration runner records each applied file in `schema_migrations`
(one row per version, as gemnasium/migrate did for Peloton); the store
reads the highest version from it.  `CQL_SCHEMA_VERSIONS[-1]` is the
version this code needs; a unit test checks it matches the newest file.
"""

from __future__ import annotations

from peloton.storage.cassandra.cql import select

#: Every CQL migration number this code knows, oldest first, as 4-digit strings.
CQL_SCHEMA_VERSIONS: tuple[str, ...] = ("0001", "0002", "0003", "0004")

#: The table the migration runner keeps applied versions in.
MIGRATIONS_TABLE = "schema_migrations"

#: Created by the runner before the first migration (not by a numbered file).
MIGRATIONS_TABLE_CQL = (f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
                        "(version int PRIMARY KEY, name text, applied_at timestamp)")

#: How the store reads the applied versions.
READ_VERSIONS = select("schema.versions", MIGRATIONS_TABLE, ("version",))
