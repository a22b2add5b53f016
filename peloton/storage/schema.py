"""Schema versions: what the code needs, what the database has, and the start-up check.

Each backend family has its own ordered list of schema versions (alembic
revision ids for SQL, migration numbers for CQL); the newest one is what
this code was written against.  Daemons call `check_schema(store)` before
they serve anything: a database behind the code (an upgrade that forgot
`peloton migrate schema up`) or ahead of it (a rollback of the code) is
refused with a message that says which command fixes it, instead of
failing later on a missing column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from peloton.core.errors import FailedPrecondition


class SchemaMismatch(FailedPrecondition):
    """The database schema is not the version this code needs."""

    kind = "schema_mismatch"


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """The schema version found in a database against the versions this code knows.

    `current` is None for a database with no schema at all; `known` lists
    every version this code knows, oldest first, so `known[-1]` is required.
    """

    current: str | None
    known: tuple[str, ...]

    @property
    def required(self) -> str:
        """The version this code needs."""
        return self.known[-1]

    @property
    def ok(self) -> bool:
        """The database is exactly at the required version."""
        return self.current == self.required

    @property
    def pending(self) -> tuple[str, ...]:
        """Known versions not yet applied (all of them for an empty database)."""
        if self.current is None:
            return self.known
        if self.current not in self.known:
            return ()
        return self.known[self.known.index(self.current) + 1:]

    @property
    def ahead(self) -> bool:
        """The database has a version this code does not know (newer code wrote it)."""
        return self.current is not None and self.current not in self.known


class SchemaStore(Protocol):
    """Reports the schema version of the database behind a store."""

    url: str

    def schema_status(self) -> SchemaStatus:
        """Current and known schema versions.  Raises Unavailable if unreachable."""
        ...


def check_schema(store: SchemaStore) -> SchemaStatus:
    """Raise SchemaMismatch unless the store's schema is the version this code needs.

    Call it once before a daemon starts serving.  The message names the
    command that fixes the mismatch.
    """
    status = store.schema_status()
    if status.ok:
        return status
    command = f"peloton migrate schema up --store {store.url}"
    if status.current is None:
        raise SchemaMismatch(f"the database at {store.url} has no Peloton schema; "
                             f"create it with `{command}`")
    if status.ahead:
        raise SchemaMismatch(
            f"the database at {store.url} has schema version {status.current}, newer than "
            f"this code knows (it needs {status.required}); run the newer Peloton release, "
            f"or downgrade the schema with the newer release's `peloton migrate schema down`")
    raise SchemaMismatch(
        f"the database at {store.url} has schema version {status.current} but this code "
        f"needs {status.required} ({len(status.pending)} migration(s) pending); "
        f"run `{command}`")
