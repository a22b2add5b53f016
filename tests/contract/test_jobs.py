"""Contract: job configs, job runtime CAS, names, the active set, delete_job."""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.core.states import JobState
from peloton.storage import JobQuery, Store
from tests.contract import factories as f


def test_create_job_stores_config_runtime_name_and_active_set(store: Store) -> None:
    jid = f.job_id()
    spec = f.job_spec("alpha")
    stored = store.create_job(jid, spec, f.job_runtime())
    assert stored.revision == 1
    assert store.get_job_runtime(jid) == stored
    assert store.get_job_config(jid) == spec
    assert store.get_job_config(jid, 1) == spec
    assert store.get_job_id_by_name("alpha") == jid
    assert store.get_active_jobs() == [jid]
    assert [j.job_id for j in store.query_jobs(JobQuery()).jobs] == [jid]


def test_create_terminal_job_is_not_active(store: Store) -> None:
    jid = f.job_id()
    store.create_job(jid, f.job_spec(), f.job_runtime(JobState.SUCCEEDED))
    assert store.get_active_jobs() == []


def test_create_twice_is_already_exists_and_changes_nothing(store: Store) -> None:
    jid = f.job_id()
    first = store.create_job(jid, f.job_spec("one"), f.job_runtime())
    with pytest.raises(AlreadyExists):
        store.create_job(jid, f.job_spec("two"), f.job_runtime(JobState.RUNNING))
    assert store.get_job_runtime(jid) == first
    assert store.get_job_config(jid).name == "one"


def test_config_versions_and_max(store: Store) -> None:
    jid = f.job_id()
    store.create_job(jid, f.job_spec(version=1), f.job_runtime())
    store.add_job_config(jid, f.job_spec("renamed", version=2, owner="bob"))
    assert store.get_job_config_versions(jid) == [1, 2]
    assert store.get_max_job_config_version(jid) == 2
    assert store.get_job_config(jid).name == "renamed"
    assert store.get_job_config(jid, 1).name == "job"
    # the index follows the newest config
    assert store.query_jobs(JobQuery(owner="bob")).total == 1
    assert store.query_jobs(JobQuery(owner="alice")).total == 0


def test_add_same_config_is_idempotent_other_content_is_refused(store: Store) -> None:
    jid = f.job_id()
    store.create_job(jid, f.job_spec(), f.job_runtime())
    v2 = f.job_spec(version=2)
    store.add_job_config(jid, v2)
    store.add_job_config(jid, v2)
    with pytest.raises(AlreadyExists):
        store.add_job_config(jid, f.job_spec("other", version=2))
    assert store.get_job_config(jid, 2) == v2


def test_older_config_does_not_move_the_index_back(store: Store) -> None:
    jid = f.job_id()
    store.create_job(jid, f.job_spec("new", version=5), f.job_runtime())
    store.add_job_config(jid, f.job_spec("old", version=3))
    assert store.query_jobs(JobQuery()).jobs[0].name == "new"


def test_missing_job_is_not_found(store: Store) -> None:
    jid = f.job_id()
    with pytest.raises(NotFound):
        store.get_job_runtime(jid)
    with pytest.raises(NotFound):
        store.get_job_config(jid)
    with pytest.raises(NotFound):
        store.get_max_job_config_version(jid)
    with pytest.raises(NotFound):
        store.add_job_config(jid, f.job_spec())
    with pytest.raises(NotFound):
        store.update_job_runtime(jid, f.job_runtime())
    assert store.get_job_config_versions(jid) == []
    assert store.get_job_id_by_name("nope") is None


def test_runtime_cas_advances_revision(store: Store) -> None:
    jid = f.job_id()
    rt = store.create_job(jid, f.job_spec(), f.job_runtime())
    rt2 = store.update_job_runtime(jid, dataclasses.replace(rt, state=JobState.RUNNING))
    assert rt2.revision == 2 and rt2.state is JobState.RUNNING
    assert store.get_job_runtime(jid) == rt2
    assert store.query_jobs(JobQuery(states=frozenset({JobState.RUNNING}))).total == 1


def test_runtime_cas_conflict_leaves_row_unchanged(store: Store) -> None:
    jid = f.job_id()
    rt = store.create_job(jid, f.job_spec(), f.job_runtime())
    won = store.update_job_runtime(jid, dataclasses.replace(rt, state=JobState.RUNNING))
    with pytest.raises(Conflict):
        store.update_job_runtime(jid, dataclasses.replace(rt, state=JobState.KILLED))
    assert store.get_job_runtime(jid) == won
    assert store.query_jobs(JobQuery(states=frozenset({JobState.KILLED}))).total == 0


def test_delete_job_configs_prunes_versions(store: Store) -> None:
    jid = f.job_id()
    store.create_job(jid, f.job_spec(version=1), f.job_runtime())
    store.add_job_config(jid, f.job_spec(version=2))
    store.create_task_configs(jid, 1, f.task_spec())
    store.delete_job_configs(jid, [1])
    store.delete_job_configs(jid, [1])
    assert store.get_job_config_versions(jid) == [2]
    with pytest.raises(NotFound):
        store.get_task_configs(jid, 1)


def test_names_keep_history_newest_first(store: Store) -> None:
    a, b = f.job_id(), f.job_id()
    store.create_job(a, f.job_spec("svc"), f.job_runtime(created=10.0))
    store.create_job(b, f.job_spec("svc"), f.job_runtime(created=20.0))
    assert store.get_job_ids_by_name("svc") == [b, a]
    assert store.get_job_id_by_name("svc") == b


def test_active_set_is_idempotent_and_sorted(store: Store) -> None:
    ids = sorted(f.job_id() for _ in range(3))
    for jid in reversed(ids):
        store.add_active_job(jid)
        store.add_active_job(jid)
    assert store.get_active_jobs() == ids
    store.delete_active_job(ids[1])
    store.delete_active_job(ids[1])
    assert store.get_active_jobs() == [ids[0], ids[2]]


def test_delete_job_removes_everything_and_is_idempotent(store: Store) -> None:
    jid, other = f.job_id(), f.job_id()
    for j in (jid, other):
        store.create_job(j, f.job_spec(j[:8]), f.job_runtime())
        store.create_task_configs(j, 1, f.task_spec())
        store.create_task_runtimes(j, {0: f.task_runtime(), 1: f.task_runtime()})
        store.add_pod_events([f.pod_event(j, 0, 1, 5.0)])
        upd = store.create_update(f.update_info(j))
        store.add_workflow_event(f.workflow_event(upd.update_id, None, 1.0))
    upd_id = store.get_updates_for_job(jid)[0].update_id
    store.delete_job(jid)
    store.delete_job(jid)
    with pytest.raises(NotFound):
        store.get_job_runtime(jid)
    assert store.get_job_config_versions(jid) == []
    assert store.get_task_runtimes(jid) == {}
    assert store.get_pod_events(jid, 0) == []
    assert store.get_updates_for_job(jid) == []
    assert store.get_workflow_events(upd_id) == []
    assert store.get_job_id_by_name(jid[:8]) is None
    assert store.get_active_jobs() == [other]
    assert [j.job_id for j in store.query_jobs(JobQuery()).jobs] == [other]
    # the other job is untouched
    assert len(store.get_task_runtimes(other)) == 2
    assert len(store.get_pod_events(other, 0)) == 1
