"""Peloton pods as Aurora ScheduledTasks.

taskId is the pod's Mesos task id `<job-uuid>-<instance>-<run>`, slaveHost
and slaveId come from the pod status, ancestorId is the previous run's id
(omitted for a first run), failureCount the pod's failure count, assigned
ports the values the agent reported (or the static values of the spec).

Task events: with the pod's event history (PodService.GetPodEvents), one
TaskEvent per event, oldest first, as Peloton's bridge did.  Without it (big
listings are served from one QueryPods call), one event for the current
state, stamped with the pod's start (or completion) time, whose message is
the pod's status message: for a PENDING task that is why it is pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aurorabridge.ptoa import basics, states
from aurorabridge.thrift_api import api

SCHEDULER = "peloton"


def task_event(event: Any) -> Any:
    """A TaskEvent from a Peloton PodEvent."""
    return api.TaskEvent(timestamp=basics.timestamp_ms(event.timestamp),
                         status=states.schedule_status_of_name(event.actual_state),
                         message=event.message or event.reason or None, scheduler=SCHEDULER)


def _ports(spec: Any, status: Any) -> dict[str, int]:
    for cs in status.containers_status:
        if cs.ports:
            return {str(k): int(v) for k, v in cs.ports.items()}
    if spec is not None and spec.containers:
        return {p.name: p.value for p in spec.containers[0].ports if p.value}
    return {}


def scheduled_task(pod_name: str, spec: Any, status: Any, task_config: Any,
                   events: Sequence[Any] | None = None, schedule: int | None = None) -> Any:
    """A ScheduledTask for one run of a pod (`events` newest first, as Peloton returns them);
    `schedule` is its status when its pod state does not say (a run not made yet)."""
    schedule = states.schedule_status(status.state) if schedule is None else schedule
    instance = basics.instance_of(pod_name)
    task_id = status.pod_id.value or f"{pod_name}-{max(1, basics.run_of(status.pod_id.value))}"
    prev = status.prev_pod_id.value
    ancestor = prev if prev and basics.run_of(prev) > 0 else None
    if events:
        task_events = [task_event(e) for e in reversed(events)]
    else:
        when = basics.timestamp_ms(status.completion_time) or basics.timestamp_ms(status.start_time)
        task_events = [api.TaskEvent(timestamp=when, status=schedule,
                                     message=status.message or status.reason or None, scheduler=SCHEDULER)]
    assigned = api.AssignedTask(
        taskId=task_id, slaveId=status.agent_id.value or status.host_id or None,
        slaveHost=status.host or None, task=task_config, assignedPorts=_ports(spec, status),
        instanceId=instance)
    return api.ScheduledTask(assignedTask=assigned, status=schedule,
                             failureCount=status.failure_count, timesPartitioned=0,
                             taskEvents=task_events, ancestorId=ancestor)
