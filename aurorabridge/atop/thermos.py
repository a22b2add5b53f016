"""The shell command a task runs, from its Thermos executor data or a plain command.

Aurora ships each task as Thermos JSON in `executorConfig.data`:
`{"task": {"processes": [{"name", "cmdline", "max_failures", "daemon", "ephemeral",
"min_duration", "final"}], "constraints": [{"order": ["a", "b"]}], "max_failures",
"max_concurrency", "finalization_wait"}, ...}`.  There is no Thermos executor on a
Peloton agent, so the task's command runs the bridge's Thermos runner
(aurorabridge/thermos_runner.py) on that task, which keeps Thermos's semantics: order
constraints, concurrency, retries up to max_failures spaced by min_duration, daemon and
ephemeral processes, final processes after the others or after a kill, the task's
max_failures (peloton/core/thermos_plan.py has the rules).  The task is checked here, as
Thermos would check it, so a bad one is refused at create, naming the field.

How the runner reaches the task: its source travels inside the command.  The command is
`exec python3 -I -c BOOT --json TASK`, where BOOT (a few lines) installs
peloton/core/thermos_spec.py, thermos_plan.py and the runner, zlib-compressed and
base64-encoded, as modules and calls the runner's main, and TASK is the checked task as
plain JSON (its command lines stay readable in the pod spec and in `ps`).  Nothing has to
be installed on agents, the task's user need not be able to read this repository, and it
works the same in a container image: all a task needs is a `python3` (3.8 or newer;
/usr/bin/python3 first, then $PATH).  The command is ~20 KB, far below the 128 KB Linux
allows one argument.  `python3 -m aurorabridge.thermos_runner FILE` runs the same code
from a checkout.

Thermos template variables are bound by the executor at run time; here they become
environment variables the agent sets, which each process's shell expands:
`{{mesos.instance}}` -> `$PELOTON_INSTANCE_ID`, `{{thermos.task_id}}` -> `$PELOTON_TASK_ID`,
`{{mesos.hostname}}` -> `$(hostname)`, `{{thermos.ports[http]}}` -> `$PORT_HTTP` (the env
name the bridge gives each named port).  Other templates are left as written.

finalization_wait is capped at 60 s, as on Aurora; a Thermos task's pod gets that plus
KILL_MARGIN_SECS as its kill grace period, so a kill leaves the runner time to stop the
processes and run the final ones before the agent's SIGKILL.

Without Thermos data: a non-JSON `data` of a custom executor is taken as the shell
command itself; a Docker image alone runs its own entrypoint.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import shlex
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from aurorabridge import thermos_runner
from peloton.core import thermos_plan, thermos_spec
from peloton.core.errors import InvalidArgument
from peloton.core.thermos_spec import TaskSpec, ThermosConfigError, parse_task

AURORA_EXECUTOR_NAME = "AuroraExecutor"
#: Aurora caps finalization_wait (docs/reference/configuration.md).
MAX_FINALIZATION_WAIT = 60.0
#: Kill grace beyond finalization_wait, for the runner's own SIGKILLs and exit.
KILL_MARGIN_SECS = 2
_TEMPLATE = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")
_PORT = re.compile(r"^thermos\.ports\[\s*([^\]]+?)\s*\]$")
_FIXED = {"mesos.instance": "${PELOTON_INSTANCE_ID}", "thermos.task_id": "${PELOTON_TASK_ID}",
          "mesos.hostname": "$(hostname)"}
#: Module name the runner's source is installed under in the task's Python.
RUNNER_MODULE = "peloton_thermos_runner"
_NO_PYTHON = ("thermos: this task needs python3 in its environment (Aurora tasks run under "
              "the bridge's Python Thermos runner)")


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


def thermos_task(data: str) -> TaskSpec:
    """The checked Thermos task of executor data `data`, templates bound, finalization_wait
    capped (InvalidArgument when malformed or invalid, naming the field)."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise InvalidArgument(f"executorConfig.data is not Thermos JSON: {exc}",
                              field="executorConfig.data") from None
    if isinstance(doc, dict) and not isinstance(doc.get("task"), dict):
        doc = {"task": {}}
    try:
        spec = parse_task(doc)
    except ThermosConfigError as exc:
        raise InvalidArgument(str(exc), field=f"executorConfig.data.{exc.field}") from None
    return replace(spec, finalization_wait=min(spec.finalization_wait, MAX_FINALIZATION_WAIT),
                   processes=tuple(replace(p, cmdline=bind_templates(p.cmdline))
                                   for p in spec.processes))


def _packed(path: str | None) -> str:
    assert path is not None
    return base64.b64encode(zlib.compress(Path(path).read_bytes(), 9)).decode("ascii")


@functools.cache
def runner_program() -> str:
    """The Python program (for `python3 -c`) that installs the runner's modules and runs it."""
    modules = [("peloton.core.thermos_spec", thermos_spec.__file__),
               ("peloton.core.thermos_plan", thermos_plan.__file__),
               (RUNNER_MODULE, thermos_runner.__file__)]
    lines = [
        "import base64,sys,types,zlib",
        "def m(n,s):",
        " x=types.ModuleType(n);x.__file__='<'+n+'>';sys.modules[n]=x",
        " if s is None:x.__path__=[]",
        " else:exec(compile(zlib.decompress(base64.b64decode(s)),x.__file__,'exec'),x.__dict__)",
        " p,_,c=n.rpartition('.')",
        " if p:setattr(sys.modules[p],c,x)",
        " return x",
        "m('peloton',None);m('peloton.core',None)",
        *(f"r=m({name!r},{_packed(path)!r})" for name, path in modules),
        "sys.exit(r.main(sys.argv[1:]))",
    ]
    return "\n".join(lines)


def runner_command(spec: TaskSpec) -> str:
    """The shell command running `spec` under the Thermos runner with the machine's python3."""
    task = json.dumps(spec.to_doc(), separators=(",", ":"), ensure_ascii=True)
    return (f'p=/usr/bin/python3; [ -x "$p" ] || p=$(command -v python3) || '
            f"{{ echo {shlex.quote(_NO_PYTHON)} >&2; exit 127; }}; "
            f'exec "$p" -I -c {shlex.quote(runner_program())} --json {shlex.quote(task)}')


def thermos_command(data: str) -> str:
    """The shell command of a Thermos task (InvalidArgument when malformed)."""
    return runner_command(thermos_task(data))


def kill_grace_secs(task: Any) -> int | None:
    """The kill grace period a Thermos task needs (its finalization_wait plus a margin),
    None for other tasks (validated tasks only)."""
    executor = task.executorConfig
    if executor is None or not executor.data or not _is_thermos(executor):
        return None
    wait = thermos_task(executor.data).finalization_wait
    return int(-(-wait // 1)) + KILL_MARGIN_SECS


def _is_thermos(executor: Any) -> bool:
    return bool(executor.name == AURORA_EXECUTOR_NAME or str(executor.data).lstrip().startswith("{"))


def task_command(task: Any) -> str | None:
    """The task's shell command; None when a Docker image's own entrypoint should run."""
    executor = task.executorConfig
    data = executor.data if executor is not None else None
    if data and data.strip():
        if _is_thermos(executor):
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
