"""Faults: corrupt rows, lost and refused connections, a locked SQLite file, and
transactions cut by a crash of the database server."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from migrations import sql_runner
from peloton.core.errors import DataCorruption, Unavailable
from peloton.core.states import JobState
from peloton.storage import JobQuery, Store, open_store
from peloton.storage.sql import tables
from tests.contract import factories as f
from tests.contract.conftest import Clocks, fake_cassandra_store, open_cassandra
from tests.harness.cassandra import CassandraServer
from tests.harness.postgres import PostgresServer
from tests.harness.procs import free_port, wait_for


def _corrupt(store: Store, table: sa.Table, column: str, value: str, **where: object) -> None:
    conds = [table.c[k] == v for k, v in where.items()]
    store.db.run("corrupt", lambda c: c.execute(  # type: ignore[attr-defined]
        sa.update(table).where(*conds).values({column: value})))


def test_corrupt_task_runtime_names_the_task(sql_store: Store) -> None:
    jid = f.job_id()
    sql_store.create_task_runtimes(jid, {0: f.task_runtime(), 1: f.task_runtime()})
    _corrupt(sql_store, tables.task_runtimes, "body", '{"state": "EXPLODED"}',
             job_id=jid, instance=1)
    with pytest.raises(DataCorruption, match=f"task runtime of task {jid}-1 is corrupt"):
        sql_store.get_task_runtime(jid, 1)
    with pytest.raises(DataCorruption, match=f"{jid}-1"):
        sql_store.get_task_runtimes(jid)
    assert sql_store.get_task_runtime(jid, 0).revision == 1  # the healthy row still reads


def test_corrupt_job_rows_name_the_job(sql_store: Store) -> None:
    jid = f.job_id()
    sql_store.create_job(jid, f.job_spec(), f.job_runtime())
    _corrupt(sql_store, tables.jobs, "runtime", "not json{", job_id=jid)
    with pytest.raises(DataCorruption, match=f"job runtime of job {jid} is corrupt"):
        sql_store.get_job_runtime(jid)
    with pytest.raises(DataCorruption, match=jid):
        sql_store.query_jobs(JobQuery())
    _corrupt(sql_store, tables.job_configs, "body", "[]", job_id=jid)
    with pytest.raises(DataCorruption, match=f"job config v1 of job {jid} is corrupt"):
        sql_store.get_job_config(jid)


def test_corrupt_host_and_event_name_the_entity(sql_store: Store) -> None:
    sql_store.put_host(f.host("h1"))
    _corrupt(sql_store, tables.hosts, "body", '{"hostname": 5}', hostname="h1")
    with pytest.raises(DataCorruption, match="host h1 is corrupt"):
        sql_store.get_hosts()
    jid = f.job_id()
    sql_store.add_pod_events([f.pod_event(jid, 0, 1, 1.0)])
    _corrupt(sql_store, tables.pod_events, "body", "", job_id=jid)
    with pytest.raises(DataCorruption, match=f"pod event of task {jid}-0 run 1"):
        sql_store.get_pod_events(jid, 0)


@pytest.mark.postgres
def test_refused_connection_is_unavailable_after_backoff(clocks: Clocks) -> None:
    store = open_store(f"postgresql://postgres@127.0.0.1:{free_port()}/x", clocks.options(4))
    with pytest.raises(Unavailable, match="gave up after 4 attempts"):
        store.get_job_runtime(f.job_id())
    delays = clocks.retry.sleeps
    assert len(delays) == 3 and delays[0] < delays[1] < delays[2]
    store.close()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test's own, so it can be killed (durable: commits survive)."""
    server = PostgresServer(durable=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.postgres
def test_killed_server_is_unavailable_then_recovers(own_postgres: PostgresServer,
                                                    clocks: Clocks) -> None:
    url = own_postgres.url()
    sql_runner.upgrade(url)
    store = open_store(url, clocks.options(3))
    jid = f.job_id()
    rt = store.create_job(jid, f.job_spec(), f.job_runtime())
    own_postgres.kill()  # kill -9 of the postmaster: every connection is lost
    with pytest.raises(Unavailable):
        store.update_job_runtime(jid, dataclasses.replace(rt, state=JobState.RUNNING))
    assert len(clocks.retry.sleeps) == 2
    own_postgres.restart()
    # the pool notices the dead connections and reconnects; nothing was written
    assert store.get_job_runtime(jid) == rt
    assert store.update_job_runtime(jid, rt).revision == 2
    store.close()


@pytest.mark.postgres
def test_transaction_cut_by_a_crash_leaves_nothing(own_postgres: PostgresServer,
                                                   clocks: Clocks) -> None:
    url = own_postgres.url()
    sql_runner.upgrade(url)
    store = open_store(url, clocks.options(2))
    jid = f.job_id()
    rows = [{"job_id": jid, "instance": i, "state": "PENDING", "revision": 1, "body": "{}"}
            for i in range(100)]

    def write_then_crash(conn: sa.Connection) -> None:
        conn.execute(sa.insert(tables.task_runtimes), rows)
        own_postgres.kill()  # before COMMIT

    with pytest.raises(Unavailable):
        store.db.run("crashing write", write_then_crash)  # type: ignore[attr-defined]
    own_postgres.restart()
    assert store.get_task_runtimes(jid) == {}
    store.close()


def test_locked_sqlite_is_unavailable_after_retries(tmp_path: Path, clocks: Clocks) -> None:
    path = tmp_path / "locked.db"
    sql_runner.upgrade(f"sqlite:///{path}")
    store = open_store(f"sqlite:///{path}?busy_timeout_ms=50", clocks.options(3))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(Unavailable, match="locked"):
            store.add_active_job("j")
        assert len(clocks.retry.sleeps) == 2
        assert store.get_active_jobs() == []  # readers are not blocked (WAL)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.add_active_job("j")
    assert store.get_active_jobs() == ["j"]
    store.close()


def test_corrupt_cassandra_rows_name_the_entity() -> None:
    # The same over the in-process CQL interpreter (the fast unit fake); the real server's
    # run is test_corrupt_rows_on_a_real_cassandra_name_the_entity.
    store = fake_cassandra_store()
    jid = f.job_id()
    store.create_job(jid, f.job_spec(), f.job_runtime())
    store.create_task_runtimes(jid, {0: f.task_runtime(), 1: f.task_runtime()})
    data = store.s.data  # type: ignore[attr-defined]
    data["job_runtime"][(jid,)][()]["body"] = "not json{"
    data["task_runtime"][(jid,)][(1,)]["body"] = '{"state": "EXPLODED"}'
    with pytest.raises(DataCorruption, match=f"job runtime of job {jid} is corrupt"):
        store.get_job_runtime(jid)
    with pytest.raises(DataCorruption, match=f"{jid}-1"):
        store.get_task_runtime(jid, 1)
    assert store.get_task_runtime(jid, 0).revision == 1  # the healthy row still reads


def _cql(store: Store, text: str) -> None:
    store.s.execute_text(text)  # type: ignore[attr-defined]


@pytest.mark.cassandra
def test_corrupt_rows_on_a_real_cassandra_name_the_entity(request: pytest.FixtureRequest) -> None:
    store = open_cassandra(request)
    jid = f.job_id()
    store.create_job(jid, f.job_spec(), f.job_runtime())
    store.create_task_runtimes(jid, {0: f.task_runtime(), 1: f.task_runtime()})
    store.put_host(f.host("h1"))
    _cql(store, f"UPDATE job_runtime SET body = 'not json{{' WHERE job_id = '{jid}'")
    _cql(store, "UPDATE task_runtime SET body = '{\"state\": \"EXPLODED\"}' "
                f"WHERE job_id = '{jid}' AND instance_id = 1")
    _cql(store, "UPDATE host_info SET body = '{\"hostname\": 5}' WHERE hostname = 'h1'")
    with pytest.raises(DataCorruption, match=f"job runtime of job {jid} is corrupt"):
        store.get_job_runtime(jid)
    with pytest.raises(DataCorruption, match=f"task runtime of task {jid}-1 is corrupt"):
        store.get_task_runtime(jid, 1)
    with pytest.raises(DataCorruption, match=f"{jid}-1"):
        store.get_task_runtimes(jid)
    with pytest.raises(DataCorruption, match="host h1 is corrupt"):
        store.get_hosts()
    assert store.get_task_runtime(jid, 0).revision == 1  # the healthy row still reads
    store.close()


@pytest.mark.cassandra
def test_refused_cassandra_connection_is_unavailable_after_backoff(clocks: Clocks) -> None:
    with pytest.raises(Unavailable, match="gave up after 3 attempts"):
        open_store(f"cassandra://127.0.0.1:{free_port()}/peloton", clocks.options(3))
    delays = clocks.retry.sleeps
    assert len(delays) == 2 and delays[0] < delays[1]


@pytest.mark.cassandra
@pytest.mark.slow
def test_killed_cassandra_is_unavailable_then_recovers(
        cassandra_server: CassandraServer | None, request: pytest.FixtureRequest,
        clocks: Clocks) -> None:
    if cassandra_server is None:
        pytest.skip("needs the node the harness started (PELOTON_TEST_CASSANDRA names another)")
    store = open_cassandra(request, clocks.options(3))
    jid = f.job_id()
    rt = store.create_job(jid, f.job_spec(), f.job_runtime())
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(20)})
    cassandra_server.kill()  # kill -9: no flush, no drain
    with pytest.raises(Unavailable):
        store.update_job_runtime(jid, dataclasses.replace(rt, state=JobState.RUNNING))
    assert len(clocks.retry.sleeps) == 2
    cassandra_server.restart()

    def reads_again() -> bool:
        try:
            return store.get_job_runtime(jid) == rt
        except Unavailable:
            return False
    # The same store object reconnects by itself; what was acknowledged before the crash is
    # back from the commit log, and the refused write left nothing behind.
    wait_for(reads_again, 60, "the store to reconnect to the restarted node")
    assert len(store.get_task_runtimes(jid)) == 20
    assert store.update_job_runtime(jid, rt).revision == 2
    store.close()
