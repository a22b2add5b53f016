"""The migration tool: copy and verify between backends, resume after an interruption,
catch up with a live source, and report differences and corruption."""

from __future__ import annotations

import dataclasses
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from cli.main import cli
from migrations import sql_runner
from migrations.copy import copy_store
from migrations.verify import verify_stores
from peloton.core.errors import DataCorruption
from peloton.core.states import JobState, TaskState
from peloton.storage import JobQuery, RuntimeWrite, SchemaMismatch, Store, open_store
from peloton.storage.bulk import KINDS
from peloton.storage.sql import tables
from tests.contract import factories as f
from tests.contract.conftest import fake_cassandra_store, open_cassandra
from tests.harness.postgres import PostgresServer

MakeStore = Callable[[str], Store]


class Interrupted(Exception):
    """Stands in for Ctrl-C or a crash of the copy process."""


@pytest.fixture
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """Opens fresh, migrated stores: make_store("sqlite"|"postgresql"|"cql-fake"|"cassandra").

    "cassandra" is the session's real server (one keyspace, emptied first).
    """
    opened: list[Store] = []
    dropped: list[str] = []

    def make(backend: str) -> Store:
        if backend == "cql-fake":
            return fake_cassandra_store()
        if backend == "cassandra":
            store = open_cassandra(request)
            opened.append(store)
            return store
        if backend == "sqlite":
            path = tmp_path / f"{uuid.uuid4().hex[:8]}.db"
            shutil.copy(request.getfixturevalue("sqlite_template"), path)
            url = f"sqlite:///{path}"
        else:
            server: PostgresServer = request.getfixturevalue("postgres_server")
            name = f"m_{uuid.uuid4().hex[:10]}"
            url = server.create_database(name, template=request.getfixturevalue("pg_template"))
            dropped.append(name)
        store = open_store(url)
        opened.append(store)
        return store

    yield make
    for s in opened:
        s.close()
    for name in dropped:
        request.getfixturevalue("postgres_server").drop_database(name)


def populate(store: Store, jobs: int = 4) -> list[str]:
    """A small but complete cluster: every kind of entity, revisions above 1."""
    store.create_resource_pool(f.pool("pool-1"))
    store.create_resource_pool(f.pool("pool-2", parent="pool-1"))
    for i in range(3):
        store.put_host(f.host(f"host-{i}"))
    store.put_framework_info(f.framework())
    ids = []
    for j in range(jobs):
        jid = f.job_id()
        ids.append(jid)
        rt = store.create_job(jid, f.job_spec(f"job-{j}", owner=f"o{j % 2}"),
                              f.job_runtime(created=float(j)))
        store.add_job_config(jid, f.job_spec(f"job-{j}", version=2, owner=f"o{j % 2}"))
        store.update_job_runtime(jid, dataclasses.replace(rt, state=JobState.RUNNING))
        store.create_task_configs(jid, 1, f.task_spec(), {1: f.task_spec("x", cpu=3)})
        store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(5)})
        store.update_task_runtime(jid, 0, store.get_task_runtime(jid, 0))
        store.add_pod_events([f.pod_event(jid, i, 1, float(i)) for i in range(5)])
        upd = store.create_update(f.update_info(jid))
        store.add_workflow_event(f.workflow_event(upd.update_id, None, 1.0))
        store.add_workflow_event(f.workflow_event(upd.update_id, 2, 2.0))
        store.create_secret(f.secret(f"secret-{j}", jid))
        store.create_volume(f.volume(f"vol-{j}", jid))
        cron = store.create_cron_job(f.cron_job(f"role/env/cron-{j}"))
        store.update_cron_job(dataclasses.replace(cron, last_run_job_id=jid))
    return ids


def total_records(store: Store) -> int:
    """Records of every kind in a store."""
    return sum(store.count_records(k.name) for k in KINDS)


def crash_once(kind_name: str, after: int) -> Callable[[str, int], None]:
    """An on_batch hook that interrupts the copy once, in `kind_name` after `after` records."""
    fired: list[str] = []

    def hook(kind: str, done: int) -> None:
        if kind == kind_name and done >= after and not fired:
            fired.append(kind)
            raise Interrupted(kind)
    return hook


