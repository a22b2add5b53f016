"""Without a Cassandra server: every CQL statement the backend prepares refers to tables and
columns the migrations create, restricts keys the way Cassandra allows, binds values with
the real driver, and encodes into a protocol frame; and the migration files are complete."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from cassandra import ConsistencyLevel
from cassandra.protocol import ExecuteMessage, ProtocolHandler

from migrations.cql_runner import migrations
from peloton.storage.cassandra.cql import Where, delete, eq, select, update
from peloton.storage.cassandra.schema import CQL_SCHEMA_VERSIONS, READ_VERSIONS
from peloton.storage.cassandra.statements import SCANNED, STATEMENTS
from peloton.storage.cassandra.store import DERIVED_TABLES
from tests.contract.cql_fake import CqlRejected, FakeCqlSession
from tests.harness import cql_schema

TABLES = cql_schema.schema()
SAMPLE = {"text": "x", "int": 7, "bigint": 2**40, "double": 1.5, "boolean": True}
ALL = [*STATEMENTS.values(), READ_VERSIONS]


def sample_values(binds: tuple[str, ...], table: str) -> list[Any]:
    """Values of the Python types the backend binds, one per marker."""
    out: list[Any] = []
    for bind in binds:
        if bind in ("[limit]", "[ttl]"):
            out.append(100)
        elif bind.endswith("[]"):
            out.append([SAMPLE[TABLES[table].columns[bind[:-2]]]])
        else:
            out.append(SAMPLE[TABLES[table].columns[bind]])
    return out


@pytest.mark.parametrize("stmt", ALL, ids=[s.name for s in ALL])
def test_statement_is_valid_for_the_migrated_schema(stmt: Any) -> None:
    assert cql_schema.check_statement(stmt, TABLES) == []
    assert stmt.text.count("?") == len(stmt.binds)
    assert not re.search(r"ALLOW FILTERING|MATERIALIZED|CUSTOM INDEX", stmt.text, re.I)


@pytest.mark.parametrize("stmt", ALL, ids=[s.name for s in ALL])
def test_statement_binds_and_encodes_with_the_driver(stmt: Any) -> None:
    prepared = cql_schema.prepared(stmt, TABLES)
    bound = prepared.bind(sample_values(stmt.binds, stmt.table))
    if prepared.routing_key_indexes:
        assert bound.routing_key  # the driver can route it to the partition's replicas
    message = ExecuteMessage(prepared.query_id, bound.values, ConsistencyLevel.LOCAL_QUORUM,
                             serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL)
    frame = io.BytesIO()
    ProtocolHandler.encode_message(message, stream_id=1, protocol_version=4,
                                   compressor=None, allow_beta_protocol_version=False)
    message.send_body(frame, 4)
    assert len(frame.getvalue()) > 16


def test_wrongly_typed_values_are_caught() -> None:
    stmt = STATEMENTS["task_runtime.cas"]
    values = sample_values(stmt.binds, stmt.table)
    values[0] = "7"  # revision is a bigint
    with pytest.raises(TypeError, match="revision"):
        cql_schema.prepared(stmt, TABLES).bind(values)


@pytest.mark.parametrize(("stmt", "problem"), [
    (select("bad1", "task_runtime", ("body",), *eq("state")), "non-key column"),
    (select("bad2", "pod_events", ("body",), *eq("job_id")), "partly restricted"),
    (select("bad3", "task_runtime", ("body",), *eq("instance_id")), "without the partition"),
    (update("bad4", "task_runtime", ("body",), *eq("job_id")), "whole primary key"),
    (update("bad5", "job_runtime", ("revision",), *eq("job_id"), if_columns=("job_id",)),
     "primary key column"),
    (delete("bad6", "pod_events", *eq("job_id", "instance_id"), Where(("time_us",), ">")),
     "skipped"),
    (select("bad7", "no_such_table", ("x",)), "unknown table"),
])
def test_the_checker_refuses_what_cassandra_refuses(stmt: Any, problem: str) -> None:
    assert any(problem in p for p in cql_schema.check_statement(stmt, TABLES))


def test_the_fake_refuses_wrong_types_like_the_driver() -> None:
    session = FakeCqlSession(TABLES)
    with pytest.raises(TypeError):
        session.execute(STATEMENTS["active_jobs.add"], ("zero", "job"))
    with pytest.raises(CqlRejected):
        session.execute(select("bad", "task_runtime", ("body",), *eq("state")), ("RUNNING",))


def test_every_table_the_backend_uses_is_created_by_the_migrations() -> None:
    used = {s.table for s in STATEMENTS.values()} | {t for t, *_ in SCANNED.values()}
    used |= set(DERIVED_TABLES)
    assert used - set(TABLES) == set()
    assert set(TABLES) - used == {"schema_migrations"}  # nothing created and never used


def test_migration_files_are_complete_and_reversible() -> None:
    found = migrations()
    assert tuple(m.version for m in found) == CQL_SCHEMA_VERSIONS
    assert all(m.up and m.down for m in found)
    # going all the way down drops every table the ups created
    assert cql_schema.tables_after_down("0000") == {"schema_migrations"}
    assert cql_schema.tables_after_down("0001") == set(cql_schema.schema("0001"))


def test_pod_events_keep_peloton_retention_by_default() -> None:
    assert TABLES["pod_events"].default_ttl == 90 * 24 * 3600
    assert TABLES["pod_events"].descending == {"run_id", "time_us"}
