"""Peloton pod and workflow states as Aurora ScheduleStatus, JobUpdateStatus and actions.

Pod states follow Peloton's bridge (ptoa/schedule_status.go), except RESERVED,
which it could not map and we report as ASSIGNED (resources held on a host).
Workflow states read through two tables (WORKFLOW_TO_UPDATE and, for the
events of one instance, INSTANCE_ACTION) by direction: a rollback (the
update's opaque data says so, or the job manager turned the workflow around)
turns ROLLING_FORWARD into ROLLING_BACK; and a PAUSED workflow is
AWAITING_PULSE when its latest pulse-related action says so
(opaque_data.awaiting_pulse).
"""

from __future__ import annotations

from typing import Any

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
#: Pods whose run was handed to a host (the job manager writes LAUNCHED before it asks the
#: host), the only ones explicit reconciliation asks about; Aurora's TaskReconciler likewise
#: sends its SLAVE_ASSIGNED_STATES.  A PENDING, PLACED or RESERVED pod is on no host yet.
LAUNCHED_POD_STATES = frozenset({_P.POD_STATE_LAUNCHED, _P.POD_STATE_STARTING, _P.POD_STATE_RUNNING,
                                 _P.POD_STATE_KILLING, _P.POD_STATE_PREEMPTING})

TERMINAL_WORKFLOW_STATES = frozenset({_W.WORKFLOW_STATE_SUCCEEDED, _W.WORKFLOW_STATE_ABORTED,
                                      _W.WORKFLOW_STATE_FAILED, _W.WORKFLOW_STATE_ROLLED_BACK})


#: The job manager's message on a run held back before it runs again after failures
#: (peloton/jobmgr/goalstate/task.THROTTLED; Peloton's own wording).
THROTTLED_MESSAGE = "Task throttled due to failure"
#: Statuses of a pod's next run while it waits to be made: Aurora makes the next task as soon
#: as one ends, THROTTLED while held back after failures, else PENDING.  Peloton makes it
#: only when it starts, so the bridge shows it meanwhile (task_runs.waiting_run).
WAITING_RUN_STATUS: dict[bool, int] = {True: _S.THROTTLED, False: _S.PENDING}


def waiting_run_status(status: Any) -> int | None:
    """The ScheduleStatus of the run a pod (PodStatus) waits to start, if its run has ended
    and its goal is to run (a service task restarts); else None."""
    if status.state not in TERMINAL_POD_STATES or status.desired_state != _P.POD_STATE_RUNNING:
        return None
    return WAITING_RUN_STATUS[THROTTLED_MESSAGE in status.message]


def schedule_status(pod_state: int) -> int:
    """The ScheduleStatus of a pod state (unknown future states read as INIT)."""
    return int(POD_TO_SCHEDULE.get(pod_state, _S.INIT))


def schedule_status_of_name(pod_state_name: str) -> int:
    """As schedule_status, for pod states given by name (pod events carry names)."""
    try:
        return schedule_status(_P.PodState.Value(pod_state_name))
    except ValueError:
        return int(_S.INIT)


_F, _B = False, True
#: (workflow state, rolling back) -> the JobUpdateStatus it reads as.  A PAUSED workflow
#: that waits for a pulse reads through AWAITING_PULSE; a state not here reads as ERROR.
WORKFLOW_TO_UPDATE: dict[tuple[int, bool], int] = {
    (_W.WORKFLOW_STATE_INITIALIZED, _F): _U.ROLLING_FORWARD,
    (_W.WORKFLOW_STATE_INITIALIZED, _B): _U.ROLLING_BACK,
    (_W.WORKFLOW_STATE_ROLLING_FORWARD, _F): _U.ROLLING_FORWARD,
    (_W.WORKFLOW_STATE_ROLLING_FORWARD, _B): _U.ROLLING_BACK,
    (_W.WORKFLOW_STATE_ROLLING_BACKWARD, _F): _U.ROLLING_BACK,
    (_W.WORKFLOW_STATE_ROLLING_BACKWARD, _B): _U.ROLLING_BACK,
    (_W.WORKFLOW_STATE_PAUSED, _F): _U.ROLL_FORWARD_PAUSED,
    (_W.WORKFLOW_STATE_PAUSED, _B): _U.ROLL_BACK_PAUSED,
    (_W.WORKFLOW_STATE_SUCCEEDED, _F): _U.ROLLED_FORWARD,
    (_W.WORKFLOW_STATE_SUCCEEDED, _B): _U.ROLLED_BACK,
    (_W.WORKFLOW_STATE_ROLLED_BACK, _F): _U.ROLLED_BACK,
    (_W.WORKFLOW_STATE_ROLLED_BACK, _B): _U.ROLLED_BACK,
    (_W.WORKFLOW_STATE_ABORTED, _F): _U.ABORTED,
    (_W.WORKFLOW_STATE_ABORTED, _B): _U.ABORTED,
    (_W.WORKFLOW_STATE_FAILED, _F): _U.FAILED,
    (_W.WORKFLOW_STATE_FAILED, _B): _U.FAILED,
}
#: A pause that waits for a pulse (Aurora's coordinated updates).
AWAITING_PULSE: dict[int, int] = {_U.ROLL_FORWARD_PAUSED: _U.ROLL_FORWARD_AWAITING_PULSE,
                                  _U.ROLL_BACK_PAUSED: _U.ROLL_BACK_AWAITING_PULSE}

