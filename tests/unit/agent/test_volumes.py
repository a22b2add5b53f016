"""The agent's persistent volumes (peloton/agent/volumes.py): created once, linked into each
run's sandbox, given to each run's user, refused when too big or lost, destroyed on request."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from peloton.agent.model import RunSpec, VolumeMount
from peloton.agent.volumes import Volumes, volumes_root
from peloton.core.errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from peloton.core.model.task import CommandSpec

JOB = "6a8f1c4e-0000-4000-8000-000000000000"


def run(n: int, *, created: bool = False, size: float = 10, path: str = "/data",
        uid: int = -1) -> RunSpec:
    return RunSpec(run_id=f"{JOB}-0-{n}", command=CommandSpec("true"), uid=uid, gid=uid,
                   volume=VolumeMount("vol-1", path, size, created))


def test_a_volume_outlives_its_runs(tmp_path: Path) -> None:
    vols = Volumes(tmp_path / "volumes")
    (tmp_path / "sandboxes").mkdir()  # the agent's sandbox root
    first = tmp_path / "sandboxes" / "r1"
    vols.attach(run(1), first)
    (first / "data" / "file").write_text("kept")
    assert (first / "data").is_symlink() and vols.ids() == ["vol-1"]

    second = tmp_path / "sandboxes" / "r2"
    vols.attach(run(2, created=True), second)
    assert (second / "data" / "file").read_text() == "kept"
    assert vols.usage_mb("vol-1") > 0

    vols.destroy("vol-1")
    vols.destroy("vol-1")  # idempotent
    assert vols.ids() == [] and not (second / "data").exists()


def test_nested_container_paths_make_their_parents(tmp_path: Path) -> None:
    vols = Volumes(tmp_path / "volumes")
    old = os.umask(0o077)  # the agent's umask must not close the way to the volume
    try:
        vols.attach(run(1, path="var/lib/db"), tmp_path / "sb")
    finally:
        os.umask(old)
    assert (tmp_path / "sb" / "var" / "lib" / "db").is_symlink()
    for parent in ("var", "var/lib"):
        assert stat.S_IMODE(os.stat(tmp_path / "sb" / parent).st_mode) == 0o755


def test_a_lost_volume_fails_the_run_instead_of_starting_empty(tmp_path: Path) -> None:
    vols = Volumes(tmp_path / "volumes")
    with pytest.raises(FailedPrecondition, match="was lost"):
        vols.attach(run(3, created=True), tmp_path / "sb")
    assert vols.ids() == []


def test_a_volume_larger_than_the_free_disk_is_refused(tmp_path: Path) -> None:
    vols = Volumes(tmp_path / "volumes", free_mb=lambda _p: 5.0)
    with pytest.raises(ResourceExhausted, match="of 10 MB does not fit: 5 MB free"):
        vols.attach(run(1), tmp_path / "sb")


def test_bad_paths_and_ids_are_refused(tmp_path: Path) -> None:
    vols = Volumes(tmp_path / "volumes")
    with pytest.raises(InvalidArgument):
        vols.attach(run(1, path="../escape"), tmp_path / "sb")
    with pytest.raises(InvalidArgument):
        vols.destroy("../x")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
def test_each_run_gets_the_volume_as_its_own_user(tmp_path: Path) -> None:
    vols = Volumes(tmp_path / "volumes")
    vols.attach(run(1, uid=70123), tmp_path / "a")
    (vols.path("vol-1") / "f").write_text("x")
    vols.attach(run(2, created=True, uid=70124), tmp_path / "b")
    assert os.lstat(vols.path("vol-1")).st_uid == 70124
    assert os.lstat(vols.path("vol-1") / "f").st_uid == 70124


def test_volumes_live_beside_the_sandboxes(tmp_path: Path) -> None:
    assert volumes_root(tmp_path, tmp_path / "sandboxes") == tmp_path / "volumes"
    elsewhere = Path("/var/lib/peloton/sandboxes/abc")
    assert volumes_root(tmp_path, elsewhere) == Path("/var/lib/peloton/sandboxes/abc.volumes")
