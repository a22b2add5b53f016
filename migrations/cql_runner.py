"""Numbered CQL migrations for the Cassandra backend.

migrations/cql/ holds `NNNN_name.up.cql` and `NNNN_name.down.cql` pairs,
applied in number order, like the gemnasium/migrate files Peloton used.
Applied versions are rows of `schema_migrations` in the keyspace (the
keyspace itself is created on the first `up`, SimpleStrategy with the
URL's `replication_factor`, or NetworkTopologyStrategy when the URL names
a `datacenter`).  Cassandra has no transactional DDL, so each file is
written to be re-runnable (`IF NOT EXISTS` / `IF EXISTS`) and its version
is recorded only after all its statements succeeded: an interrupted
`up` is finished by running `up` again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from peloton.core.errors import InvalidArgument
from peloton.storage.cassandra.schema import (
    CQL_SCHEMA_VERSIONS,
    MIGRATIONS_TABLE,
    MIGRATIONS_TABLE_CQL,
)
from peloton.storage.cassandra.session import CassandraUrl, DriverSession
from peloton.storage.schema import SchemaStatus
from peloton.storage.store import StoreOptions

CQL_DIR = Path(__file__).resolve().parent / "cql"
_FILE = re.compile(r"^(\d{4})_(\w+)\.(up|down)\.cql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered migration: its version, name, and the statements of each direction."""

    version: str
    name: str
    up: tuple[str, ...]
    down: tuple[str, ...]


class TextSession(Protocol):
    """Runs raw CQL (DriverSession does; tests pass a recorder)."""

    def execute_text(self, text: str) -> list[dict[str, object]]:
        """Run one statement; its rows."""
        ...


def split_statements(text: str) -> tuple[str, ...]:
    """The statements of a CQL file, comments removed."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = "\n".join(re.sub(r"(--|//).*$", "", line) for line in text.splitlines())
    return tuple(" ".join(s.split()) for s in text.split(";") if s.strip())


def migrations(directory: Path = CQL_DIR) -> list[Migration]:
    """Every migration in `directory`, oldest first; ValueError if a pair is incomplete."""
    found: dict[str, dict[str, str]] = {}
    for path in sorted(directory.glob("*.cql")):
        m = _FILE.match(path.name)
        if m is None:
            raise ValueError(f"unexpected file in {directory}: {path.name}")
        entry = found.setdefault(m.group(1), {"name": m.group(2)})
        entry[m.group(3)] = path.read_text()
    out = []
    for version in sorted(found):
        entry = found[version]
        if "up" not in entry or "down" not in entry:
            raise ValueError(f"migration {version} needs both an .up.cql and a .down.cql file")
        out.append(Migration(version, entry["name"], split_statements(entry["up"]),
                             split_statements(entry["down"])))
    return out


def _connect(url: str) -> tuple[DriverSession, CassandraUrl]:
    session = DriverSession(url, StoreOptions(), keyspace=False)
    return session, session.parsed


def applied(session: TextSession, keyspace: str) -> list[str]:
    """Versions recorded in the keyspace, oldest first ([] if there is no schema)."""
    rows = session.execute_text(
        "SELECT keyspace_name FROM system_schema.tables WHERE keyspace_name = "
        f"'{keyspace}' AND table_name = '{MIGRATIONS_TABLE}'")
    if not rows:
        return []
    rows = session.execute_text(f"SELECT version FROM {keyspace}.{MIGRATIONS_TABLE}")
    return sorted(f"{int(str(r['version'])):04d}" for r in rows)


def status(url: str) -> SchemaStatus:
    """Current (highest applied) and known versions of the keyspace at `url`."""
    session, parsed = _connect(url)
    try:
        done = applied(session, parsed.keyspace)
    finally:
        session.close()
    return SchemaStatus(done[-1] if done else None, CQL_SCHEMA_VERSIONS)


def plan(done: list[str], target: str, upgrade: bool,
         known: list[Migration]) -> list[Migration]:
    """The migrations to run (in order) to go from `done` to `target`."""
    versions = [m.version for m in known]
    current = versions.index(done[-1]) if done else -1
    if target == "head":
        goal = len(versions) - 1
    elif target == "base":
        goal = -1
    elif target == "-1":
        goal = current - 1
    elif target in versions:
        goal = versions.index(target)
    else:
        raise InvalidArgument(f"unknown schema version {target!r}; known: "
                              f"{', '.join(versions)}", field="to")
    if upgrade:
        return known[current + 1:goal + 1]
    return list(reversed(known[goal + 1:current + 1])) if goal < current else []


def run(session: TextSession, parsed: CassandraUrl, target: str, upgrade: bool) -> list[str]:
    """Apply or revert migrations over an open session; returns the versions changed."""
    ks = parsed.keyspace
    if upgrade:
        replication = (f"{{'class': 'NetworkTopologyStrategy', '{parsed.datacenter}': "
                       f"{parsed.replication_factor}}}" if parsed.datacenter else
                       f"{{'class': 'SimpleStrategy', 'replication_factor': "
                       f"{parsed.replication_factor}}}")
        session.execute_text(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
                             f"{replication}")
    done = applied(session, ks)
    steps = plan(done, target, upgrade, migrations())
    if steps:
        session.execute_text(f"USE {ks}")
        session.execute_text(MIGRATIONS_TABLE_CQL)
    for m in steps:
        for stmt in (m.up if upgrade else m.down):
            session.execute_text(stmt)
        if upgrade:
            session.execute_text(f"INSERT INTO {MIGRATIONS_TABLE} (version, name, applied_at) "
                                 f"VALUES ({int(m.version)}, '{m.name}', toTimestamp(now()))")
        else:
            session.execute_text(f"DELETE FROM {MIGRATIONS_TABLE} "
                                 f"WHERE version = {int(m.version)}")
    return [m.version for m in steps]


def upgrade(url: str, target: str = "head") -> list[str]:
    """Apply pending migrations up to `target`; returns the versions applied."""
    session, parsed = _connect(url)
    try:
        return run(session, parsed, target, True)
    finally:
        session.close()


def downgrade(url: str, target: str = "-1") -> list[str]:
    """Revert migrations down to `target`; returns the versions reverted, newest first."""
    session, parsed = _connect(url)
    try:
        return run(session, parsed, target, False)
    finally:
        session.close()


def drop_keyspace(url: str) -> None:
    """Drop the whole keyspace (test clean-up)."""
    session, parsed = _connect(url)
    try:
        session.execute_text(f"DROP KEYSPACE IF EXISTS {parsed.keyspace}")
    finally:
        session.close()