#: (state of an instance's workflow event, the instance is being rolled back) -> its
#: JobUpdateAction (Aurora's InstanceUpdateStatus x direction table in JobUpdateControllerImpl).
#: The job manager records an instance done in a rollback as ROLLED_BACK; SUCCEEDED and
#: FAILED read by direction.  A state not here reads as INSTANCE_UPDATING.
INSTANCE_ACTION: dict[tuple[int, bool], int] = {
    (_W.WORKFLOW_STATE_INITIALIZED, _F): _A.INSTANCE_UPDATING,
    (_W.WORKFLOW_STATE_INITIALIZED, _B): _A.INSTANCE_ROLLING_BACK,
    (_W.WORKFLOW_STATE_ROLLING_FORWARD, _F): _A.INSTANCE_UPDATING,
    (_W.WORKFLOW_STATE_ROLLING_FORWARD, _B): _A.INSTANCE_ROLLING_BACK,
    (_W.WORKFLOW_STATE_PAUSED, _F): _A.INSTANCE_UPDATING,
    (_W.WORKFLOW_STATE_PAUSED, _B): _A.INSTANCE_ROLLING_BACK,
    (_W.WORKFLOW_STATE_ROLLING_BACKWARD, _F): _A.INSTANCE_ROLLING_BACK,
    (_W.WORKFLOW_STATE_ROLLING_BACKWARD, _B): _A.INSTANCE_ROLLING_BACK,
    (_W.WORKFLOW_STATE_SUCCEEDED, _F): _A.INSTANCE_UPDATED,
    (_W.WORKFLOW_STATE_SUCCEEDED, _B): _A.INSTANCE_ROLLED_BACK,
    (_W.WORKFLOW_STATE_ROLLED_BACK, _F): _A.INSTANCE_ROLLED_BACK,
    (_W.WORKFLOW_STATE_ROLLED_BACK, _B): _A.INSTANCE_ROLLED_BACK,
    (_W.WORKFLOW_STATE_FAILED, _F): _A.INSTANCE_UPDATE_FAILED,
    (_W.WORKFLOW_STATE_FAILED, _B): _A.INSTANCE_ROLLBACK_FAILED,
    (_W.WORKFLOW_STATE_ABORTED, _F): _A.INSTANCE_UPDATE_FAILED,
    (_W.WORKFLOW_STATE_ABORTED, _B): _A.INSTANCE_ROLLBACK_FAILED,
}


def workflow_update_status(state: int, rolling_back: bool, awaiting_pulse: bool = False) -> int:
    """The JobUpdateStatus of a workflow state (WORKFLOW_TO_UPDATE, AWAITING_PULSE)."""
    status = WORKFLOW_TO_UPDATE.get((state, rolling_back), _U.ERROR)
    return int(AWAITING_PULSE.get(status, status) if awaiting_pulse else status)


def update_status(state: int, data: OpaqueData, rolling_back: bool = False) -> int:
    """The JobUpdateStatus of a workflow in `state` with opaque `data` (`rolling_back`: the
    job manager turned it around)."""
    return workflow_update_status(state, data.rollback or rolling_back, data.awaiting_pulse)


def instance_action(state: int, rolling_back: bool) -> int:
    """The JobUpdateAction of an instance event in workflow state `state` (INSTANCE_ACTION)."""
    return int(INSTANCE_ACTION.get((state, rolling_back), _A.INSTANCE_UPDATING))
