"""Task runtime, task info, pod events and task queries: core <-> v0 task messages.

Ids: a run is written `<job>-<instance>-<run>` in `mesosTaskId` (and the
previous and desired run ids alike); a run number of 0 means "none" and is
left out.  Times are RFC 3339 strings, "" when unset.  Health and state
names in a v0 PodEvent are the v0 enum names, as Peloton stores them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from peloton.api.convert.common import run_id_text, time_to_ns, time_to_rfc3339
from peloton.api.convert.v0_task import task_config_to_v0
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.events import PodEvent
from peloton.core.model.task import TaskInfo, TaskRuntime, TerminationReason
from peloton.core.states import HealthState, TaskState

_STATE_TO_V0: dict[TaskState, task_pb2.TaskState] = {
    s: cast(task_pb2.TaskState, task_pb2.TaskState.Value(s.value)) for s in TaskState}
_STATE_FROM_V0: dict[int, TaskState] = {int(v): k for k, v in _STATE_TO_V0.items()}
_HEALTH_TO_V0: dict[HealthState, task_pb2.HealthState] = {
    h: cast(task_pb2.HealthState, task_pb2.HealthState.Value(h.value)) for h in HealthState}
_TERMINATION = task_pb2.TerminationStatus
_REASON_TO_V0: dict[TerminationReason, task_pb2.TerminationStatus.Reason] = {
    r: cast(task_pb2.TerminationStatus.Reason,
            _TERMINATION.Reason.Value(f"TERMINATION_STATUS_REASON_{r.value}"))
    for r in TerminationReason if r is not TerminationReason.NONE}


def task_state_to_v0(state: TaskState) -> task_pb2.TaskState:
    """Core task state -> v0 TaskState (same names and meanings)."""
    return _STATE_TO_V0[state]


def task_state_from_v0(state: int, field: str = "state") -> TaskState:
    """v0 TaskState -> core; UNKNOWN (0) has no core meaning and is refused."""
    try:
        return _STATE_FROM_V0[state]
    except KeyError:
        raise InvalidArgument(f"{field}: not a task state: {state}", field=field) from None


def task_runtime_to_v0(job_id: str, instance: int, runtime: TaskRuntime) -> task_pb2.RuntimeInfo:
    """A task's runtime -> v0 RuntimeInfo, with ids spelled as Peloton's mesos task ids."""
    out = task_pb2.RuntimeInfo(
        state=_STATE_TO_V0[runtime.state], goalState=_STATE_TO_V0[runtime.goal_state],
        startTime=time_to_rfc3339(runtime.start_time),
        completionTime=time_to_rfc3339(runtime.completion_time),
        host=runtime.host, message=runtime.message, reason=runtime.reason,
        failureCount=runtime.failure_count, configVersion=runtime.config_version,
        desiredConfigVersion=runtime.desired_config_version,
        healthy=_HEALTH_TO_V0[runtime.healthy], desiredHost=runtime.desired_host)
    for field, run in (("mesosTaskId", runtime.run_id), ("prevMesosTaskId", runtime.prev_run_id),
                       ("desiredMesosTaskId", runtime.desired_run_id)):
        if run > 0:
            getattr(out, field).value = run_id_text(job_id, instance, run)
    if runtime.agent_id:
        out.agentID.value = runtime.agent_id
    for name, port in runtime.ports:
        out.ports[name] = port
    out.revision.version = runtime.revision
    out.revision.updatedAt = time_to_ns(runtime.update_time)
    if runtime.termination is not TerminationReason.NONE or runtime.exit_code is not None:
        status = out.terminationStatus
        status.reason = _REASON_TO_V0.get(runtime.termination,
                                          _TERMINATION.TERMINATION_STATUS_REASON_INVALID)
        # A negative exit code is a signal number (Python's convention); the wire keeps it apart.
        code = runtime.exit_code or 0
        if code < 0:
            status.signal = str(-code)
        else:
            status.exit_code = code
    return out


def task_info_to_v0(info: TaskInfo) -> task_pb2.TaskInfo:
    """A task's spec and runtime -> v0 TaskInfo (config built from the core spec)."""
    return task_info_with_config(info.job_id, info.instance, task_config_to_v0(info.spec),
                                 info.runtime)


def task_info_with_config(job_id: str, instance: int, config: task_pb2.TaskConfig,
                          runtime: TaskRuntime) -> task_pb2.TaskInfo:
    """A v0 TaskInfo from an already-built config (e.g. the merged request document)."""
    out = task_pb2.TaskInfo(instanceId=instance,
                            runtime=task_runtime_to_v0(job_id, instance, runtime))
    out.jobId.value = job_id
    out.config.CopyFrom(config)
    return out


def ended_run_to_v0(event: PodEvent, config: task_pb2.TaskConfig) -> task_pb2.TaskInfo:
    """A run's terminal event as TaskManager.Get lists it (Peloton's getTerminalEvents:
    the current config, and a runtime of state, ids, host, agent, message and reason)."""
    out = task_pb2.TaskInfo(instanceId=event.instance)
    out.jobId.value = event.job_id
    out.config.CopyFrom(config)
    rt = out.runtime
    rt.state = _STATE_TO_V0[event.state]
    rt.mesosTaskId.value = run_id_text(event.job_id, event.instance, event.run_id)
    rt.prevMesosTaskId.value = run_id_text(event.job_id, event.instance, event.prev_run_id)
    rt.agentID.value = event.agent_id
    rt.host, rt.message, rt.reason = event.host, event.message, event.reason
    return out


def pod_event_to_v0(event: PodEvent) -> task_pb2.PodEvent:
    """A stored pod event -> v0 PodEvent (states and health as v0 enum names)."""
    out = task_pb2.PodEvent(
        actualState=event.state.value, goalState=event.goal_state.value,
        timestamp=time_to_rfc3339(event.time), configVersion=event.config_version,
        desiredConfigVersion=event.desired_config_version, agentID=event.agent_id,
        hostname=event.host, message=event.message, reason=event.reason,
        healthy=event.healthy.value)
    out.taskId.value = run_id_text(event.job_id, event.instance, event.run_id)
    # Peloton always fills the previous and desired ids, run 0 included.
    out.prevTaskId.value = run_id_text(event.job_id, event.instance, event.prev_run_id)
    out.desriedTaskId.value = run_id_text(event.job_id, event.instance,
                                          event.desired_run_id or event.run_id)
    return out


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """A task query as plain values: an empty filter matches everything."""

    states: frozenset[TaskState] = frozenset()
    names: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    offset: int = 0
    limit: int | None = None
    order_by: tuple[tuple[str, bool], ...] = ()


def task_query_from_v0(spec: task_pb2.QuerySpec) -> TaskQuery:
    """A v0 task QuerySpec -> TaskQuery (`order_by` is (property, descending) pairs)."""
    states = frozenset(task_state_from_v0(s, f"taskStates[{i}]")
                       for i, s in enumerate(spec.taskStates))
    page = spec.pagination
    order = tuple((o.property.value, o.order == o.DESC) for o in page.orderBy)
    return TaskQuery(states=states, names=tuple(spec.names), hosts=tuple(spec.hosts),
                     offset=page.offset, limit=page.limit or None, order_by=order)
