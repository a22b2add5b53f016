"""The shell command a task runs, from its Thermos executor data or a plain command.

Aurora ships each task as Thermos JSON in `executorConfig.data`:
`{"task": {"processes": [{"name", "cmdline", "final", ...}],
"constraints": [{"order": ["a", "b"]}], ...}, ...}`.  There is no Thermos
executor on a Peloton agent, so the bridge runs the processes itself, as one
shell command: processes in an order that honours every `order` constraint
(declaration order otherwise), `final` processes last, each in a subshell,
chained with `&&` so a failing process fails the task.  (Thermos runs
unordered processes concurrently; a task whose processes must all stay up
at once should list them as one process.)

Thermos template variables are bound by the executor at run time; here they
become environment variables the agent sets: `{{mesos.instance}}` ->
`$PELOTON_INSTANCE_ID`, `{{thermos.task_id}}` -> `$PELOTON_TASK_ID`,
`{{mesos.hostname}}` -> `$(hostname)`, `{{thermos.ports[http]}}` ->
`$PORT_HTTP` (the env name the bridge gives each named port).  Other
templates are left as written.

Without Thermos data: a non-JSON `data` of a custom executor is taken as the
shell command itself; a Docker image alone runs its own entrypoint.
"""

from __future__ import annotations

import json
import re
from typing import Any

from peloton.core.errors import InvalidArgument

AURORA_EXECUTOR_NAME = "AuroraExecutor"
_TEMPLATE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
_PORT = re.compile(r"^thermos\.ports\[\s*([^\]]+?)\s*\]$")
_FIXED = {"mesos.instance": "${PELOTON_INSTANCE_ID}", "thermos.task_id": "${PELOTON_TASK_ID}",
          "mesos.hostname": "$(hostname)"}


def port_env_name(port: str) -> str:
    """The environment variable holding the value of named port `port`."""
    return "PORT_" + re.sub(r"[^A-Za-z0-9]", "_", port).upper()


def bind_templates(cmdline: str) -> str:
    """Replace the Thermos templates the executor would bind with shell expansions."""
    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        port = _PORT.match(name)
        if port:
            return "${" + port_env_name(port.group(1)) + "}"
        return _FIXED.get(name, match.group(0))

    return _TEMPLATE.sub(sub, cmdline)


def _ordered(processes: list[dict[str, Any]], constraints: list[Any]) -> list[dict[str, Any]]:
    names = [p["name"] for p in processes]
    after: dict[str, set[str]] = {n: set() for n in names}
    for constraint in constraints:
        order = constraint.get("order") if isinstance(constraint, dict) else None
        for before, later in zip(order or [], (order or [])[1:], strict=False):
            if later in after and before in after:
                after[later].add(before)
    final = {p["name"] for p in processes if p.get("final")}
    result: list[str] = []
    pending = [n for n in names if n not in final] + [n for n in names if n in final]
    while pending:
        ready = next((n for n in pending if after[n] <= set(result)), None)
        if ready is None:
            raise InvalidArgument(f"Thermos process order constraints form a cycle among {pending}",
                                  field="executorConfig.data")
        result.append(ready)
        pending.remove(ready)
    by_name = {p["name"]: p for p in processes}
    return [by_name[n] for n in result]


def thermos_command(data: str) -> str:
    """The combined shell command of a Thermos task (InvalidArgument when malformed)."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise InvalidArgument(f"executorConfig.data is not Thermos JSON: {exc}",
                              field="executorConfig.data") from None
    task = doc.get("task") if isinstance(doc, dict) else None
    if not isinstance(task, dict):
        task = {}
    processes = task.get("processes")
    if not isinstance(processes, list) or not processes:
        raise InvalidArgument("Thermos task has no processes (task.processes is empty)",
                              field="executorConfig.data")
    checked: list[dict[str, Any]] = []
    for i, proc in enumerate(processes):
        if not isinstance(proc, dict) or not isinstance(proc.get("cmdline"), str):
            raise InvalidArgument(f"Thermos process {i} has no cmdline", field="executorConfig.data")
        checked.append({**proc, "name": str(proc.get("name") or f"process{i}")})
    if len({p["name"] for p in checked}) != len(checked):
        raise InvalidArgument("Thermos process names must be unique", field="executorConfig.data")
    found = task.get("constraints")
    constraints: list[Any] = found if isinstance(found, list) else []
    parts = [f"(\n{bind_templates(p['cmdline'])}\n)" for p in _ordered(checked, constraints)]
    return " && ".join(parts)


def task_command(task: Any) -> str | None:
    """The task's shell command; None when a Docker image's own entrypoint should run."""
    executor = task.executorConfig
    data = executor.data if executor is not None else None
    if data and data.strip():
        stripped = data.lstrip()
        if (executor.name == AURORA_EXECUTOR_NAME) or stripped.startswith("{"):
            return thermos_command(data)
        return str(data).strip()
    container = task.container
    if container is not None and container.docker is not None and container.docker.image:
        return None
    mesos = container.mesos if container is not None else None
    if mesos is not None and mesos.image is not None:
        return None
    raise InvalidArgument("task has nothing to run: give Thermos processes in executorConfig.data, "
                          "a shell command as executor data, or a container image",
                          field="executorConfig")
