"""The job manager's persistent volumes on the deterministic harness: a stateful instance's
first launch makes an INITIALIZED volume, its run RUNNING makes it CREATED, every later run
on the host uses the same volume (and says it must exist), DeleteVolume follows Peloton's
in-use rule and texts, and deleting the job has the host remove the volume."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import grpc
import pytest

from peloton.api import peloton_texts as texts
from peloton.api.grpc_errors import PelotonStatus
from peloton.core.model.job import JobSpec
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.storage_records import VolumeState
from peloton.core.model.task import VolumeSpec
from peloton.core.states import TaskState
from peloton.jobmgr.servicers.volumes import VolumeOps, volume_to_v0, volume_to_v1
from tests.unit.jobmgr.harness import Harness, job_spec

V = VolumeState


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness(hosts=2)
    try:
        yield harness
    finally:
        harness.close()


def stateful(instances: int = 1) -> JobSpec:
    spec = job_spec(instances)
    return dataclasses.replace(spec, default_task=dataclasses.replace(
        spec.default_task, volume=VolumeSpec("/data", 20)))


def launches(h: Harness, job_id: str) -> list[tuple[str, LaunchSpec]]:
    return [(host, s) for host, s in h.hosts.launches if s.run_id.startswith(job_id)]


def test_a_stateful_instance_keeps_one_volume_on_its_host(h: Harness) -> None:
    job_id = h.create(stateful())
    h.run_due()
    (host, first), = launches(h, job_id)
    assert first.volume_id and not first.volume_created
    (vol,) = h.store.get_volumes(job_id)
    assert (vol.volume_id, vol.hostname, vol.state, vol.goal_state) == (
        first.volume_id, host, V.INITIALIZED, V.CREATED)
    assert (vol.container_path, vol.size_mb, vol.instance) == ("/data", 20, 0)

    h.jm.volumes.reconcile_once()
    assert h.store.get_volume(vol.volume_id).state is V.CREATED

    h.jm.tasks.restart(job_id, [(0, 1)])
    h.settle(5)
    later = launches(h, job_id)[1:]
    assert later and all(s.volume_id == vol.volume_id and s.volume_created and where == host
                         for where, s in later)
    assert [v.volume_id for v in h.store.get_volumes(job_id)] == [vol.volume_id]


def test_the_volume_counts_as_disk_for_placement(h: Harness) -> None:
    spec = stateful()
    task = spec.default_task
    assert task.footprint.disk_mb == task.resources.disk_mb + 20


def test_delete_volume_follows_pelotons_rules_and_texts(h: Harness) -> None:
    ops = VolumeOps(h.store, h.jm.cache, h.jm.volumes)
    for bad in ("", "no-such-volume"):
        with pytest.raises(PelotonStatus) as err:
            ops.delete(bad)
        assert (err.value.code, str(err.value)) == (grpc.StatusCode.NOT_FOUND,
                                                    texts.VOLUME_NOT_FOUND)
    with pytest.raises(PelotonStatus) as err:
        ops.list("6a8f1c4e-0000-4000-8000-000000000000")
    assert (err.value.code, str(err.value)) == (grpc.StatusCode.NOT_FOUND, texts.JOB_NOT_FOUND)

    job_id = h.create(stateful())
    h.run_due()
    h.jm.volumes.reconcile_once()
    (vol,) = ops.list(job_id)
    with pytest.raises(PelotonStatus) as err:
        ops.delete(vol.volume_id)  # its instance runs on it
    assert (err.value.code, str(err.value)) == (grpc.StatusCode.INTERNAL, texts.VOLUME_IN_USE)

    h.jm.tasks.stop(job_id, [(0, 1)])
    h.settle(5)
    assert h.task(job_id).state is TaskState.KILLED
    ops.delete(vol.volume_id)
    assert ops.get(vol.volume_id).goal_state is V.DELETED
    h.jm.volumes.reconcile_once()
    assert h.hosts.destroyed == [(vol.hostname, vol.volume_id)]
    gone = ops.get(vol.volume_id)  # kept, DELETED, while its job exists
    assert (gone.state, gone.goal_state) == (V.DELETED, V.DELETED)
    assert volume_to_v0(gone).state == 3 and volume_to_v1(gone).state == 3
    assert volume_to_v1(gone).pod_name.value == f"{job_id}-0"


def test_deleting_the_job_removes_its_volumes_from_their_hosts(h: Harness) -> None:
    job_id = h.create(stateful(2))
    h.run_due()
    h.jm.volumes.reconcile_once()
    vols = {v.volume_id: v.hostname for v in h.store.get_volumes(job_id)}
    assert len(vols) == 2
    h.jm.volumes.reconcile_once()
    assert h.hosts.destroyed == []  # the job lives: nothing is removed

    h.jm.jobs.delete(job_id, force=True)
    h.settle(10)
    # A host that still runs on a volume keeps it; the loop asks again next round.
    h.hosts.volumes_in_use = {next(iter(vols))}
    h.jm.volumes.reconcile_once()
    h.hosts.volumes_in_use = set()
    h.jm.volumes.reconcile_once()
    assert sorted(h.hosts.destroyed) == sorted((host, v) for v, host in vols.items())
    assert h.store.get_volumes(job_id) == []
