"""Which columns each table shows, and how a message becomes a row, for people.

Headers follow the original CLI's (pkg/cli/*_actions.go) where they fit;
each column says how readily it is dropped on a narrow terminal and
whether its text wraps (cli/table.py).  Values are made for reading:
ids are abbreviated to 8 characters, keeping a run's `-<instance>-<run>`
suffix (any unique prefix of 6 or more characters is accepted back, see
cli/ids.py); enum values lose their type prefix (`RUNNING`, not
`POD_STATE_RUNNING`) and their unset value (`INVALID`, `..._INVALID`,
`HEALTH_UNKNOWN` when nothing is known) reads as blank; times are UTC to
the second.  `-j` (or `-o json|yaml` where offered) prints the full
message instead.
"""

from __future__ import annotations

import re
from typing import Any

from google.protobuf.message import Message

from cli.output import fmt_run_time, fmt_time
from cli.table import Col
from peloton.core import words

JOB_SUMMARY = [Col("ID"), Col("Name"), Col("Owner", drop=3),
               Col("State"), Col("Created", drop=4), Col("Completed", drop=5),
               Col("Total", drop=1), Col("Running", drop=2), Col("Succeeded", drop=2),
               Col("Failed", drop=2), Col("Killed", drop=2)]
TASK = [Col("Inst"), Col("Name", drop=6), Col("State"), Col("Healthy", drop=4),
        Col("Started", drop=5), Col("Run Time", drop=3), Col("Host", drop=2),
        Col("Message", wrap=True, min_width=32), Col("Reason", drop=7, wrap=True),
        Col("Termination", drop=6)]
POD_EVENTS = [Col("Mesos Task Id"), Col("Desired Task Id", drop=5), Col("State"),
              Col("Goal", drop=3), Col("Config", drop=6), Col("Desired Config", drop=7),
              Col("Healthy", drop=4), Col("Host", drop=2), Col("Message", wrap=True),
              Col("Reason", drop=8, wrap=True), Col("Time", drop=1)]
POD_EVENTS_V1 = [Col("Pod Id"), Col("Desired Pod Id", drop=5), Col("State"),
                 Col("Desired", drop=3), Col("Version", drop=6), Col("Desired Version", drop=7),
                 Col("Healthy", drop=4), Col("Host", drop=2), Col("Message", wrap=True),
                 Col("Reason", drop=8, wrap=True), Col("Time", drop=1)]
HOST = [Col("Hostname"), Col("State"), Col("CPU", drop=1), Col("Memory", drop=2),
        Col("Disk", drop=4), Col("GPU", drop=3), Col("Tasks", drop=1), Col("IP", drop=5),
        Col("HostPool", drop=6)]
UPDATE = [Col("Update-ID"), Col("State"), Col("Done"), Col("Failed"), Col("Remaining")]
STATELESS_SUMMARY = [Col("ID"), Col("Name"), Col("Owner", drop=4),
                     Col("State"), Col("Created", drop=5), Col("Total", drop=1),
                     Col("Running", drop=2), Col("Succeeded", drop=6), Col("Failed", drop=3),
                     Col("Killed", drop=6), Col("Workflow"), Col("Done", drop=3),
                     Col("Wf Failed", drop=6), Col("Current", drop=7)]
POD = [Col("Pod ID"), Col("Name", drop=7), Col("State"), Col("Container", drop=6),
       Col("Container State", drop=5), Col("Healthy", drop=4), Col("Started", drop=5),
       Col("Run Time", drop=3), Col("Host", drop=2), Col("Message", wrap=True, min_width=32),
       Col("Reason", drop=8, wrap=True), Col("Termination", drop=6)]
WORKFLOW_EVENTS = [Col("Workflow State"), Col("Workflow Type"), Col("Timestamp")]
UPDATE_EVENTS = [Col("Type"), Col("Timestamp"), Col("State")]
JOB_LIST = [Col("ID"), Col("Name"), Col("Type", drop=3),
            Col("State"), Col("Tasks", drop=1), Col("Pool", drop=4), Col("Created", drop=2)]

_UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Enum values that mean "not set" and read as blank.
_UNSET = re.compile(r"(^|_)(INVALID|UNKNOWN|UNSPECIFIED)$")
_PREFIXES = ("POD_STATE_", "HOST_STATE_", "WORKFLOW_STATE_", "WORKFLOW_TYPE_", "JOB_STATE_",
             "HEALTH_STATE_", "CONTAINER_STATE_", "TERMINATION_STATUS_REASON_", "JOB_TYPE_",
             "SLA_", "EVENT_")


def short(text: str) -> str:
    """Every UUID in `text` cut to its first 8 characters (a run keeps `-<inst>-<run>`)."""
    return _UUID.sub(r"\1", text)


def human_enum(name: str) -> str:
    """An enum value name for people: its type prefix off, unset values blank."""
    if _UNSET.search(name) and name != "HEALTH_UNKNOWN":
        return ""
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def enum_name(message: Message, field: str) -> str:
    """The name of the enum value in `message.field` (the number if unknown)."""
    value = getattr(message, field)
    enum = message.DESCRIPTOR.fields_by_name[field].enum_type
    found = enum.values_by_number.get(value) if enum is not None else None
    return found.name if found is not None else str(value)


def enum_label(message: Message, field: str) -> str:
    """`enum_name` for people (see `human_enum`)."""
    return human_enum(enum_name(message, field))


def _health(message: Message, field: str) -> str:
    name = enum_label(message, field)
    return "" if name in ("DISABLED", "HEALTH_UNKNOWN") else name


def _termination(status: Any) -> str:
    if not status.ByteSize():
        return ""
    return human_enum(enum_name(status, "reason"))


def _message_and_reason(message: str, reason: str) -> tuple[str, str]:
    """The Message column shows the reason when there is no message; a repeated one is blank."""
    if not message:
        return reason, ""
    return message, "" if reason == message else reason


def when(text: str) -> str:
    """An RFC 3339 time as `YYYY-MM-DD HH:MM:SS` (UTC); '' when unset."""
    return fmt_time(text).replace("T", " ").removesuffix("Z")


def job_summary_row(job: Any) -> list[Any]:
    """A v0 JobSummary."""
    rt = job.runtime
    stats = rt.taskStats
    return [short(job.id.value), job.name, job.owningTeam, enum_label(rt, "state"),
            when(rt.creationTime), when(rt.completionTime), job.instanceCount,
            stats.get("RUNNING", 0), stats.get("SUCCEEDED", 0), stats.get("FAILED", 0),
            stats.get("KILLED", 0)]


def job_list_row(job: Any, pools: dict[str, str]) -> list[Any]:
    """A v0 JobSummary in `job list`: tasks as running/total."""
    rt = job.runtime
    stats = rt.taskStats
    done = sum(stats.get(s, 0) for s in ("SUCCEEDED", "FAILED", "KILLED", "LOST"))
    running = stats.get("RUNNING", 0)
    parts = [f"{running} running"] if running or not done else []
    parts += [f"{done} done"] if done else []
    tasks = f"{', '.join(parts)} / {job.instanceCount}"
    return [short(job.id.value), job.name, enum_label(job, "type"), enum_label(rt, "state"),
            tasks, pools.get(job.respoolID.value, short(job.respoolID.value)),
            when(rt.creationTime)]


def task_row(task: Any) -> list[Any]:
    """A v0 TaskInfo."""
    rt = task.runtime
    message, reason = _message_and_reason(rt.message, rt.reason)
    return [task.instanceId, task.config.name, enum_label(rt, "state"), _health(rt, "healthy"),
            when(rt.startTime), fmt_run_time(rt.startTime, rt.completionTime), rt.host,
            message, reason, _termination(rt.terminationStatus)]