@pytest.mark.postgres
def test_round_trip_sqlite_postgres_sqlite(make_store: MakeStore) -> None:
    a, b, c = make_store("sqlite"), make_store("postgresql"), make_store("sqlite")
    ids = populate(a)
    first = copy_store(a, b, batch_size=7)
    assert first.written == total_records(a) > 90
    assert all(k.mode == "copy" for k in first.kinds)
    with pytest.raises(Interrupted):  # the second leg is interrupted once, then resumed
        copy_store(b, c, batch_size=6, on_batch=crash_once("pod_event", 6))
    copy_store(b, c, batch_size=6)
    ab, bc = verify_stores(a, b), verify_stores(b, c)
    assert ab.ok and bc.ok
    assert [k.source_checksum for k in ab.kinds] == [k.dest_checksum for k in bc.kinds]
    # the copy is a working store: same answers, revisions preserved, CAS continues
    assert c.query_jobs(JobQuery(owner="o1")) == a.query_jobs(JobQuery(owner="o1"))
    assert c.get_task_runtimes(ids[0]) == a.get_task_runtimes(ids[0])
    rt = c.get_job_runtime(ids[0])
    assert rt == a.get_job_runtime(ids[0]) and rt.revision == 2
    assert c.update_job_runtime(ids[0], rt).revision == 3
    assert c.get_active_jobs() == a.get_active_jobs()
    assert c.get_job_id_by_name("job-1") == ids[1]


def test_round_trip_through_the_cassandra_backend_code(make_store: MakeStore) -> None:
    # sqlite -> Cassandra backend (over the CQL fake) -> sqlite: token-paged scans with
    # partitions cut by LIMIT, derived index rows rebuilt on the way in.
    a, b, c = make_store("sqlite"), make_store("cql-fake"), make_store("sqlite")
    ids = populate(a)
    copy_store(a, b, batch_size=3)
    copy_store(b, c, batch_size=4)
    assert verify_stores(a, b).ok and verify_stores(b, c).ok and verify_stores(a, c).ok
    assert b.query_jobs(JobQuery(owner="o0")) == a.query_jobs(JobQuery(owner="o0"))
    assert b.get_job_ids_by_name("job-2") == [ids[2]]
    b.delete_job(ids[0])  # derived rows written by put_records are found and removed
    assert b.query_jobs(JobQuery()).total == len(ids) - 1
    assert copy_store(b, c).kinds[0].mode == "catch-up"
    assert verify_stores(b, c).ok


@pytest.mark.cassandra
def test_round_trip_through_a_real_cassandra(make_store: MakeStore) -> None:
    a, b, c = make_store("sqlite"), make_store("cassandra"), make_store("sqlite")
    ids = populate(a)
    copy_store(a, b, batch_size=3)
    copy_store(b, c, batch_size=4)
    assert verify_stores(a, b).ok and verify_stores(b, c).ok and verify_stores(a, c).ok
    assert b.query_jobs(JobQuery(owner="o0")) == a.query_jobs(JobQuery(owner="o0"))
    assert b.get_job_ids_by_name("job-2") == [ids[2]]


@pytest.mark.parametrize(("source_backend", "dest_backend"), [
    ("sqlite", "sqlite"), ("sqlite", "cql-fake"), ("cql-fake", "sqlite"),
    pytest.param("sqlite", "postgresql", marks=pytest.mark.postgres),
    pytest.param("sqlite", "cassandra", marks=pytest.mark.cassandra)])
def test_interrupted_copy_resumes_without_redoing_batches(
        make_store: MakeStore, source_backend: str, dest_backend: str) -> None:
    src, dst = make_store(source_backend), make_store(dest_backend)
    populate(src)

    def crash_mid_task_runtimes(kind: str, done: int) -> None:
        if kind == "task_runtime" and done == 10:
            raise Interrupted(kind)

    with pytest.raises(Interrupted):
        copy_store(src, dst, batch_size=5, on_batch=crash_mid_task_runtimes)
    assert not verify_stores(src, dst).ok
    partly = total_records(dst)
    resumed = copy_store(src, dst, batch_size=5)
    modes = {k.kind: k.mode for k in resumed.kinds}
    assert modes["task_runtime"] == "resume"
    assert modes["job_config"] == "catch-up" and modes["pod_event"] == "copy"
    # nothing committed before the crash is written again
    assert resumed.written == total_records(src) - partly
    assert verify_stores(src, dst).ok


