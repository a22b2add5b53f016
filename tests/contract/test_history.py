"""Contract: pod events (order, latest N, run ranges, retention), updates and workflow events."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.core.states import TaskState, WorkflowState
from peloton.storage import Store
from peloton.storage.sql import history as sql_history
from tests.contract import factories as f
from tests.contract.conftest import Clocks


def _events(store: Store, jid: str) -> None:
    store.add_pod_events([f.pod_event(jid, 0, run, 10.0 * run + t, state)
                          for run in (1, 2, 3)
                          for t, state in ((1, TaskState.PENDING), (2, TaskState.RUNNING),
                                           (3, TaskState.FAILED))])
    store.add_pod_events([f.pod_event(jid, 1, 1, 5.0)])


def test_pod_events_newest_first_with_limit_and_run(store: Store) -> None:
    jid = f.job_id()
    _events(store, jid)
    events = store.get_pod_events(jid, 0)
    assert [(e.run_id, e.time) for e in events] == [
        (run, 10.0 * run + t) for run in (3, 2, 1) for t in (3, 2, 1)]
    assert [e.state for e in store.get_pod_events(jid, 0, limit=2)] == [
        TaskState.FAILED, TaskState.RUNNING]
    assert {e.run_id for e in store.get_pod_events(jid, 0, run_id=2)} == {2}
    assert len(store.get_pod_events(jid, 1)) == 1
    assert store.get_pod_events(jid, 7) == []
    assert events[0] == f.pod_event(jid, 0, 3, 33.0, TaskState.FAILED)


def test_adding_an_event_twice_keeps_one(store: Store) -> None:
    jid = f.job_id()
    event = f.pod_event(jid, 0, 1, 1.5)
    store.add_pod_events([event])
    store.add_pod_events([event])
    assert store.get_pod_events(jid, 0) == [event]


def test_delete_run_range_is_half_open(store: Store) -> None:
    jid = f.job_id()
    _events(store, jid)
    store.delete_pod_events(jid, 0, 1, 3)
    store.delete_pod_events(jid, 0, 1, 3)
    assert {e.run_id for e in store.get_pod_events(jid, 0)} == {3}
    assert len(store.get_pod_events(jid, 1)) == 1


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                         marks=pytest.mark.postgres)],
                         indirect=True)
def test_expired_events_are_swept(store: Store, clocks: Clocks) -> None:
    # Cassandra expires rows itself by TTL on the server's clock; this checks the SQL sweep.
    jid = f.job_id()
    store.add_pod_events([f.pod_event(jid, 0, 1, 1.0)])
    clocks.wall.advance(30 * 24 * 3600)
    store.add_pod_events([f.pod_event(jid, 0, 2, 2.0)])
    assert store.expire_pod_events() == 0
    clocks.wall.advance(61 * 24 * 3600)  # first event is 91 days old: past the 90-day TTL
    assert store.expire_pod_events() == 1
    assert [e.run_id for e in store.get_pod_events(jid, 0)] == [2]
    assert store.expire_pod_events(now=clocks.wall.wall() + 365 * 24 * 3600) == 1


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                         marks=pytest.mark.postgres)],
                         indirect=True)
def test_a_backlog_of_expired_events_is_swept_a_chunk_a_transaction(
        store: Store, clocks: Clocks, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql_history, "EXPIRE_CHUNK", 3)
    jid = f.job_id()
    store.add_pod_events([f.pod_event(jid, i % 2, 1 + i, float(i)) for i in range(8)])
    clocks.wall.advance(30 * 24 * 3600)
    kept = f.pod_event(jid, 0, 100, 100.0)
    store.add_pod_events([kept])
    clocks.wall.advance(61 * 24 * 3600)  # the eight are past the 90-day TTL, `kept` is not
    transactions: list[str] = []
    run = store.db.run  # type: ignore[attr-defined]

    def counted(what: str, fn: Any, **kw: Any) -> Any:
        transactions.append(what)
        return run(what, fn, **kw)

    monkeypatch.setattr(store.db, "run", counted)  # type: ignore[attr-defined]
    assert store.expire_pod_events() == 8
    assert transactions.count("expire pod events") == 3  # 3 + 3 + 2
    assert [e.run_id for e in store.get_pod_events(jid, 0)] == [100]
    assert store.get_pod_events(jid, 1) == []


def test_update_lifecycle_with_cas(store: Store) -> None:
    jid = f.job_id()
    upd = store.create_update(f.update_info(jid))
    assert upd.revision == 1 and store.get_update(upd.update_id) == upd
    with pytest.raises(AlreadyExists):
        store.create_update(f.update_info(jid, update_id=upd.update_id))
    paused = store.update_update(dataclasses.replace(upd, state=WorkflowState.PAUSED,
                                                     instances_done=(0,)))
    assert paused.revision == 2
    with pytest.raises(Conflict):
        store.update_update(dataclasses.replace(upd, state=WorkflowState.ABORTED))
    assert store.get_update(upd.update_id) == paused
    with pytest.raises(NotFound):
        store.update_update(f.update_info(jid))
    with pytest.raises(NotFound):
        store.get_update("nope")


def test_updates_for_job_newest_first_and_delete(store: Store) -> None:
    jid = f.job_id()
    old = store.create_update(f.update_info(jid, created=1.0))
    new = store.create_update(f.update_info(jid, created=2.0))
    store.create_update(f.update_info(f.job_id(), created=3.0))
    assert [u.update_id for u in store.get_updates_for_job(jid)] == [new.update_id, old.update_id]
    store.add_workflow_event(f.workflow_event(old.update_id, None, 1.0))
    store.delete_update(old.update_id)
    store.delete_update(old.update_id)
    assert [u.update_id for u in store.get_updates_for_job(jid)] == [new.update_id]
    assert store.get_workflow_events(old.update_id) == []


def test_workflow_events_by_instance_newest_first(store: Store) -> None:
    uid = store.create_update(f.update_info(f.job_id())).update_id
    for t in (1.0, 3.0, 2.0):
        store.add_workflow_event(f.workflow_event(uid, None, t))
        store.add_workflow_event(f.workflow_event(uid, 4, t + 10, WorkflowState.SUCCEEDED))
    store.add_workflow_event(f.workflow_event(uid, None, 1.0))  # duplicate: kept once
    assert [e.time for e in store.get_workflow_events(uid)] == [3.0, 2.0, 1.0]
    assert [e.time for e in store.get_workflow_events(uid, limit=2)] == [3.0, 2.0]
    events = store.get_workflow_events(uid, instance=4)
    assert [e.time for e in events] == [13.0, 12.0, 11.0]
    assert events[0] == f.workflow_event(uid, 4, 13.0, WorkflowState.SUCCEEDED)
    assert store.get_workflow_events(uid, instance=5) == []
