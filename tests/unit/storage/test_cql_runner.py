"""The CQL migration runner, against a recording session (no server needed)."""

from __future__ import annotations

import pytest

from migrations import cql_runner
from peloton.core.errors import InvalidArgument
from peloton.storage.cassandra.session import CassandraUrl


class Recorder:
    """Remembers statements and answers the runner's two kinds of reads."""

    def __init__(self, applied: list[int] | None = None) -> None:
        self.applied = list(applied or [])
        self.ran: list[str] = []

    def execute_text(self, text: str) -> list[dict[str, object]]:
        self.ran.append(text)
        if text.startswith("SELECT keyspace_name FROM system_schema.tables"):
            return [{"keyspace_name": "ks"}] if self.applied else []
        if text.startswith("SELECT version FROM"):
            return [{"version": v} for v in self.applied]
        if text.startswith("INSERT INTO schema_migrations"):
            self.applied.append(int(text.split("VALUES (")[1].split(",")[0]))
        if text.startswith("DELETE FROM schema_migrations"):
            self.applied.remove(int(text.rsplit("=", 1)[1]))
        return []


URL = CassandraUrl.parse("cassandra://h/ks?replication_factor=3")


def test_up_from_nothing_creates_keyspace_and_applies_in_order() -> None:
    session = Recorder()
    assert cql_runner.run(session, URL, "head", True) == ["0001", "0002", "0003", "0004"]
    assert session.ran[0].startswith("CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
                                     "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    assert session.applied == [1, 2, 3, 4]
    creates = [s for s in session.ran if s.startswith("CREATE TABLE")]
    assert creates[0].startswith("CREATE TABLE IF NOT EXISTS schema_migrations")
    assert any("copy_checkpoints" in s for s in creates[-3:-2])
    assert "cron_jobs" in creates[-2]
    assert "leader_epochs" in creates[-1]
    # the version is recorded after the file's statements, not before
    first_record = next(i for i, s in enumerate(session.ran) if "INSERT INTO schema" in s)
    assert all("copy_checkpoints" not in s for s in session.ran[:first_record])


def test_up_again_does_nothing_and_down_steps_back() -> None:
    session = Recorder([1, 2, 3, 4])
    assert cql_runner.run(session, URL, "head", True) == []
    assert cql_runner.run(session, URL, "-1", False) == ["0004"]
    assert "DROP TABLE IF EXISTS leader_epochs" in session.ran
    assert cql_runner.run(session, URL, "-1", False) == ["0003"]
    assert "DROP TABLE IF EXISTS cron_jobs" in session.ran
    assert cql_runner.run(session, URL, "-1", False) == ["0002"]
    assert "DROP TABLE IF EXISTS copy_checkpoints" in session.ran
    assert session.applied == [1]
    assert cql_runner.run(session, URL, "base", False) == ["0001"]
    assert session.applied == []


def test_network_topology_when_a_datacenter_is_named() -> None:
    session = Recorder()
    cql_runner.run(session, CassandraUrl.parse("cassandra://h/ks?datacenter=dc1"), "0001", True)
    assert "{'class': 'NetworkTopologyStrategy', 'dc1': 1}" in session.ran[0]
    assert session.applied == [1]


def test_unknown_target_is_invalid() -> None:
    with pytest.raises(InvalidArgument, match="unknown schema version '9'"):
        cql_runner.run(Recorder(), URL, "9", True)


def test_statement_splitting_drops_comments() -> None:
    text = "-- a\nCREATE TABLE a (x int PRIMARY KEY); /* b; */ DROP TABLE b; // c\n"
    assert cql_runner.split_statements(text) == ("CREATE TABLE a (x int PRIMARY KEY)",
                                                 "DROP TABLE b")
