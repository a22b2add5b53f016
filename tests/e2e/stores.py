"""Empty, migrated stores on the harness' real servers for end-to-end clusters."""

from __future__ import annotations

import uuid

import pytest

from migrations import cql_runner, sql_runner


def migrated_store(request: pytest.FixtureRequest, backend: str) -> str:
    """A store URL with the newest schema ("" for sqlite: `peloton up`'s own default file).

    PostgreSQL gets a fresh database on the session's server, Cassandra a fresh keyspace
    on the session's node (`peloton up` never creates a Cassandra schema by itself).
    """
    name = f"e2e_{uuid.uuid4().hex[:10]}"
    if backend == "sqlite":
        return ""
    if backend == "postgresql":
        url = str(request.getfixturevalue("postgres_server").create_database(name))
        sql_runner.upgrade(url)
        return url
    if backend == "cassandra":
        url = f"cassandra://{request.getfixturevalue('cassandra')}/{name}"
        cql_runner.upgrade(url)
        return url
    raise ValueError(backend)
