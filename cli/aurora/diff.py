"""What an update would change, as `aurora job diff` and `aurora update start` show it.

The scheduler's getJobUpdateDiff says which instances would be added,
removed, updated or left alone; for updated instances the task config they
run (read with getTasksStatus) and the local one are shown as a unified diff (rendered
as sorted JSON, the Thermos data expanded so each command is on its own lines).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from typing import Any

from aurorabridge.thrift_api import api
from cli.aurora.context import AuroraContext, out
from cli.aurora.exit_codes import EXIT_COMMAND_FAILURE, EXIT_INVALID_PARAMETER, CommandError
from cli.aurora.options import JobKey


def plain(value: Any) -> Any:
    """A Thrift struct as plain JSON-able data (None fields left out, sets sorted)."""
    if hasattr(value, "thrift_spec"):
        return {k: plain(v) for k, v in sorted(vars(value).items()) if v is not None}
    if isinstance(value, set | frozenset | list | tuple):
        items = [plain(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True)) if isinstance(
            value, set | frozenset) else items
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in sorted(value.items())}
    return value


def render_task(task: Any) -> list[str]:
    """A TaskConfig as lines of sorted JSON, executor data expanded."""
    doc = plain(task)
    executor = doc.get("executorConfig") or {}
    data = executor.get("data")
    if isinstance(data, str):
        try:
            executor["data"] = json.loads(data)
        except ValueError:
            pass
    text = json.dumps(doc, indent=2, sort_keys=True)
    return text.replace("\\n", "\n").splitlines()


def _ranges(ranges: Iterable[Any]) -> str:
    spans = []
    for r in sorted(ranges, key=lambda r: r.first):
        spans.append(f"[{r.first}]" if r.first == r.last else f"[{r.first}-{r.last}]")
    return ", ".join(spans)


def show_diff(local: Iterable[Any], remote: Iterable[Any]) -> None:
    """Print the unified diff of remote task configs against local ones."""
    old = [line for t in remote for line in render_task(t)]
    new = [line for t in local for line in render_task(t)]
    for line in difflib.unified_diff(old, new, "scheduler", "local", lineterm=""):
        out(line)


def _running_configs(ctx: AuroraContext, key: JobKey) -> dict[int, Any]:
    """Instance -> the task config its active task runs."""
    query = api.TaskQuery(jobKeys=[key.to_thrift()], statuses=set(api.ACTIVE_STATES))
    resp = ctx.check(ctx.call(key.cluster, "getTasksStatus", query), err_code=EXIT_INVALID_PARAMETER,
                     err_msg="Could not find job to diff against")
    return {t.assignedTask.instanceId: t.assignedTask.task
            for t in resp.result.scheduleStatusResult.tasks or []}


def _distinct(configs: Iterable[Any]) -> list[Any]:
    found: list[Any] = []
    for config in configs:
        if config not in found:
            found.append(config)
    return found


def show_update_diff(ctx: AuroraContext, key: JobKey, request: Any, local_task: Any | None) -> None:
    """Print what updating `key` with `request` would do (exit 4 if the scheduler cannot say)."""
    resp = ctx.check(ctx.call(key.cluster, "getJobUpdateDiff", request), err_code=EXIT_COMMAND_FAILURE,
                     err_msg="Error getting diff info from scheduler")
    diff = resp.result.getJobUpdateDiffResult
    out("This job update will:")
    for header, summaries in (("add instances:", diff.add), ("remove instances:", diff.remove),
                              ("update instances:", diff.update),
                              ("not change instances:", diff.unchanged)):
        summaries = sorted(summaries or [], key=lambda s: min(r.first for r in s.instances))
        if not summaries:
            continue
        if local_task is not None and header == "update instances:":
            running = _running_configs(ctx, key)
            for summary in summaries:
                out(f"{header} {_ranges(summary.instances)}")
                out("with diff:\n")
                ids = {i for r in summary.instances for i in range(r.first, r.last + 1)}
                remote = _distinct(running[i] for i in sorted(ids) if i in running)
                show_diff([local_task], remote or [summary.config])
                out("")
        else:
            out(f"{header} {_ranges(r for s in summaries for r in s.instances)}")


def show_cron_diff(ctx: AuroraContext, key: JobKey, local_tasks: list[Any]) -> int:
    """A cron job has no update diff: compare with its active tasks' configs."""
    query = api.TaskQuery(jobKeys=[key.to_thrift()], statuses=set(api.ACTIVE_STATES))
    resp = ctx.check(ctx.call(key.cluster, "getTasksStatus", query), err_code=EXIT_INVALID_PARAMETER,
                     err_msg="Could not find job to diff against")
    tasks = resp.result.scheduleStatusResult.tasks
    if not tasks:
        raise CommandError(EXIT_COMMAND_FAILURE, f"No tasks found for job {key}")
    show_diff(local_tasks, [t.assignedTask.task for t in tasks])
    return 0
