"""Contract: task configs by version, task runtime CAS and batched writes."""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from peloton.core.model.events import PodEvent
from peloton.core.model.ids import TaskId
from peloton.core.states import TaskState
from peloton.storage import RuntimeWrite, Store
from tests.contract import factories as f


def test_task_configs_default_and_overrides(store: Store) -> None:
    jid = f.job_id()
    default, special = f.task_spec("d"), f.task_spec("s", cpu=4.0)
    store.create_task_configs(jid, 1, default, {2: special})
    assert store.get_task_config(jid, 0, 1) == default
    assert store.get_task_config(jid, 2, 1) == special
    configs = store.get_task_configs(jid, 1)
    assert configs.default == default and dict(configs.overrides) == {2: special}
    assert configs.for_instance(7) == default
    with pytest.raises(NotFound):
        store.get_task_config(jid, 0, 2)
    with pytest.raises(NotFound):
        store.get_task_configs(jid, 2)


def test_storing_a_config_version_again_replaces_it(store: Store) -> None:
    jid = f.job_id()
    store.create_task_configs(jid, 1, f.task_spec("a"), {1: f.task_spec("b"), 2: f.task_spec("c")})
    store.create_task_configs(jid, 1, f.task_spec("a2"), {1: f.task_spec("b2")})
    configs = store.get_task_configs(jid, 1)
    assert configs.default is not None and configs.default.name == "a2"
    assert sorted(configs.overrides) == [1]


def test_create_runtimes_all_or_nothing(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {0: f.task_runtime(), 1: f.task_runtime()})
    with pytest.raises(AlreadyExists):
        store.create_task_runtimes(jid, {1: f.task_runtime(TaskState.RUNNING),
                                         2: f.task_runtime()})
    assert sorted(store.get_task_runtimes(jid)) == [0, 1]
    assert store.get_task_runtime(jid, 1) == dataclasses.replace(f.task_runtime(), revision=1)


def test_retried_create_with_identical_runtimes_is_accepted(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {0: f.task_runtime()})
    store.create_task_runtimes(jid, {0: f.task_runtime(), 1: f.task_runtime()})  # a retry
    assert sorted(store.get_task_runtimes(jid)) == [0, 1]
    rt = store.get_task_runtime(jid, 0)
    store.update_task_runtime(jid, 0, rt)  # now at revision 2: a create cannot match it
    with pytest.raises(AlreadyExists):
        store.create_task_runtimes(jid, {0: f.task_runtime(), 2: f.task_runtime()})
    assert sorted(store.get_task_runtimes(jid)) == [0, 1]


def test_get_runtimes_by_instances_and_states(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {
        i: f.task_runtime(TaskState.RUNNING if i % 2 else TaskState.PENDING) for i in range(6)})
    assert sorted(store.get_task_runtimes(jid, instances=[1, 2, 9])) == [1, 2]
    assert sorted(store.get_task_runtimes(jid, states=[TaskState.RUNNING])) == [1, 3, 5]
    assert sorted(store.get_task_runtimes(jid, [0, 1, 2, 3],
                                          [TaskState.PENDING, TaskState.KILLED])) == [0, 2]
    assert store.get_task_runtimes(f.job_id()) == {}
    with pytest.raises(NotFound):
        store.get_task_runtime(jid, 99)


def test_update_runtime_cas(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {0: f.task_runtime()})
    rt = store.get_task_runtime(jid, 0)
    new = store.update_task_runtime(jid, 0, dataclasses.replace(rt, state=TaskState.RUNNING,
                                                                host="h1"))
    assert new.revision == 2
    assert store.get_task_runtime(jid, 0) == new
    with pytest.raises(Conflict):
        store.update_task_runtime(jid, 0, dataclasses.replace(rt, state=TaskState.KILLED))
    assert store.get_task_runtime(jid, 0) == new
    with pytest.raises(NotFound):
        store.update_task_runtime(jid, 5, rt)


def test_batched_writes_report_conflicts_and_missing(store: Store) -> None:
    jid, other = f.job_id(), f.job_id()
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(4)})
    store.create_task_runtimes(other, {0: f.task_runtime()})
    stale = store.get_task_runtime(jid, 3)
    store.update_task_runtime(jid, 3, stale)  # now at revision 2
    running = dataclasses.replace(f.task_runtime(TaskState.RUNNING), revision=1)
    writes = [RuntimeWrite(jid, i, running) for i in range(4)]
    writes += [RuntimeWrite(jid, 10, running), RuntimeWrite(other, 0, running)]
    result = store.write_task_runtimes(writes)
    assert set(result.written) == {TaskId(jid, i) for i in range(3)} | {TaskId(other, 0)}
    assert result.conflicts == {TaskId(jid, 3)}
    assert result.missing == {TaskId(jid, 10)}
    assert not result.ok
    assert all(rt.revision == 2 for rt in result.written.values())
    stored = store.get_task_runtimes(jid)
    assert [stored[i].state for i in range(4)] == [TaskState.RUNNING] * 3 + [TaskState.PENDING]
    assert stored[3].revision == 2
    assert store.get_task_runtime(other, 0).state is TaskState.RUNNING


def test_batched_writes_store_the_events_of_the_writes_applied(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(3)})
    store.update_task_runtime(jid, 2, store.get_task_runtime(jid, 2))  # now at revision 2
    running = dataclasses.replace(f.task_runtime(TaskState.RUNNING), revision=1)

    def events(i: int) -> tuple[PodEvent, ...]:
        return tuple(PodEvent(job_id=jid, instance=i, run_id=1, state=state,
                              goal_state=TaskState.SUCCEEDED, time=1000.0 + n)
                     for n, state in enumerate((TaskState.STARTING, TaskState.RUNNING)))

    result = store.write_task_runtimes([RuntimeWrite(jid, i, running, events(i))
                                        for i in range(3)])
    assert set(result.written) == {TaskId(jid, 0), TaskId(jid, 1)}
    assert result.conflicts == {TaskId(jid, 2)}
    for i in (0, 1):  # newest first
        assert store.get_pod_events(jid, i) == list(reversed(events(i)))
    assert store.get_pod_events(jid, 2) == []  # the write lost: its history did not happen


def test_batch_may_not_repeat_a_task(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {0: f.task_runtime()})
    rt = store.get_task_runtime(jid, 0)
    with pytest.raises(InvalidArgument):
        store.write_task_runtimes([RuntimeWrite(jid, 0, rt), RuntimeWrite(jid, 0, rt)])
    assert store.get_task_runtime(jid, 0) == rt
    assert store.write_task_runtimes([]).ok


def test_large_batch_round_trips(store: Store) -> None:
    jid = f.job_id()
    n = 2500  # more than one IN-list chunk
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(n)})
    current = store.get_task_runtimes(jid)
    result = store.write_task_runtimes([
        RuntimeWrite(jid, i, dataclasses.replace(rt, state=TaskState.LAUNCHED))
        for i, rt in current.items()])
    assert result.ok and len(result.written) == n
    assert set(rt.state for rt in store.get_task_runtimes(jid).values()) == {TaskState.LAUNCHED}


def test_delete_runtimes(store: Store) -> None:
    jid = f.job_id()
    store.create_task_runtimes(jid, {i: f.task_runtime() for i in range(4)})
    store.delete_task_runtimes(jid, [1, 2, 7])
    assert sorted(store.get_task_runtimes(jid)) == [0, 3]
    store.delete_task_runtimes(jid)
    store.delete_task_runtimes(jid)
    assert store.get_task_runtimes(jid) == {}
