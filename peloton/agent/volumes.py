"""Persistent volumes on the agent's host: directories that outlive the runs using them.

Layout (`root` is `<work-dir>/volumes`, or `<sandbox root>.volumes` when sandboxes live
outside the work dir, so a task's user can always walk to it)::

    <root>/<volume id>/             root-owned, 0711
    <root>/<volume id>/volume.json  what the volume is (id, run that made it, size, path)
    <root>/<volume id>/data/        the volume itself, owned by the run's user, 0700

A run with a volume gets a symlink `<sandbox>/<container path>` -> `<root>/<id>/data`,
made by the agent before it asks the spawner for the run's supervisor (the supervisor
accepts a sandbox that already exists and only then takes ownership of it).  The link
is root's, in the sticky sandbox, so the task cannot replace it.  There is no mount
namespace here: the task sees its volume at its sandbox-relative path (`/data` and `data`
both mean `$MESOS_SANDBOX/data`), as Mesos did for persistent volumes.

Size: a directory has no quota on these machines (no project quotas; a loop-mounted file
system needs mount rights the agent does not assume), so the size is enforced where it
can be: the host manager and the resource manager count it as disk of the host and of
the pool (TaskSpec.footprint), and the agent refuses to create a volume larger than the
free space of its file system.  A task can still write past its size; `usage_mb` says
how much it uses.

Identity: each run may have another uid (dynamic uids), so at every launch the volume's
files are given to the run's user (lchown over the tree, never following a link), when
the agent is root; otherwise tasks run as the agent's user and own it already.

Destroying is idempotent and refuses a volume a live run uses.  A run whose volume was
created by an earlier run (`VolumeMount.created`) but is missing fails with a message
saying the volume was lost: it never starts on an empty directory.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from peloton.agent.cache_files import make_parents
from peloton.agent.model import RunSpec, VolumeMount
from peloton.core.errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from peloton.core.lifecycle.volume_states import sandbox_relative

log = logging.getLogger(__name__)

DATA = "data"
META = "volume.json"


def volumes_root(work_dir: Path, sandbox_root: Path) -> Path:
    """Where an agent keeps its volumes: beside its sandboxes, so tasks can reach both."""
    if sandbox_root == work_dir / "sandboxes":
        return work_dir / "volumes"
    return sandbox_root.with_name(sandbox_root.name + ".volumes")


def _free_mb(path: Path) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / (1024 * 1024)


class Volumes:
    """The persistent volumes under one root."""

    def __init__(self, root: Path, *, free_mb: Callable[[Path], float] = _free_mb,
                 wall: Callable[[], float] = time.time) -> None:
        self.root = root
        self._free_mb = free_mb
        self._wall = wall
        self._root_owned = os.geteuid() == 0
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)  # tasks pass through to their volume, but cannot list others

    def _dir(self, volume_id: str) -> Path:
        if not volume_id or "/" in volume_id or volume_id in (".", ".."):
            raise InvalidArgument(f"bad volume id {volume_id!r}", field="volume.volume_id")
        return self.root / volume_id

    def path(self, volume_id: str) -> Path:
        """The directory a volume's runs see."""
        return self._dir(volume_id) / DATA

    def exists(self, volume_id: str) -> bool:
        """Whether the volume is on this host."""
        return self.path(volume_id).is_dir()

    def ids(self) -> list[str]:
        """Every volume on this host, sorted."""
        return sorted(e.name for e in os.scandir(self.root) if e.is_dir(follow_symlinks=False))

    def attach(self, spec: RunSpec, sandbox: Path) -> None:
        """Create the run's volume if new, give it to the run's user and link it into the
        sandbox (made here, before the supervisor).  Raises FailedPrecondition for a lost
        volume, ResourceExhausted when a new one does not fit, InvalidArgument for a bad
        container path."""
        vol = spec.volume
        if vol is None:
            return
        rel = sandbox_relative(vol.container_path)
        data = self.path(vol.volume_id)
        if not data.is_dir():
            if vol.created:
                raise FailedPrecondition(
                    f"persistent volume {vol.volume_id} was lost: this host no longer has it "
                    f"(expected at {data})", field="volume")
            self._create(vol, spec.run_id)
        if self._root_owned and spec.uid >= 0:
            self._give(data, spec.uid, spec.gid)
        link = sandbox / rel
        sandbox.mkdir(mode=0o700, exist_ok=True)
        make_parents(sandbox, link)  # 0755: the task walks through them to its volume
        if link.is_symlink():
            link.unlink()
        link.symlink_to(data, target_is_directory=True)

    def _create(self, vol: VolumeMount, run_id: str) -> None:
        free = self._free_mb(self.root)
        if vol.size_mb > free:
            raise ResourceExhausted(
                f"persistent volume {vol.volume_id} of {vol.size_mb:g} MB does not fit: "
                f"{free:.0f} MB free under {self.root}", field="volume.sizeMB")
        top = self._dir(vol.volume_id)
        top.mkdir(mode=0o711, exist_ok=True)
        os.chmod(top, 0o711)
        meta = {"volume_id": vol.volume_id, "created_by": run_id, "size_mb": vol.size_mb,
                "container_path": vol.container_path, "create_time": self._wall()}
        fd = os.open(top / META, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(meta, f)
        (top / DATA).mkdir(mode=0o700, exist_ok=True)
        log.info("created persistent volume %s (%g MB) for %s", vol.volume_id, vol.size_mb,
                 run_id)

    @staticmethod
    def _give(data: Path, uid: int, gid: int) -> None:
        st = os.lstat(data)
        if (st.st_uid, st.st_gid) == (uid, gid):
            return  # the last run was the same user: nothing to walk
        os.lchown(data, uid, gid)
        for base, dirs, files in os.walk(data):  # never follows links
            for name in (*dirs, *files):
                os.lchown(os.path.join(base, name), uid, gid)

    def usage_mb(self, volume_id: str) -> float:
        """What the volume's files take (apparent sizes), in MB."""
        total = 0
        for base, _dirs, files in os.walk(self.path(volume_id)):
            for name in files:
                try:
                    total += os.lstat(os.path.join(base, name)).st_size
                except FileNotFoundError:
                    continue
        return total / (1024 * 1024)

    def destroy(self, volume_id: str) -> None:
        """Remove a volume and its files; idempotent (links inside it are not followed)."""
        top = self._dir(volume_id)
        if top.is_dir():
            shutil.rmtree(top)
            log.info("destroyed persistent volume %s", volume_id)