def pod_event_row(event: Any) -> list[Any]:
    """A v0 task.PodEvent."""
    message, reason = _message_and_reason(event.message, event.reason)
    return [short(event.taskId.value), short(event.desriedTaskId.value),
            human_enum(event.actualState), human_enum(event.goalState), event.configVersion,
            event.desiredConfigVersion, "" if event.healthy in ("INVALID", "DISABLED")
            else human_enum(event.healthy), event.hostname, message, reason,
            when(event.timestamp)]


def pod_event_v1_row(event: Any) -> list[Any]:
    """A v1alpha pod.PodEvent."""
    message, reason = _message_and_reason(event.message, event.reason)
    return [short(event.pod_id.value), short(event.desired_pod_id.value),
            human_enum(event.actual_state), human_enum(event.desired_state),
            event.version.value, event.desired_version.value,
            "" if event.healthy in ("HEALTH_STATE_INVALID", "HEALTH_STATE_DISABLED", "INVALID")
            else human_enum(event.healthy), event.hostname, message, reason,
            when(event.timestamp)]


def _of(used: float, total: float, unit: str = "") -> str:
    """"0.5/2" or, for sizes, "160 MiB/4 GiB"."""
    if unit == "mb":
        return f"{words.size_mb(used)}/{words.size_mb(total)}"
    return f"{words.number(used)}/{words.number(total)}"


def host_row(host: Any, cap: Any = None) -> list[Any]:
    """A v0 HostInfo, with its HostCapacity (allocated/total per kind) when known."""
    if cap is None:
        cells: list[Any] = ["", "", "", "", ""]
    else:
        t, a = cap.total, cap.allocated
        cells = [_of(a.cpu, t.cpu), _of(a.mem_mb, t.mem_mb, "mb"), _of(a.disk_mb, t.disk_mb, "mb"),
                 _of(a.gpu, t.gpu) if t.gpu else "", cap.tasks]
    state = enum_label(host, "state")
    if cap is not None and not cap.connected and state:
        state += " (gone)"
    return [host.hostname, state, *cells, host.ip, host.current_pool]


def update_row(info: Any) -> list[Any]:
    """A v0 UpdateInfo."""
    status = info.status
    return [short(info.updateId.value), enum_label(status, "state"), status.numTasksDone,
            status.numTasksFailed, status.numTasksRemaining]


def stateless_summary_row(job: Any) -> list[Any]:
    """A v1alpha stateless JobSummary."""
    status = job.status
    stats = status.pod_stats
    wf = status.workflow_status
    return [short(job.job_id.value), job.name, job.owning_team, enum_label(status, "state"),
            when(status.creation_time), job.instance_count,
            stats.get("POD_STATE_RUNNING", 0), stats.get("POD_STATE_SUCCEEDED", 0),
            stats.get("POD_STATE_FAILED", 0), stats.get("POD_STATE_KILLED", 0),
            enum_label(wf, "state"), wf.num_instances_completed, wf.num_instances_failed,
            len(wf.instances_current)]


def pod_rows(status: Any, pod_name: str) -> list[list[Any]]:
    """One row per container of a v1alpha PodStatus (a pod without containers gets one row)."""
    rows = []
    message, reason = _message_and_reason(status.message, status.reason)
    for c in status.containers_status:
        c_message, c_reason = _message_and_reason(c.message, c.reason)
        rows.append([short(status.pod_id.value), short(pod_name), enum_label(status, "state"),
                     c.name, enum_label(c, "state"), _health(c.healthy, "state"),
                     when(c.start_time), fmt_run_time(c.start_time, c.completion_time),
                     status.host, c_message or message, c_reason or reason,
                     _termination(c.terminationStatus)])
    if not rows:
        rows.append([short(status.pod_id.value), short(pod_name), enum_label(status, "state"),
                     "", "", "", when(status.start_time),
                     fmt_run_time(status.start_time, status.completion_time), status.host,
                     message, reason, ""])
    return rows


def workflow_event_row(event: Any) -> list[Any]:
    """A v1alpha WorkflowEvent."""
    return [enum_label(event, "state"), enum_label(event, "type"), when(event.timestamp)]
