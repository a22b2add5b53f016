"""Which columns each table shows, and how a message becomes a row.

The headers are the original CLI's (pkg/cli/*_actions.go), so people who
read Peloton's tables read ours the same way; `output.Output.table`
draws them.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from cli.output import fmt_run_time, fmt_time

JOB_SUMMARY = ["ID", "Name", "Owner", "State", "Creation Time", "Completion Time", "Total",
               "Running", "Succeeded", "Failed", "Killed"]
TASK = ["Instance", "Name", "State", "Healthy", "Start Time", "Run Time", "Host", "Message",
        "Reason", "Termination Status"]
POD_EVENTS = ["Mesos Task Id", "Desired Mesos Task Id", "Actual State", "Goal State", "Config Version",
              "Desired Config Version", "Healthy", "Host", "Message", "Reason", "Update Time"]
POD_EVENTS_V1 = ["Pod Id", "Desired Pod Id", "Actual State", "Desired State", "Job Version",
                 "Desired Job Version", "Healthy", "Host", "Message", "Reason", "Update Time"]
HOST = ["Hostname", "IP", "State", "HostPool"]
UPDATE = ["Update-ID", "State", "NumberTasksCompleted", "NumberTasksFailed", "NumberTasksRemaining"]
STATELESS_SUMMARY = ["ID", "Name", "Owner", "State", "Creation Time", "Total", "Running", "Succeeded",
                     "Failed", "Killed", "Workflow Status", "Completed", "Failed", "Current"]
POD = ["Pod ID", "Name", "State", "Container Name", "Container State", "Healthy", "Start Time",
       "Run Time", "Host", "Message", "Reason", "Termination Status"]
WORKFLOW_EVENTS = ["Workflow State", "Workflow Type", "Timestamp"]
UPDATE_EVENTS = ["Type", "Timestamp", "State"]


def enum_name(message: Message, field: str) -> str:
    """The name of the enum value in `message.field` (the number if unknown)."""
    value = getattr(message, field)
    enum = message.DESCRIPTOR.fields_by_name[field].enum_type
    found = enum.values_by_number.get(value) if enum is not None else None
    return found.name if found is not None else str(value)


def _termination(status: Any) -> str:
    if not status.ByteSize():
        return ""
    return enum_name(status, "reason").removeprefix("TERMINATION_STATUS_REASON_")


def job_summary_row(job: Any) -> list[Any]:
    """A v0 JobSummary."""
    rt = job.runtime
    stats = rt.taskStats
    return [job.id.value, job.name, job.owningTeam, enum_name(rt, "state"), fmt_time(rt.creationTime),
            fmt_time(rt.completionTime) or "--", job.instanceCount, stats.get("RUNNING", 0),
            stats.get("SUCCEEDED", 0), stats.get("FAILED", 0), stats.get("KILLED", 0)]


def task_row(task: Any) -> list[Any]:
    """A v0 TaskInfo."""
    rt = task.runtime
    return [task.instanceId, task.config.name, enum_name(rt, "state"), enum_name(rt, "healthy"),
            fmt_time(rt.startTime), fmt_run_time(rt.startTime, rt.completionTime), rt.host, rt.message,
            rt.reason, _termination(rt.terminationStatus)]


def pod_event_row(event: Any) -> list[Any]:
    """A v0 task.PodEvent."""
    return [event.taskId.value, event.desriedTaskId.value, event.actualState, event.goalState,
            event.configVersion, event.desiredConfigVersion, event.healthy, event.hostname,
            event.message, event.reason, event.timestamp]


def pod_event_v1_row(event: Any) -> list[Any]:
    """A v1alpha pod.PodEvent."""
    return [event.pod_id.value, event.desired_pod_id.value, event.actual_state, event.desired_state,
            event.version.value, event.desired_version.value, event.healthy, event.hostname,
            event.message, event.reason, event.timestamp]


def host_row(host: Any) -> list[Any]:
    """A v0 HostInfo."""
    return [host.hostname, host.ip, enum_name(host, "state"), host.current_pool]


def update_row(info: Any) -> list[Any]:
    """A v0 UpdateInfo."""
    status = info.status
    return [info.updateId.value, enum_name(status, "state"), status.numTasksDone, status.numTasksFailed,
            status.numTasksRemaining]


def stateless_summary_row(job: Any) -> list[Any]:
    """A v1alpha stateless JobSummary."""
    status = job.status
    stats = status.pod_stats
    wf = status.workflow_status
    return [job.job_id.value, job.name, job.owning_team, enum_name(status, "state"),
            fmt_time(status.creation_time), job.instance_count, stats.get("POD_STATE_RUNNING", 0),
            stats.get("POD_STATE_SUCCEEDED", 0), stats.get("POD_STATE_FAILED", 0),
            stats.get("POD_STATE_KILLED", 0), enum_name(wf, "state"), wf.num_instances_completed,
            wf.num_instances_failed, len(wf.instances_current)]


def pod_rows(status: Any, pod_name: str) -> list[list[Any]]:
    """One row per container of a v1alpha PodStatus (a pod without containers gets one row)."""
    rows = []
    for c in status.containers_status:
        rows.append([status.pod_id.value, pod_name, enum_name(status, "state"), c.name,
                     enum_name(c, "state"), enum_name(c.healthy, "state"), fmt_time(c.start_time),
                     fmt_run_time(c.start_time, c.completion_time), status.host, c.message, c.reason,
                     _termination(c.terminationStatus)])
    if not rows:
        rows.append([status.pod_id.value, pod_name, enum_name(status, "state"), "", "", "",
                     fmt_time(status.start_time), fmt_run_time(status.start_time, status.completion_time),
                     status.host, status.message, status.reason, ""])
    return rows


def workflow_event_row(event: Any) -> list[Any]:
    """A v1alpha WorkflowEvent."""
    return [enum_name(event, "state"), enum_name(event, "type"), event.timestamp]
