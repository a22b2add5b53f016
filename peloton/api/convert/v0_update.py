"""v0 update messages <-> core: UpdateConfig <-> UpdateSpec, UpdateInfo/UpdateStatus out.

Counts in UpdateStatus follow Peloton: done and failed are the instances in
those lists, remaining is total minus both.  State INVALID (0) is refused
on the way in and never written.
"""

from __future__ import annotations

import math
from typing import cast

from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.states import WorkflowState

_TO_V0: dict[WorkflowState, update_pb2.State] = {
    s: cast(update_pb2.State, update_pb2.State.Value(s.value)) for s in WorkflowState}
_FROM_V0: dict[int, WorkflowState] = {int(v): k for k, v in _TO_V0.items()}


def update_state_to_v0(state: WorkflowState) -> update_pb2.State:
    """Core workflow state -> v0 update.State (same names)."""
    return _TO_V0[state]


def update_state_from_v0(value: int, field: str = "state") -> WorkflowState:
    """v0 update.State -> core (INVALID is refused)."""
    try:
        return _FROM_V0[value]
    except KeyError:
        raise InvalidArgument(f"{field}: not an update state: {value}", field=field) from None


def update_spec_from_v0(config: update_pb2.UpdateConfig, field: str = "updateConfig") -> UpdateSpec:
    """A v0 UpdateConfig -> core UpdateSpec (batchPercentage must be within 0..100)."""
    pct = config.batchPercentage
    if not math.isfinite(pct) or not 0 <= pct <= 100:
        raise InvalidArgument(f"{field}.batchPercentage must be within 0..100, got {pct}",
                              field=f"{field}.batchPercentage")
    return UpdateSpec(batch_size=config.batchSize, batch_percentage=pct,
                      rollback_on_failure=config.rollbackOnFailure,
                      max_instance_attempts=config.maxInstanceAttempts,
                      max_failure_instances=config.maxFailureInstances,
                      start_paused=config.startPaused, in_place=config.inPlace,
                      start_tasks=config.startTasks, stop_before_update=config.stopBeforeUpdate)


def update_spec_to_v0(spec: UpdateSpec) -> update_pb2.UpdateConfig:
    """A core UpdateSpec -> v0 UpdateConfig."""
    return update_pb2.UpdateConfig(
        batchSize=spec.batch_size, batchPercentage=spec.batch_percentage,
        stopBeforeUpdate=spec.stop_before_update, startPaused=spec.start_paused,
        rollbackOnFailure=spec.rollback_on_failure, maxInstanceAttempts=spec.max_instance_attempts,
        maxFailureInstances=spec.max_failure_instances, inPlace=spec.in_place,
        startTasks=spec.start_tasks)


def update_status_to_v0(info: UpdateInfo) -> update_pb2.UpdateStatus:
    """Progress of an update: done, failed, remaining and state."""
    done, failed = len(info.instances_done), len(info.instances_failed)
    return update_pb2.UpdateStatus(numTasksDone=done, numTasksFailed=failed,
                                   numTasksRemaining=max(0, info.instances_total - done - failed),
                                   state=_TO_V0[info.state])


def update_info_to_v0(info: UpdateInfo) -> update_pb2.UpdateInfo:
    """A stored workflow -> v0 UpdateInfo."""
    out = update_pb2.UpdateInfo(config=update_spec_to_v0(info.spec),
                                status=update_status_to_v0(info),
                                configVersion=info.config_version,
                                prevConfigVersion=info.prev_config_version)
    out.updateId.value = info.update_id
    out.jobId.value = info.job_id
    if info.opaque_data:
        out.opaque_data.data = info.opaque_data
    return out
