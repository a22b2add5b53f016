"""The partition-routed store's table is total: every write of the Store is routed, refused
as a write no job manager makes, or about fencing itself, and its partition comes from
where the table says.  Then the routes of the writes that are not of a job id: a cron
job's (its name's partition), a volume delete (its job's) and a chore (partition 0)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from peloton.common.fencing import READ_PREFIXES
from peloton.core.cron.model import CollisionPolicy, CronJob, run_job_id, schedule_partition
from peloton.core.errors import InvalidArgument
from peloton.core.model.events import PodEvent
from peloton.core.model.ids import new_id
from peloton.core.model.job import JobSpec
from peloton.core.model.storage_records import VolumeInfo, VolumeState
from peloton.core.model.task import TaskSpec
from peloton.core.partitions import CHORE_PARTITION, partition_of
from peloton.core.states import JobType, TaskState
from peloton.storage import StoreOptions, open_store
from peloton.storage.leader_store import FencedOut
from peloton.storage.partition_fences import (
    CLUSTER_WRITES,
    JOB_WRITES,
    META,
    By,
    PartitionFences,
    PartitionNotHeld,
)
from peloton.storage.store import Store

#: The first parameter each kind of routing reads the job id from (or its items'); a chore
#: names no job.
FIRST_PARAM = {By.JOB_ID: {"job_id"}, By.ITEM: {"update", "secret", "volume"},
               By.BATCH: {"writes", "events"}, By.UPDATE: {"event", "update_id"},
               By.VOLUME: {"volume_id"}, By.CRON: {"job", "name"}, By.CHORE: {"now"}}
COUNT = 4


def store_writes() -> dict[str, list[str]]:
    return {name: list(inspect.signature(getattr(Store, name)).parameters)[1:]
            for name in dir(Store)
            if not name.startswith(("_", *READ_PREFIXES)) and callable(getattr(Store, name))}


def test_every_write_of_the_store_is_classified_once() -> None:
    writes = set(store_writes())
    routed, cluster = set(JOB_WRITES), set(CLUSTER_WRITES)
    assert writes == routed | cluster | META, "classify the new write in partition_fences.py"
    assert not routed & cluster and not routed & META and not cluster & META


def test_each_routed_write_names_its_job_where_the_table_says() -> None:
    params = store_writes()
    for name, by in JOB_WRITES.items():
        assert params[name][0] in FIRST_PARAM[by], (name, by, params[name])


def test_writes_with_a_job_id_argument_are_never_taken_for_cluster_wide() -> None:
    params = store_writes()
    assert not [n for n in CLUSTER_WRITES if "job_id" in params[n]]


def test_a_chore_names_no_job() -> None:
    params = store_writes()
    assert [n for n, by in JOB_WRITES.items() if by is By.CHORE] == ["expire_pod_events"]
    assert all("job_id" not in params[n] for n, by in JOB_WRITES.items() if by is By.CHORE)


@pytest.fixture
def store() -> Iterator[Store]:
    s = open_store("sqlite://", StoreOptions(bootstrap=True, sqlite_threads=0))
    yield s
    s.close()


def name_in(partition: int) -> str:
    return next(n for n in (f"www/prod/cron-{i}" for i in range(1000))
                if schedule_partition(n, COUNT) == partition)


def cron_job(name: str) -> CronJob:
    template = JobSpec(name="run", type=JobType.BATCH, instance_count=1,
                       default_task=TaskSpec(name="t"))
    return CronJob(name, "* * * * *", CollisionPolicy.KILL_EXISTING, template, created_ms=0,
                   last_due_ms=0)


def test_a_cron_job_is_written_under_its_names_partition(store: Store) -> None:
    mine, theirs = name_in(1), name_in(2)
    a = PartitionFences(store, "a", count=COUNT)
    a.claim(1, 10)
    routed = a.routed()
    created = routed.create_cron_job(cron_job(mine))
    with pytest.raises(PartitionNotHeld):  # the owner of partition 2 schedules it
        routed.create_cron_job(cron_job(theirs))
    assert [j.name for j in store.get_cron_jobs()] == [mine]
    # Its runs are jobs of the same partition, so the schedule's owner creates them.
    assert {partition_of(run_job_id(mine, str(t), COUNT), COUNT) for t in range(20)} == {1}
    updated = routed.update_cron_job(created)
    PartitionFences(store, "b", count=COUNT).claim(1, 11)  # b took partition 1 over
    with pytest.raises(FencedOut):
        routed.update_cron_job(updated)
    with pytest.raises(FencedOut):
        routed.delete_cron_job(mine)
    assert store.get_cron_job(mine).revision == updated.revision


def test_a_volume_delete_is_fenced_by_its_jobs_partition(store: Store) -> None:
    jid = next(j for j in iter(new_id, None) if partition_of(j, COUNT) == 3)
    vol = VolumeInfo(volume_id="v-1", job_id=jid, instance=0, hostname="h", state=VolumeState.CREATED,
                     goal_state=VolumeState.DELETED, container_path="/data", size_mb=1,
                     create_time=0.0, update_time=0.0)
    store.create_volume(vol)
    other = PartitionFences(store, "other", count=COUNT)
    other.claim(0, 10)
    with pytest.raises(PartitionNotHeld):
        other.routed().delete_volume("v-1")
    owner = PartitionFences(store, "owner", count=COUNT)
    owner.claim(3, 10)
    owner.routed().delete_volume("v-1")
    assert store.get_volumes() == []
    owner.routed().delete_volume("v-1")  # gone already: nothing to delete, nothing to fence


def test_a_chore_is_written_only_by_the_holder_of_partition_zero(store: Store) -> None:
    others = PartitionFences(store, "others", count=COUNT)
    for p in range(COUNT):
        if p != CHORE_PARTITION:
            others.claim(p, 10)
    with pytest.raises(PartitionNotHeld):
        others.routed().expire_pod_events()
    first = PartitionFences(store, "first", count=COUNT)
    first.claim(CHORE_PARTITION, 10)
    assert first.routed().expire_pod_events() == 0
    PartitionFences(store, "second", count=COUNT).claim(CHORE_PARTITION, 11)
    with pytest.raises(FencedOut):  # partition 0 moved: the old holder's chore is refused
        first.routed().expire_pod_events()


def pod_event(job_id: str, run: int) -> PodEvent:
    return PodEvent(job_id=job_id, instance=0, run_id=run, state=TaskState.RUNNING,
                    goal_state=TaskState.SUCCEEDED, time=float(run))


def test_a_batch_is_fenced_by_its_one_partition_and_a_mixed_batch_is_refused_whole(
        store: Store) -> None:
    ids = iter(new_id, None)
    mine = [next(j for j in ids if partition_of(j, COUNT) == 2) for _ in range(2)]
    theirs = next(j for j in ids if partition_of(j, COUNT) == 3)
    fences = PartitionFences(store, "a", count=COUNT)
    fences.claim(2, 10)
    routed = fences.routed()
    routed.add_pod_events([pod_event(mine[0], 1), pod_event(mine[1], 1), pod_event(mine[0], 2)])
    with pytest.raises(InvalidArgument, match="spans job partitions"):
        routed.add_pod_events([pod_event(mine[0], 3), pod_event(theirs, 1), pod_event(mine[1], 2)])
    with pytest.raises(PartitionNotHeld):
        routed.add_pod_events([pod_event(theirs, 1)])
    assert [e.run_id for e in store.get_pod_events(mine[0], 0)] == [2, 1]
    assert [e.run_id for e in store.get_pod_events(mine[1], 0)] == [1]
    assert store.get_pod_events(theirs, 0) == []
