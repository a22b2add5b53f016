"""Pod status, info, summary, events and queries: core <-> v1alpha pod messages.

Follows Peloton's ConvertTaskRuntimeToPodStatus: the pod id is the run's
`<job>-<instance>-<run>`, versions are pod entity versions `<config>-0-0`,
and the one container's status repeats the pod's times, message, reason,
ports, health and termination.  Pod event states are POD_STATE_* names and
health HEALTH_STATE_* names, as Peloton's storage wrote them.
"""

from __future__ import annotations

from typing import cast

from peloton.api.convert.common import pod_entity_version, run_id_text, time_to_ns, time_to_rfc3339
from peloton.api.convert.v0_task_runtime import TaskQuery
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.events import PodEvent
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.states import HealthState, TaskState

_STATE_TO_V1: dict[TaskState, pod_pb2.PodState] = {
    s: cast(pod_pb2.PodState, pod_pb2.PodState.Value(f"POD_STATE_{s.value}")) for s in TaskState}
_STATE_FROM_V1: dict[int, TaskState] = {int(v): k for k, v in _STATE_TO_V1.items()}
_HEALTH_TO_V1: dict[HealthState, pod_pb2.HealthState] = {
    HealthState.INVALID: pod_pb2.HEALTH_STATE_INVALID,
    HealthState.DISABLED: pod_pb2.HEALTH_STATE_DISABLED,
    HealthState.HEALTH_UNKNOWN: pod_pb2.HEALTH_STATE_UNKNOWN,
    HealthState.HEALTHY: pod_pb2.HEALTH_STATE_HEALTHY,
    HealthState.UNHEALTHY: pod_pb2.HEALTH_STATE_UNHEALTHY}
_HEALTH_FROM_V1: dict[int, HealthState] = {int(v): k for k, v in _HEALTH_TO_V1.items()}
_TERM = pod_pb2.TerminationStatus
_REASON_TO_V1: dict[TerminationReason, pod_pb2.TerminationStatus.Reason] = {
    r: cast(pod_pb2.TerminationStatus.Reason, _TERM.Reason.Value(f"TERMINATION_STATUS_REASON_{r.value}"))
    for r in TerminationReason if r is not TerminationReason.NONE}


#: The container states a pod state implies (Peloton left them unset; clients show them).
_CONTAINER_STATES = {
    TaskState.PENDING: "CONTAINER_STATE_PENDING", TaskState.LAUNCHED: "CONTAINER_STATE_LAUNCHED",
    TaskState.STARTING: "CONTAINER_STATE_STARTING", TaskState.RUNNING: "CONTAINER_STATE_RUNNING",
    TaskState.SUCCEEDED: "CONTAINER_STATE_SUCCEEDED", TaskState.FAILED: "CONTAINER_STATE_FAILED",
    TaskState.KILLING: "CONTAINER_STATE_KILLING", TaskState.KILLED: "CONTAINER_STATE_KILLED"}


def pod_state_to_v1(state: TaskState) -> pod_pb2.PodState:
    """Core task state -> POD_STATE_*."""
    return _STATE_TO_V1[state]


def pod_state_from_v1(value: int, field: str = "state") -> TaskState:
    """POD_STATE_* -> core task state (POD_STATE_INVALID is refused)."""
    try:
        return _STATE_FROM_V1[value]
    except KeyError:
        raise InvalidArgument(f"{field}: not a pod state: {value}", field=field) from None


def health_to_v1(health: HealthState) -> pod_pb2.HealthState:
    """Core health -> HEALTH_STATE_* (HEALTH_UNKNOWN is HEALTH_STATE_UNKNOWN)."""
    return _HEALTH_TO_V1[health]


def health_from_v1(value: int, field: str = "healthy") -> HealthState:
    """HEALTH_STATE_* -> core health."""
    try:
        return _HEALTH_FROM_V1[value]
    except KeyError:
        raise InvalidArgument(f"{field}: not a health state: {value}", field=field) from None


def _termination(runtime: TaskRuntime, out: pod_pb2.TerminationStatus) -> None:
    out.reason = _REASON_TO_V1.get(runtime.termination, _TERM.TERMINATION_STATUS_REASON_INVALID)
    code = runtime.exit_code or 0
    # Negative exit codes are signals (Python's convention); the wire keeps them apart.
    if code < 0:
        out.signal = str(-code)
    else:
        out.exit_code = code


