"""What a launched run sees, the same on every backend that builds its own process or container:
its ports (static ones keep their number, assigned numbers win) and its environment
(PELOTON_JOB_ID, PELOTON_INSTANCE_ID, PELOTON_TASK_ID, PORT0.., PORT_<NAME>, the port's own
variable name, PORT, then the spec's environment, which wins), as our agent gives them.
"""

from __future__ import annotations

from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import RunId
from peloton.core.model.sched import LaunchSpec

__all__ = ["environment", "task_ports"]


def task_ports(task: LaunchSpec) -> list[tuple[str, int, str]]:
    """(name, number, env name) of every port the run gets: static ones keep their value,
    assigned numbers win (as for our own agent)."""
    assigned = dict(task.ports)
    out = []
    for port in task.spec.ports:
        number = assigned.pop(port.name, port.value)
        if number:
            out.append((port.name, number, port.env_name))
    return out + [(name, number, "") for name, number in assigned.items()]


def environment(task: LaunchSpec) -> dict[str, str]:
    """What the run sees besides the platform's own variables: PELOTON_*, the ports (PORT0.., PORT_<NAME>,
    the spec's env name, PORT), then the spec's environment, which wins."""
    env: dict[str, str] = {}
    try:
        run = RunId.parse(task.run_id)
        env.update(PELOTON_JOB_ID=run.job_id, PELOTON_INSTANCE_ID=str(run.instance))
    except InvalidArgument:
        pass  # not a Peloton run id (tools, tests): the other variables still apply
    env["PELOTON_TASK_ID"] = task.run_id
    ports = task_ports(task)
    for i, (name, number, env_name) in enumerate(ports):
        env[f"PORT{i}"] = env[f"PORT_{name.upper().replace('-', '_')}"] = str(number)
        if env_name:
            env[env_name] = str(number)
    if ports:
        env.setdefault("PORT", str(ports[0][1]))
    env.update(task.spec.command.environment)
    return env
