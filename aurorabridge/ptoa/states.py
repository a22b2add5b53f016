"""Peloton pod and workflow states as Aurora ScheduleStatus, JobUpdateStatus and actions.

Pod states follow Peloton's bridge (ptoa/schedule_status.go), except RESERVED,
which it could not map and we report as ASSIGNED (resources held on a host).
Workflow states read through the update's opaque data: a rollback turns
ROLLING_FORWARD into ROLLING_BACK, and a PAUSED workflow is AWAITING_PULSE
when its latest pulse-related action says so (opaque_data.awaiting_pulse).
"""

from __future__ import annotations

from aurorabridge.opaque_data import OpaqueData
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2

_S = api.ScheduleStatus
_U = api.JobUpdateStatus
_A = api.JobUpdateAction
_P = pod_pb2
_W = stateless_pb2

POD_TO_SCHEDULE: dict[int, int] = {
    _P.POD_STATE_INVALID: _S.INIT, _P.POD_STATE_INITIALIZED: _S.INIT,
    _P.POD_STATE_PENDING: _S.PENDING, _P.POD_STATE_READY: _S.PENDING, _P.POD_STATE_PLACING: _S.PENDING,
    _P.POD_STATE_PLACED: _S.ASSIGNED, _P.POD_STATE_LAUNCHING: _S.ASSIGNED,
    _P.POD_STATE_LAUNCHED: _S.ASSIGNED, _P.POD_STATE_RESERVED: _S.ASSIGNED,
    _P.POD_STATE_STARTING: _S.STARTING, _P.POD_STATE_RUNNING: _S.RUNNING,
    _P.POD_STATE_SUCCEEDED: _S.FINISHED, _P.POD_STATE_FAILED: _S.FAILED, _P.POD_STATE_LOST: _S.LOST,
    _P.POD_STATE_KILLING: _S.KILLING, _P.POD_STATE_KILLED: _S.KILLED, _P.POD_STATE_DELETED: _S.KILLED,
    _P.POD_STATE_PREEMPTING: _S.PREEMPTING,
}

#: Pod states counted in each JobStats bucket (Peloton's ptoa/job_summary.go).
PENDING_PODS = ("POD_STATE_INITIALIZED", "POD_STATE_PENDING", "POD_STATE_READY", "POD_STATE_PLACING")
ACTIVE_PODS = ("POD_STATE_PLACED", "POD_STATE_LAUNCHING", "POD_STATE_LAUNCHED", "POD_STATE_STARTING",
               "POD_STATE_RUNNING", "POD_STATE_KILLING", "POD_STATE_PREEMPTING")
FINISHED_PODS = ("POD_STATE_SUCCEEDED", "POD_STATE_KILLED", "POD_STATE_DELETED")
FAILED_PODS = ("POD_STATE_FAILED", "POD_STATE_LOST")
TERMINAL_POD_STATES = frozenset({_P.POD_STATE_SUCCEEDED, _P.POD_STATE_FAILED, _P.POD_STATE_LOST,
                                 _P.POD_STATE_KILLED, _P.POD_STATE_DELETED})

TERMINAL_WORKFLOW_STATES = frozenset({_W.WORKFLOW_STATE_SUCCEEDED, _W.WORKFLOW_STATE_ABORTED,
                                      _W.WORKFLOW_STATE_FAILED, _W.WORKFLOW_STATE_ROLLED_BACK})


def schedule_status(pod_state: int) -> int:
    """The ScheduleStatus of a pod state (unknown future states read as INIT)."""
    return int(POD_TO_SCHEDULE.get(pod_state, _S.INIT))


def schedule_status_of_name(pod_state_name: str) -> int:
    """As schedule_status, for pod states given by name (pod events carry names)."""
    try:
        return schedule_status(_P.PodState.Value(pod_state_name))
    except ValueError:
        return int(_S.INIT)


def update_status(state: int, data: OpaqueData) -> int:
    """The JobUpdateStatus of a workflow in `state` with opaque `data`."""
    rollback = data.rollback
    if state in (_W.WORKFLOW_STATE_INITIALIZED, _W.WORKFLOW_STATE_ROLLING_FORWARD):
        return int(_U.ROLLING_BACK if rollback else _U.ROLLING_FORWARD)
    if state == _W.WORKFLOW_STATE_PAUSED:
        if data.awaiting_pulse:
            return int(_U.ROLL_BACK_AWAITING_PULSE if rollback else _U.ROLL_FORWARD_AWAITING_PULSE)
        return int(_U.ROLL_BACK_PAUSED if rollback else _U.ROLL_FORWARD_PAUSED)
    if state == _W.WORKFLOW_STATE_ROLLING_BACKWARD:
        return int(_U.ROLLING_BACK)
    if state == _W.WORKFLOW_STATE_ROLLED_BACK:
        return int(_U.ROLLED_BACK)
    if state == _W.WORKFLOW_STATE_SUCCEEDED:
        return int(_U.ROLLED_BACK if rollback else _U.ROLLED_FORWARD)
    if state == _W.WORKFLOW_STATE_ABORTED:
        return int(_U.ABORTED)
    if state == _W.WORKFLOW_STATE_FAILED:
        return int(_U.FAILED)
    return int(_U.ERROR)


def instance_action(state: int, data: OpaqueData) -> int:
    """The JobUpdateAction of an instance event in workflow state `state`."""
    rollback = data.rollback
    if state in (_W.WORKFLOW_STATE_INITIALIZED, _W.WORKFLOW_STATE_ROLLING_FORWARD, _W.WORKFLOW_STATE_PAUSED):
        return int(_A.INSTANCE_ROLLING_BACK if rollback else _A.INSTANCE_UPDATING)
    if state == _W.WORKFLOW_STATE_SUCCEEDED:
        return int(_A.INSTANCE_ROLLED_BACK if rollback else _A.INSTANCE_UPDATED)
    if state in (_W.WORKFLOW_STATE_FAILED, _W.WORKFLOW_STATE_ABORTED):
        return int(_A.INSTANCE_ROLLBACK_FAILED if rollback else _A.INSTANCE_UPDATE_FAILED)
    if state == _W.WORKFLOW_STATE_ROLLING_BACKWARD:
        return int(_A.INSTANCE_ROLLING_BACK)
    if state == _W.WORKFLOW_STATE_ROLLED_BACK:
        return int(_A.INSTANCE_ROLLED_BACK)
    return int(_A.INSTANCE_UPDATING)
