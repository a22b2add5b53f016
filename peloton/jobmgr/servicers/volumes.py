"""VolumeService, v0 (`peloton.api.v0.volume.svc`) and v1alpha: list, get and delete the
persistent volumes of stateful jobs.

Answers as Peloton's volumesvc handler did (pkg/jobmgr/volumesvc/handler.go, before Peloton
dropped it with its Mesos volume code):

* ListVolumes: the job's volumes, keyed by volume id; NOT_FOUND "job not found" for a job
  that does not exist.
* GetVolume: NOT_FOUND "volume not found" for an empty or unknown id.
* DeleteVolume: NOT_FOUND "volume not found" as for Get; INTERNAL "volume is being used"
  while the owning instance's run, or its goal, is not terminal (core rule
  `delete_refusal`); otherwise the goal becomes DELETED and the volume loop
  (peloton/jobmgr/volumes.py) has the host remove it.  The record stays, DELETED, so Get
  shows what happened; it goes with its job.

v1alpha's messages name the owner as a pod (`<job id>-<instance>`) and the goal as
`desired_state`; the rules are the same.
"""

from __future__ import annotations

from typing import Any

import grpc

from peloton.api import peloton_texts as texts
from peloton.api.convert.common import time_to_rfc3339
from peloton.api.gen.peloton.api.v0.volume import volume_pb2 as v0
from peloton.api.gen.peloton.api.v0.volume.svc import volume_svc_pb2 as v0_svc
from peloton.api.gen.peloton.api.v1alpha.volume import volume_pb2 as v1
from peloton.api.gen.peloton.api.v1alpha.volume.svc import volume_svc_pb2 as v1_svc
from peloton.api.grpc_errors import PelotonStatus
from peloton.core.errors import InvalidArgument, NotFound
from peloton.core.lifecycle.volume_states import delete_refusal
from peloton.core.model.storage_records import VolumeInfo, VolumeState
from peloton.core.model.task import TaskRuntime
from peloton.jobmgr.cache import JobCache
from peloton.jobmgr.volumes import VolumeKeeper
from peloton.storage.store import Store

V = VolumeState
V0_STATES = {V.INITIALIZED: v0.INITIALIZED, V.CREATED: v0.CREATED, V.DELETED: v0.DELETED}
V1_STATES = {V.INITIALIZED: v1.VOLUME_STATE_INITIALIZED, V.CREATED: v1.VOLUME_STATE_CREATED,
             V.DELETED: v1.VOLUME_STATE_DELETED}


def _not_found() -> PelotonStatus:
    return PelotonStatus(grpc.StatusCode.NOT_FOUND, texts.VOLUME_NOT_FOUND)


class VolumeOps:
    """The rules both API versions share."""

    def __init__(self, store: Store, cache: JobCache, keeper: VolumeKeeper) -> None:
        self.store = store
        self.cache = cache
        self.keeper = keeper

    def list(self, job_id: str) -> list[VolumeInfo]:
        """The job's volumes; NOT_FOUND "job not found" for an unknown job."""
        try:
            if self.cache.get(job_id) is None:
                self.store.get_job_runtime(job_id)
        except (NotFound, InvalidArgument):
            raise PelotonStatus(grpc.StatusCode.NOT_FOUND, texts.JOB_NOT_FOUND) from None
        return self.store.get_volumes(job_id)

    def get(self, volume_id: str) -> VolumeInfo:
        """One volume; NOT_FOUND "volume not found"."""
        if not volume_id:
            raise _not_found()
        try:
            return self.store.get_volume(volume_id)
        except NotFound:
            raise _not_found() from None

    def delete(self, volume_id: str) -> None:
        """Goal DELETED, unless the instance that owns it may still run on it."""
        vol = self.get(volume_id)
        rt = self._owner(vol)
        used = (rt is not None and vol.goal_state is V.CREATED
                and vol.hostname in (rt.host, rt.desired_host))
        if used and rt is not None and delete_refusal(rt.state, rt.goal_state) is not None:
            raise PelotonStatus(grpc.StatusCode.INTERNAL, texts.VOLUME_IN_USE)
        self.keeper.delete(vol)

    def _owner(self, vol: VolumeInfo) -> TaskRuntime | None:
        job = self.cache.get(vol.job_id)
        if job is not None:
            return job.get_task(vol.instance)
        try:
            return self.store.get_task_runtime(vol.job_id, vol.instance)
        except NotFound:
            return None