def pod_status_to_v1(job_id: str, instance: int, runtime: TaskRuntime,
                     container_name: str = "", image: str = "") -> pod_pb2.PodStatus:
    """A task runtime -> v1alpha PodStatus."""
    start, end = time_to_rfc3339(runtime.start_time), time_to_rfc3339(runtime.completion_time)
    out = pod_pb2.PodStatus(
        state=_STATE_TO_V1[runtime.state], desired_state=_STATE_TO_V1[runtime.goal_state],
        start_time=start, completion_time=end, host=runtime.host, message=runtime.message,
        reason=runtime.reason, failure_count=runtime.failure_count,
        desiredHost=runtime.desired_host, host_id=runtime.agent_id)
    for field, run in (("pod_id", runtime.run_id), ("prev_pod_id", runtime.prev_run_id),
                       ("desired_pod_id", runtime.desired_run_id)):
        if run > 0:
            getattr(out, field).value = run_id_text(job_id, instance, run)
    out.version.value = pod_entity_version(runtime.config_version)
    out.desired_version.value = pod_entity_version(runtime.desired_config_version)
    if runtime.agent_id:
        out.agent_id.value = runtime.agent_id
    out.revision.version = runtime.revision
    out.revision.updated_at = time_to_ns(runtime.update_time)
    box = out.containers_status.add(name=container_name, image=image, start_time=start,
                                    completion_time=end, message=runtime.message,
                                    reason=runtime.reason, failure_count=runtime.failure_count)
    box.state = cast(pod_pb2.ContainerState, pod_pb2.ContainerState.Value(
        _CONTAINER_STATES.get(runtime.state, "CONTAINER_STATE_INVALID")))
    for name, port in runtime.ports:
        box.ports[name] = port
    box.healthy.state = _HEALTH_TO_V1[runtime.healthy]
    if runtime.termination is not TerminationReason.NONE or runtime.exit_code is not None:
        _termination(runtime, box.terminationStatus)
    return out


def pod_info_to_v1(spec: pod_pb2.PodSpec, job_id: str, instance: int,
                   runtime: TaskRuntime) -> pod_pb2.PodInfo:
    """A pod's spec (already converted) and runtime -> v1alpha PodInfo."""
    name, image = (spec.containers[0].name, spec.containers[0].image) if spec.containers else ("", "")
    return pod_pb2.PodInfo(spec=spec, status=pod_status_to_v1(job_id, instance, runtime, name, image))


def pod_summary_to_v1(job_id: str, instance: int, runtime: TaskRuntime) -> pod_pb2.PodSummary:
    """A pod's name `<job>-<instance>` and status -> v1alpha PodSummary."""
    out = pod_pb2.PodSummary(status=pod_status_to_v1(job_id, instance, runtime))
    out.pod_name.value = f"{job_id}-{instance}"
    return out


def pod_event_to_v1(event: PodEvent) -> pod_pb2.PodEvent:
    """A stored pod event -> v1alpha PodEvent."""
    out = pod_pb2.PodEvent(
        actual_state=pod_pb2.PodState.Name(_STATE_TO_V1[event.state]),
        desired_state=pod_pb2.PodState.Name(_STATE_TO_V1[event.goal_state]),
        timestamp=time_to_rfc3339(event.time), agent_id=event.agent_id, hostname=event.host,
        message=event.message, reason=event.reason,
        healthy=pod_pb2.HealthState.Name(_HEALTH_TO_V1[event.healthy]))
    out.pod_id.value = run_id_text(event.job_id, event.instance, event.run_id)
    out.prev_pod_id.value = run_id_text(event.job_id, event.instance, event.prev_run_id)
    out.desired_pod_id.value = run_id_text(event.job_id, event.instance,
                                           event.desired_run_id or event.run_id)
    out.version.value = pod_entity_version(event.config_version)
    out.desired_version.value = pod_entity_version(event.desired_config_version)
    return out


def pod_status_from_event(event: PodEvent) -> pod_pb2.PodStatus:
    """The status of an earlier run, as its latest event recorded it (Peloton's GetPod
    `previous`: state, goal, ids, host, agent, versions, message and reason)."""
    out = pod_pb2.PodStatus(state=_STATE_TO_V1[event.state],
                            desired_state=_STATE_TO_V1[event.goal_state], host=event.host,
                            message=event.message, reason=event.reason)
    out.pod_id.value = run_id_text(event.job_id, event.instance, event.run_id)
    if event.prev_run_id > 0:
        out.prev_pod_id.value = run_id_text(event.job_id, event.instance, event.prev_run_id)
    out.desired_pod_id.value = run_id_text(event.job_id, event.instance,
                                           event.desired_run_id or event.run_id)
    if event.agent_id:
        out.agent_id.value = event.agent_id
    out.version.value = pod_entity_version(event.config_version)
    out.desired_version.value = pod_entity_version(event.desired_config_version)
    return out


def pod_query_from_v1(spec: pod_pb2.QuerySpec) -> TaskQuery:
    """A v1alpha pod QuerySpec -> TaskQuery (pod names are `<job>-<instance>` or task names)."""
    page = spec.pagination
    return TaskQuery(
        states=frozenset(pod_state_from_v1(s, f"pod_states[{i}]") for i, s in enumerate(spec.pod_states)),
        names=tuple(n.value for n in spec.names), hosts=tuple(spec.hosts), offset=page.offset,
        limit=page.limit or None,
        order_by=tuple((o.property.value, o.order == o.ORDER_BY_DESC) for o in page.order_by))
