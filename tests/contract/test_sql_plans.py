"""Every query the SQL backend runs is served by an index (checked on SQLite's plans).

The store is driven through every read and write path while the SQL it
sends is recorded; each statement is then run under EXPLAIN QUERY PLAN and
must not scan a whole table, except the listings whose answer *is* the
whole table (all pools, all hosts, the active set, an unfiltered job query).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from peloton.core.model.constraints import Label
from peloton.core.states import HostState, JobState, TaskState
from peloton.storage import JobQuery, RuntimeWrite, SortField, Store, TimeRange, open_store
from tests.contract import factories as f

#: (table, why a full scan is the answer) for the listing calls below.
WHOLE_TABLE = {"respools", "hosts", "active_jobs", "volumes", "frameworks", "copy_checkpoints"}


def workload(store: Store) -> None:
    """Every Store method with an index-relevant query shape."""
    jid = f.job_id()
    rt = store.create_job(jid, f.job_spec(labels=(Label("a", "b"),)), f.job_runtime())
    store.add_job_config(jid, f.job_spec(version=2))
    store.get_job_config(jid)
    store.get_job_config(jid, 1)
    store.get_job_config_versions(jid)
    store.get_max_job_config_version(jid)
    store.update_job_runtime(jid, dataclasses.replace(rt, state=JobState.RUNNING))
    store.get_job_id_by_name("job")
    for q in (JobQuery(states=frozenset({JobState.RUNNING})), JobQuery(owner="alice"),
              JobQuery(respool_id="pool-1"), JobQuery(labels=(Label("a", "b"),)),
              JobQuery(creation_time=TimeRange(0, 5000), order_by=SortField.NAME)):
        store.query_jobs(q)
    store.create_task_configs(jid, 1, f.task_spec(), {1: f.task_spec()})
    store.get_task_config(jid, 1, 1)
    store.get_task_configs(jid, 1)
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(3)})
    store.get_task_runtime(jid, 0)
    store.get_task_runtimes(jid, instances=[0, 1], states=[TaskState.PENDING])
    current = store.get_task_runtimes(jid)
    store.write_task_runtimes([RuntimeWrite(jid, i, r) for i, r in current.items()]
                              + [RuntimeWrite(jid, 9, current[0])])
    store.add_pod_events([f.pod_event(jid, 0, 1, 1.0)])
    store.get_pod_events(jid, 0, limit=5)
    store.get_pod_events(jid, 0, run_id=1)
    store.delete_pod_events(jid, 0, 0, 1)
    store.expire_pod_events()
    upd = store.create_update(f.update_info(jid))
    store.update_update(upd)
    store.get_updates_for_job(jid)
    store.add_workflow_event(f.workflow_event(upd.update_id, 1, 1.0))
    store.get_workflow_events(upd.update_id, 1)
    store.put_host(f.host("h"))
    store.get_hosts(HostState.UP)
    store.create_secret(f.secret("s", jid))
    store.get_secrets_for_job(jid)
    store.create_volume(f.volume("v", jid))
    store.get_volumes(jid)
    store.delete_update(upd.update_id)
    store.delete_job_configs(jid, [1])
    store.delete_job(jid)


@pytest.fixture
def recording(sqlite_template: Path, tmp_path: Path) -> tuple[Store, list[tuple[str, Any]]]:
    """A SQLite store and the list its statements are recorded into."""
    path = tmp_path / "plans.db"
    shutil.copy(sqlite_template, path)
    store = open_store(f"sqlite:///{path}")
    seen: list[tuple[str, Any]] = []

    @sa.event.listens_for(store.db.engine, "before_cursor_execute")  # type: ignore[attr-defined]
    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any,
               many: bool) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
            seen.append((statement, params[0] if many else params))

    return store, seen


def test_no_query_scans_a_whole_table(recording: tuple[Store, list[tuple[str, Any]]]) -> None:
    store, seen = recording
    workload(store)
    assert len(seen) > 40
    raw = store.db.engine.raw_connection()  # type: ignore[attr-defined]
    bad = []
    try:
        for statement, params in seen:
            plan = raw.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
            for row in plan:
                detail = row[-1]
                if detail.startswith("SCAN ") and "USING" not in detail:
                    table = detail.split()[1]
                    if table not in WHOLE_TABLE and not table.startswith(("json_each", "CONST")):
                        bad.append(f"{detail}: {statement[:120]}")
    finally:
        raw.close()
        store.close()
    assert bad == []