def test_live_source_is_caught_up_by_revision(make_store: MakeStore) -> None:
    src, dst = make_store("sqlite"), make_store("sqlite")
    ids = populate(src)
    copy_store(src, dst)
    # the cluster keeps running: 3 runtime writes, 1 new event, 1 host gone, 1 new pool
    rt = src.get_job_runtime(ids[0])
    src.update_job_runtime(ids[0], dataclasses.replace(rt, state=JobState.KILLING))
    tasks = src.get_task_runtimes(ids[1], instances=[1, 2])
    src.write_task_runtimes([RuntimeWrite(ids[1], i, dataclasses.replace(
        t, state=TaskState.RUNNING)) for i, t in tasks.items()])
    src.add_pod_events([f.pod_event(ids[1], 1, 2, 50.0)])
    src.delete_host("host-2")
    src.create_resource_pool(f.pool("pool-3"))
    report = verify_stores(src, dst)
    bad = {k.kind: k for k in report.kinds if not k.ok}
    assert set(bad) == {"job_runtime", "task_runtime", "pod_event", "host", "respool"}
    assert any("host host-2: only in the destination" in d for d in bad["host"].differences)
    catch_up = copy_store(src, dst)
    by_kind = {k.kind: k for k in catch_up.kinds}
    assert all(k.mode == "catch-up" for k in catch_up.kinds)
    assert catch_up.written == 5  # only what changed is rewritten
    assert by_kind["task_runtime"].written == 2 and by_kind["task_runtime"].unchanged == 18
    assert by_kind["host"].deleted == 1
    assert verify_stores(src, dst).ok
    assert dst.get_job_runtime(ids[0]).state is JobState.KILLING
    assert dst.query_jobs(JobQuery(states=frozenset({JobState.KILLING}))).total == 1


def test_writes_during_the_copy_are_caught_up(make_store: MakeStore) -> None:
    src, dst = make_store("sqlite"), make_store("sqlite")
    ids = populate(src)

    copied_job, later_job = min(ids), max(ids)  # scans go in key order

    def cluster_keeps_running(kind: str, done: int) -> None:
        if kind == "task_runtime" and done == 10:  # the first two jobs' tasks are copied
            for jid in (copied_job, later_job):
                rt = src.get_task_runtime(jid, 0)
                src.update_task_runtime(jid, 0, dataclasses.replace(rt, host="moved"))

    copy_store(src, dst, batch_size=10, on_batch=cluster_keeps_running)
    assert dst.get_task_runtime(later_job, 0).host == "moved"  # changed before it was copied
    assert dst.get_task_runtime(copied_job, 0).host == ""  # changed after: stale
    assert not verify_stores(src, dst).ok
    assert copy_store(src, dst).written == 1
    assert verify_stores(src, dst).ok
    assert dst.get_task_runtime(copied_job, 0).host == "moved"


def test_corrupt_source_stops_the_batch(make_store: MakeStore) -> None:
    src, dst = make_store("sqlite"), make_store("sqlite")
    populate(src, jobs=1)
    src.db.run("corrupt", lambda c: c.execute(  # type: ignore[attr-defined]
        sa.update(tables.hosts).where(tables.hosts.c.hostname == "host-1").values(body="{")))
    with pytest.raises(DataCorruption, match="host host-1"):
        copy_store(src, dst)
    assert dst.count_records("host") == 0  # the batch holding the bad row wrote nothing
    report = verify_stores(src, dst)
    hosts = next(k for k in report.kinds if k.kind == "host")
    assert not hosts.ok and any("host host-1 is corrupt" in c for c in hosts.corrupt)


def test_copy_refuses_an_old_destination_schema(make_store: MakeStore, tmp_path: Path) -> None:
    src = make_store("sqlite")
    old = tmp_path / "old.db"
    sql_runner.upgrade(f"sqlite:///{old}", "0001")
    dst = open_store(f"sqlite:///{old}")
    with pytest.raises(SchemaMismatch, match="peloton migrate schema up"):
        copy_store(src, dst)
    dst.close()


def test_cli_copy_and_verify(make_store: MakeStore) -> None:
    src, dst = make_store("sqlite"), make_store("sqlite")
    populate(src, jobs=2)
    runner = CliRunner()
    args = ["--from", src.url, "--to", dst.url]
    copied = runner.invoke(cli, ["migrate", "copy", *args, "--no-progress"])
    assert copied.exit_code == 0, copied.output
    assert "task_runtime" in copied.output and "done:" in copied.output
    ok = runner.invoke(cli, ["migrate", "verify", *args])
    assert ok.exit_code == 0 and "stores match" in ok.output
    dst.put_host(f.host("extra"))
    bad = runner.invoke(cli, ["migrate", "verify", *args])
    assert bad.exit_code == 1
    assert "MISMATCH" in bad.output and "host extra: only in the destination" in bad.output
    same = runner.invoke(cli, ["migrate", "copy", "--from", src.url, "--to", src.url])
    assert same.exit_code == 4  # invalid argument