def volume_to_v0(vol: VolumeInfo) -> v0.PersistentVolumeInfo:
    """A volume record as v0's PersistentVolumeInfo."""
    out = v0.PersistentVolumeInfo(
        instanceId=vol.instance, hostname=vol.hostname, state=V0_STATES[vol.state],
        goalState=V0_STATES[vol.goal_state], sizeMB=round(vol.size_mb),
        containerPath=vol.container_path, createTime=time_to_rfc3339(vol.create_time),
        updateTime=time_to_rfc3339(vol.update_time))
    out.id.value = vol.volume_id
    out.jobId.value = vol.job_id
    return out


def volume_to_v1(vol: VolumeInfo) -> v1.PersistentVolumeInfo:
    """A volume record as v1alpha's PersistentVolumeInfo."""
    out = v1.PersistentVolumeInfo(
        hostname=vol.hostname, state=V1_STATES[vol.state],
        desired_state=V1_STATES[vol.goal_state], size_mb=round(vol.size_mb),
        container_path=vol.container_path, create_time=time_to_rfc3339(vol.create_time),
        update_time=time_to_rfc3339(vol.update_time))
    out.volume_id.value = vol.volume_id
    out.pod_name.value = f"{vol.job_id}-{vol.instance}"
    return out


class VolumeServicer:
    """peloton.api.v0.volume.svc.VolumeService."""

    def __init__(self, ops: VolumeOps) -> None:
        self.ops = ops

    def ListVolumes(self, request: v0_svc.ListVolumesRequest,
                    context: Any) -> v0_svc.ListVolumesResponse:
        out = v0_svc.ListVolumesResponse()
        for vol in self.ops.list(request.jobId.value):
            out.volumes[vol.volume_id].CopyFrom(volume_to_v0(vol))
        return out

    def GetVolume(self, request: v0_svc.GetVolumeRequest,
                  context: Any) -> v0_svc.GetVolumeResponse:
        return v0_svc.GetVolumeResponse(result=volume_to_v0(self.ops.get(request.id.value)))

    def DeleteVolume(self, request: v0_svc.DeleteVolumeRequest,
                     context: Any) -> v0_svc.DeleteVolumeResponse:
        self.ops.delete(request.id.value)
        return v0_svc.DeleteVolumeResponse()


class V1VolumeServicer:
    """peloton.api.v1alpha.volume.svc.VolumeService."""

    def __init__(self, ops: VolumeOps) -> None:
        self.ops = ops

    def ListVolumes(self, request: v1_svc.ListVolumesRequest,
                    context: Any) -> v1_svc.ListVolumesResponse:
        out = v1_svc.ListVolumesResponse()
        for vol in self.ops.list(request.job_id.value):
            out.volumes[vol.volume_id].CopyFrom(volume_to_v1(vol))
        return out

    def GetVolume(self, request: v1_svc.GetVolumeRequest,
                  context: Any) -> v1_svc.GetVolumeResponse:
        return v1_svc.GetVolumeResponse(
            result=volume_to_v1(self.ops.get(request.volume_id.value)))

    def DeleteVolume(self, request: v1_svc.DeleteVolumeRequest,
                     context: Any) -> v1_svc.DeleteVolumeResponse:
        self.ops.delete(request.volume_id.value)
        return v1_svc.DeleteVolumeResponse()
