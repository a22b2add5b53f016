"""The job manager's side of persistent volumes: which volume a launch uses, and the
loop that drives every volume record toward its goal (peloton/core/lifecycle/volume_states.py).

* `for_launch` (called by the placement processor for a stateful run, before the host is
  asked): the instance's live volume on that host if it has one, else a new record
  INITIALIZED / goal CREATED, whose id the launch carries; the host creates the directory
  with the run.  A volume an earlier run made CREATED must exist on the host: the launch
  says so, and a host that lost it fails the run instead of starting it on empty disk.
* `reconcile_once` (the `volumes` loop, every `interval` seconds) walks the volume table:
  a volume whose job is gone from storage gets goal DELETED (a job's volumes are deleted
  with the job, never before); then each record's (goal, state) action is carried out:
  WAIT -> CREATED once the instance's current run is RUNNING on the volume's host; DESTROY
  -> the host manager removes it from its host, then DELETED (the record is dropped when
  its job is gone, kept for GetVolume after an explicit DeleteVolume); DONE -> dropped
  once its job is gone.  A host that cannot be asked now is asked again next round.

With all-active job managers each member's loop walks only the volumes of the jobs it
drives (`owns`): a volume is its job's, written under the job's partition fence, so its
goal is carried out by that job's owner alone.

Writes are plain replaces of small records (storage/cluster_store.py VolumeStore): the
loop is the only writer of a volume's state, the API writes only its goal, and each round
re-derives everything from the table, so a lost race costs one round.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable

from peloton.common.clock import Clock
from peloton.common.loop import Loop
from peloton.core.errors import AlreadyExists, NotFound, PelotonError
from peloton.core.lifecycle.volume_states import (
    VolumeAction,
    VolumeEvent,
    on_event,
    volume_action,
    volume_id,
)
from peloton.core.model.storage_records import VolumeInfo, VolumeState
from peloton.core.model.task import TaskSpec
from peloton.core.ports import HostManagerPort
from peloton.core.states import TaskState
from peloton.jobmgr.cache import JobCache
from peloton.storage.store import Store

log = logging.getLogger(__name__)
V = VolumeState
#: Seconds between rounds of the volume loop.
INTERVAL = 1.0


class VolumeKeeper:
    """Volume records of stateful instances, and the loop that carries out their goals."""

    def __init__(self, store: Store, cache: JobCache, hostmgr: HostManagerPort, clock: Clock,
                 interval: float = INTERVAL, *,
                 owns: Callable[[str], bool] = lambda job_id: True) -> None:
        self.store = store
        #: Whether this job manager drives a job (its volumes are then this loop's).
        self.owns = owns
        self.cache = cache
        self.hostmgr = hostmgr
        self.clock = clock
        self._loop = Loop("volumes", self.reconcile_once, interval=interval, log=log)

    def start(self) -> None:
        """Begin the volume loop."""
        self._loop.start()

    def stop(self) -> None:
        """Stop the volume loop."""
        self._loop.stop()

    # -- launches -----------------------------------------------------------------------------
    def for_launch(self, job_id: str, instance: int, run: int, hostname: str,
                   spec: TaskSpec) -> tuple[str, bool]:
        """(volume id, whether it was CREATED already) for a stateful run launched on
        `hostname`: the instance's live volume there, else a new INITIALIZED record."""
        assert spec.volume is not None
        for vol in self.store.get_volumes(job_id):
            if (vol.instance == instance and vol.hostname == hostname
                    and vol.goal_state is V.CREATED):
                return vol.volume_id, vol.state is V.CREATED
        now = self.clock.wall()
        new = VolumeInfo(volume_id=volume_id(job_id, instance, hostname, run), job_id=job_id,
                         instance=instance, hostname=hostname, state=V.INITIALIZED,
                         goal_state=V.CREATED, container_path=spec.volume.container_path,
                         size_mb=spec.volume.size_mb, create_time=now, update_time=now)
        try:
            self.store.create_volume(new)
        except AlreadyExists:  # this very run was launched before (a retried round)
            old = self.store.get_volume(new.volume_id)
            return old.volume_id, old.state is V.CREATED
        log.info("volume %s of %s-%d on %s: INITIALIZED", new.volume_id, job_id, instance,
                 hostname)
        return new.volume_id, False

    def delete(self, vol: VolumeInfo) -> None:
        """Set a volume's goal DELETED (DeleteVolume, once the caller checked it is not in
        use); the loop has its host remove it.  Idempotent."""
        if vol.goal_state is not V.DELETED:
            self._write(dataclasses.replace(vol, goal_state=V.DELETED))

    # -- the loop -----------------------------------------------------------------------------
    def reconcile_once(self) -> int:
        """One pass over the volume table; returns how many records it changed."""
        gone: dict[str, bool] = {}
        destroy: dict[str, list[VolumeInfo]] = defaultdict(list)
        changed = 0
        for vol in self.store.get_volumes():
            if not self.owns(vol.job_id):
                continue
            job_gone = gone.setdefault(vol.job_id, self._job_gone(vol.job_id))
            if job_gone and vol.goal_state is not V.DELETED:
                vol = self._write(dataclasses.replace(vol, goal_state=V.DELETED))
                changed += 1
            action = volume_action(vol.goal_state, vol.state)
            if action is VolumeAction.WAIT and self._run_started(vol):
                to = on_event(VolumeEvent.RUN_STARTED, vol.goal_state, vol.state)
                if to is not None:
                    self._write(dataclasses.replace(vol, state=to))
                    changed += 1
            elif action is VolumeAction.DESTROY:
                destroy[vol.hostname].append(vol)
            elif action is VolumeAction.DONE and job_gone:
                self.store.delete_volume(vol.volume_id)
                changed += 1
        for hostname, vols in destroy.items():
            changed += self._destroy(hostname, vols, gone)
        return changed

    def _destroy(self, hostname: str, vols: list[VolumeInfo], gone: dict[str, bool]) -> int:
        try:
            kept = set(self.hostmgr.destroy_volumes(hostname, [v.volume_id for v in vols]))
        except PelotonError as exc:
            log.info("volumes on %s not removed yet: %s", hostname, exc)
            return 0
        changed = 0
        for vol in vols:
            if vol.volume_id in kept:
                continue
            if gone.get(vol.job_id):
                self.store.delete_volume(vol.volume_id)
            else:
                to = on_event(VolumeEvent.DESTROYED, vol.goal_state, vol.state)
                if to is not None:
                    self._write(dataclasses.replace(vol, state=to))
            log.info("volume %s of %s-%d removed from %s", vol.volume_id, vol.job_id,
                     vol.instance, hostname)
            changed += 1
        return changed

    def _write(self, vol: VolumeInfo) -> VolumeInfo:
        vol = dataclasses.replace(vol, update_time=self.clock.wall())
        self.store.update_volume(vol)
        return vol

    def _job_gone(self, job_id: str) -> bool:
        if self.cache.get(job_id) is not None:
            return False
        try:
            self.store.get_job_runtime(job_id)
        except NotFound:
            return True
        return False

    def _run_started(self, vol: VolumeInfo) -> bool:
        """The instance's current run is RUNNING on the volume's host (jobs this job manager
        owns; another one marks its own)."""
        job = self.cache.get(vol.job_id)
        rt = job.get_task(vol.instance) if job is not None else None
        return rt is not None and rt.state is TaskState.RUNNING and rt.host == vol.hostname
