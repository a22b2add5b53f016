"""Workflows through v1alpha: UpdateSpec/CreateSpec/RestartSpec in, WorkflowInfo/Status out.

Entity versions: a workflow's `version` is `<its target config>-<desired
state version>-<workflow version>` of the job's runtime, `prev_version` the
same with the config it started from (Peloton's ConvertUpdateModelToWorkflowStatus).
Workflow types START and STOP have no name in v1alpha's enum; as in Peloton
they are written as their numbers (3, 4), which proto3 carries unchanged.
Instance lists are written as ranges whose `to` is inclusive, as Peloton's
ConvertInstanceIDListToInstanceRange writes them (the proto comment says
[from, to), the code disagrees; clients of Peloton read the code's form).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from peloton.api.convert.common import time_to_rfc3339
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.job import JobRuntime
from peloton.core.model.update import UpdateInfo, UpdateSpec, WorkflowEvent
from peloton.core.states import WorkflowState, WorkflowType

_STATE_TO_V1: dict[WorkflowState, stateless_pb2.WorkflowState] = {
    s: cast(stateless_pb2.WorkflowState, stateless_pb2.WorkflowState.Value(f"WORKFLOW_STATE_{s.value}"))
    for s in WorkflowState}
_STATE_FROM_V1: dict[int, WorkflowState] = {int(v): k for k, v in _STATE_TO_V1.items()}
_TYPE_TO_V1: dict[WorkflowType, int] = {WorkflowType.UPDATE: 1, WorkflowType.RESTART: 2,
                                        WorkflowType.START: 3, WorkflowType.STOP: 4}
_TYPE_FROM_V1: dict[int, WorkflowType] = {v: k for k, v in _TYPE_TO_V1.items()}


def workflow_state_to_v1(state: WorkflowState) -> stateless_pb2.WorkflowState:
    """Core workflow state -> WORKFLOW_STATE_*."""
    return _STATE_TO_V1[state]


def workflow_state_from_v1(value: int, field: str = "state") -> WorkflowState:
    """WORKFLOW_STATE_* -> core (INVALID is refused)."""
    try:
        return _STATE_FROM_V1[value]
    except KeyError:
        raise InvalidArgument(f"{field}: not a workflow state: {value}", field=field) from None


def workflow_type_to_v1(kind: WorkflowType) -> stateless_pb2.WorkflowType:
    """Core workflow type -> v1alpha WorkflowType (START = 3, STOP = 4, unnamed on the wire)."""
    return cast(stateless_pb2.WorkflowType, _TYPE_TO_V1[kind])


def workflow_type_from_v1(value: int, field: str = "type") -> WorkflowType:
    """v1alpha WorkflowType (or Peloton's private 3/4) -> core."""
    try:
        return _TYPE_FROM_V1[value]
    except KeyError:
        raise InvalidArgument(f"{field}: not a workflow type: {value}", field=field) from None


def update_spec_from_v1(spec: stateless_pb2.UpdateSpec) -> UpdateSpec:
    """A v1alpha UpdateSpec -> core UpdateSpec."""
    return UpdateSpec(batch_size=spec.batch_size, rollback_on_failure=spec.rollback_on_failure,
                      max_instance_attempts=spec.max_instance_retries,
                      max_failure_instances=spec.max_tolerable_instance_failures,
                      start_paused=spec.start_paused, in_place=spec.in_place,
                      start_tasks=spec.start_pods)


def update_spec_to_v1(spec: UpdateSpec) -> stateless_pb2.UpdateSpec:
    """A core UpdateSpec -> v1alpha UpdateSpec (batch percentage has no v1alpha field)."""
    return stateless_pb2.UpdateSpec(
        batch_size=spec.batch_size, rollback_on_failure=spec.rollback_on_failure,
        max_instance_retries=spec.max_instance_attempts,
        max_tolerable_instance_failures=spec.max_failure_instances, start_paused=spec.start_paused,
        in_place=spec.in_place, start_pods=spec.start_tasks)


def create_spec_from_v1(spec: stateless_pb2.CreateSpec) -> UpdateSpec:
    """The rollout settings of a v1alpha CreateJob -> core UpdateSpec."""
    return UpdateSpec(batch_size=spec.batch_size, max_instance_attempts=spec.max_instance_retries,
                      max_failure_instances=spec.max_tolerable_instance_failures,
                      start_paused=spec.start_paused)


def ranges_from_v1(ranges: Iterable[pod_pb2.InstanceIDRange], field: str = "ranges",
                   ) -> tuple[tuple[int, int], ...]:
    """Request ranges [from, to) -> (from, to) pairs; to <= from is refused."""
    out = []
    for i, rng in enumerate(ranges):
        if rng.to <= getattr(rng, "from"):
            raise InvalidArgument(f"{field}[{i}]: 'to' must be above 'from'", field=f"{field}[{i}]")
        out.append((getattr(rng, "from"), rng.to))
    return tuple(out)


def restart_spec_from_v1(spec: stateless_pb2.RestartSpec) -> tuple[UpdateSpec, tuple[tuple[int, int], ...]]:
    """A v1alpha RestartSpec -> (rollout settings, instance ranges [from, to))."""
    return (UpdateSpec(batch_size=spec.batch_size, in_place=spec.in_place),
            ranges_from_v1(spec.ranges, "restart_spec.ranges"))


def instance_ranges_to_v1(instances: Iterable[int]) -> list[pod_pb2.InstanceIDRange]:
    """Instance ids -> runs of consecutive ids, `to` inclusive (see the module notes)."""
    out: list[pod_pb2.InstanceIDRange] = []
    for inst in sorted(set(instances)):
        if out and out[-1].to + 1 == inst:
            out[-1].to = inst
        else:
            rng = pod_pb2.InstanceIDRange(to=inst)
            setattr(rng, "from", inst)
            out.append(rng)
    return out


def workflow_status_to_v1(info: UpdateInfo, runtime: JobRuntime) -> stateless_pb2.WorkflowStatus:
    """A workflow and its job's runtime -> v1alpha WorkflowStatus."""
    done, failed = len(info.instances_done), len(info.instances_failed)
    tail = f"{runtime.desired_state_version}-{runtime.workflow_version}"
    out = stateless_pb2.WorkflowStatus(
        type=workflow_type_to_v1(info.type), state=_STATE_TO_V1[info.state],
        prev_state=_STATE_TO_V1[info.prev_state], num_instances_completed=done,
        num_instances_failed=failed, num_instances_remaining=max(0, info.instances_total - done - failed),
        instances_current=list(info.instances_current),
        creation_time=time_to_rfc3339(info.creation_time),
        update_time=time_to_rfc3339(info.update_time),
        completion_time=time_to_rfc3339(info.completion_time))
    out.version.value = f"{info.config_version}-{tail}"
    out.prev_version.value = f"{info.prev_config_version}-{tail}"
    return out


def workflow_event_to_v1(event: WorkflowEvent) -> stateless_pb2.WorkflowEvent:
    """A workflow state change -> v1alpha WorkflowEvent."""
    return stateless_pb2.WorkflowEvent(type=workflow_type_to_v1(event.type),
                                       state=_STATE_TO_V1[event.state],
                                       timestamp=time_to_rfc3339(event.time))


def workflow_info_to_v1(info: UpdateInfo, runtime: JobRuntime,
                        events: Sequence[WorkflowEvent] = ()) -> stateless_pb2.WorkflowInfo:
    """A workflow -> v1alpha WorkflowInfo: status, its spec, instance ranges, events.

    Events with an instance go to `instance_events` grouped by instance; the rest
    are the workflow's own events.
    """
    out = stateless_pb2.WorkflowInfo(status=workflow_status_to_v1(info, runtime))
    if info.type is WorkflowType.RESTART:
        out.restart_spec.batch_size = info.spec.batch_size
        out.restart_spec.in_place = info.spec.in_place
        out.restart_spec.ranges.extend(instance_ranges_to_v1(info.instances_updated))
    else:
        out.update_spec.CopyFrom(update_spec_to_v1(info.spec))
        out.instances_added.extend(instance_ranges_to_v1(info.instances_added))
        out.instances_removed.extend(instance_ranges_to_v1(info.instances_removed))
        out.instances_updated.extend(instance_ranges_to_v1(info.instances_updated))
    out.opaque_data.data = info.opaque_data
    per_instance: dict[int, list[stateless_pb2.WorkflowEvent]] = {}
    for event in events:
        if event.instance is None:
            out.events.append(workflow_event_to_v1(event))
        else:
            per_instance.setdefault(event.instance, []).append(workflow_event_to_v1(event))
    for instance in sorted(per_instance):
        out.instance_events.add(instance_id=instance, events=per_instance[instance])
    return out
