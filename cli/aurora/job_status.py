"""`aurora job status`: every task of the matching jobs, active first, as Aurora prints them."""

from __future__ import annotations

import datetime
import json
from typing import Any

import click

from aurorabridge.thrift_api import api
from cli.aurora import options as o
from cli.aurora.context import AuroraContext, err, out
from cli.aurora.diff import plain
from cli.aurora.exit_codes import EXIT_INVALID_PARAMETER, EXIT_OK
from cli.aurora.jobs import job
from cli.aurora.options import JobKey
from cli.aurora.runner import verb

ACTIVE = frozenset(api.ACTIVE_STATES)
STATUS_NAMES = api.ScheduleStatus._VALUES_TO_NAMES
#: (Resource field, display name, unit), in Aurora's display order.
RESOURCES = (("numCpus", "CPU", " core(s)"), ("ramMb", "RAM", " MB"), ("diskMb", "Disk", " MB"),
             ("numGpus", "GPU", " GPU(s)"))


def resource_details(task: Any) -> list[str]:
    """`CPU: 0.5 core(s)`, `RAM: 128 MB`, ... of a task config."""
    found = []
    for fld, name, unit in RESOURCES:
        for resource in task.resources or []:
            value = getattr(resource, fld)
            if value is not None:
                found.append(f"{name}: {value}{unit}")
    return found


def task_json(task: Any) -> dict[str, Any]:
    """A ScheduledTask as JSON with status names and booleans, as `--write-json` prints it."""
    doc: dict[str, Any] = plain(task)
    doc["status"] = STATUS_NAMES[task.status]
    events = sorted(doc.get("taskEvents", []), key=lambda e: e["timestamp"])
    for event in events:
        event["status"] = STATUS_NAMES[event["status"]]
    doc["taskEvents"] = events
    config = doc.get("assignedTask", {}).get("task", {})
    for flag in ("isService", "production"):
        if flag in config:
            config[flag] = bool(config[flag])
    return doc


def task_text(task: Any) -> str:
    """One task in Aurora's human form."""
    assigned = task.assignedTask
    config = assigned.task
    lines = [f"\tTask role: {config.job.role}, env: {config.job.environment}, name: {config.job.name}, "
             f"instance: {assigned.instanceId}, status: {STATUS_NAMES[task.status]} on {assigned.slaveHost}"]
    lines.append("\t  " + ", ".join(resource_details(config)))
    if assigned.assignedPorts:
        lines.append(f"\t  assigned ports: {assigned.assignedPorts}")
        lines.append(f"\t  failure count: {task.failureCount} (max {config.maxTaskFailures})")
    lines.append("\t  events:")
    for event in sorted(task.taskEvents or [], key=lambda e: e.timestamp):
        when = datetime.datetime.fromtimestamp(event.timestamp / 1000)
        lines.append(f"\t   {when} {STATUS_NAMES[event.status]}: {event.message}")
    if config.metadata:
        lines.append("\t  metadata:")
        for md in config.metadata:
            lines.append(f"\t\t  (key: '{md.key}', value: '{md.value}')")
    lines.append("")
    return "\n".join(lines)


def _not_found(pattern: tuple[str, ...], write_json: bool) -> int:
    spec = "/".join(pattern)
    if write_json:
        out(json.dumps({"jobspec": spec, "error": "No matching jobs found"}, separators=(",", ":")))
        return EXIT_OK
    err(f"Found no jobs matching {spec}")
    return EXIT_INVALID_PARAMETER


@job.command("status")
@o.write_json_option
@click.argument("jobspec", type=o.PARTIAL_KEY)
@verb
def status(ctx: AuroraContext, jobspec: tuple[str, str, str, str], write_json: bool) -> int:
    """Get status information about a scheduled job or group of jobs (parts of the key may be
    left out or use shell-style globs).

    \b
    Example:
      peloton aurora job status devcluster/www/devel/hello
    """
    docs: list[Any] = []
    texts: list[str] = []
    for key in ctx.jobs_matching(jobspec):
        tasks = ctx.query(key)
        if not tasks:
            continue
        active = sorted((t for t in tasks if t.status in ACTIVE), key=lambda t: t.assignedTask.instanceId)
        inactive = sorted((t for t in tasks if t.status not in ACTIVE),
                          key=lambda t: t.assignedTask.instanceId)
        if write_json:
            docs.append({"job": str(key), "active": [task_json(t) for t in active],
                         "inactive": [task_json(t) for t in inactive]})
        else:
            texts.append(_render(key, active, inactive))
    if not docs and not texts:
        return _not_found(jobspec, write_json)
    out(json.dumps(docs, indent=2, separators=(",", ": ")) if write_json else "".join(texts))
    return EXIT_OK


def _render(key: JobKey, active: list[Any], inactive: list[Any]) -> str:
    parts = [f"Active tasks ({len(active)}):\n", *(task_text(t) for t in active),
             f"Inactive tasks ({len(inactive)}):\n", *(task_text(t) for t in inactive)]
    return "".join(parts)
