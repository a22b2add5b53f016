"""What the agent runs (RunSpec) and what it reports (Update).

A RunSpec is the part of a task's spec the agent needs, with the ports the
host manager assigned.  It is stored in each sandbox (run.json) so that
an agent restarted after `kill -9` knows, for every run it adopts, how to
health-check it, what grace to give it and how to describe its end.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from peloton.core.model.ids import RunId
from peloton.core.model.task import CommandSpec, HealthCheckSpec, HealthCheckType
from peloton.core.remote_volume import RemoteVolume
from peloton.core.states import HealthState, TaskState

#: Variables a task inherits from the agent; everything else it gets is set explicitly.
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "USER", "LOGNAME", "TMPDIR")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"



@functools.cache
def _base_environment() -> tuple[tuple[str, str], ...]:
    base = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    base.setdefault("PATH", DEFAULT_PATH)
    return tuple(base.items())


def _inherited_environment() -> dict[str, str]:
    """What every task inherits from the agent (read once: the agent's own environment is fixed)."""
    return dict(_base_environment())


@dataclass(frozen=True, slots=True)
class PortBinding:
    """A port assigned to a run; `env_name` is an extra variable naming it."""

    name: str
    port: int
    env_name: str = ""


@dataclass(frozen=True, slots=True)
class VolumeMount:
    """A run's persistent volume (volumes.py): which one, where in the sandbox, how big, and
    whether an earlier run created it here (then it must exist)."""

    volume_id: str
    container_path: str
    size_mb: float
    created: bool = False


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run as the agent executes it."""

    run_id: str
    command: CommandSpec
    name: str = ""
    cpu: float = 0.0
    mem_mb: float = 0.0
    ports: tuple[PortBinding, ...] = ()
    health_check: HealthCheckSpec | None = None
    kill_grace_secs: float = 5.0
    fd_limit: int = 0
    #: Runs on slack cpu: its cpu is not counted as unused allocation (slack.py).
    revocable: bool = False
    #: The identity the task runs as (peloton/agent/identity.py), set by the agent at
    #: launch; uid -1: not decided yet (or an agent that does not switch users).
    uid: int = -1
    gid: int = -1
    groups: tuple[int, ...] = ()
    run_as: str = ""
    home: str = ""
    #: The run's persistent volume, linked into its sandbox at launch (not kept in run.json:
    #: an adopted run already has its link).
    volume: VolumeMount | None = None
    #: Files fetched before the run starts (remote_volumes.py; not kept in run.json either:
    #: an adopted run already has them), and why they cannot be, when they cannot.
    remote: tuple[RemoteVolume, ...] = ()
    remote_error: str = ""

    @property
    def dynamic_uid(self) -> bool:
        """Whether the run's uid is a dynamic one (held machine-wide while it lives; uidpool.py)."""
        return self.uid >= 0 and not self.run_as

    def to_json(self) -> str:
        """Compact JSON for run.json (by hand: dataclasses.asdict is slow on the hot path)."""
        cmd = self.command
        return json.dumps({
            "run_id": self.run_id, "name": self.name, "cpu": self.cpu, "mem_mb": self.mem_mb,
            "kill_grace_secs": self.kill_grace_secs, "fd_limit": self.fd_limit,
            "revocable": self.revocable,
            "command": {"value": cmd.value, "shell": cmd.shell, "arguments": cmd.arguments,
                        "environment": cmd.environment, "user": cmd.user},
            "ports": [{"name": p.name, "port": p.port, "env_name": p.env_name} for p in self.ports],
            "health_check": None if self.health_check is None else asdict(self.health_check),
            "uid": self.uid, "gid": self.gid, "groups": list(self.groups), "run_as": self.run_as,
            "home": self.home,
        }, separators=(",", ":"))

    @staticmethod
    def from_dict(d: dict[str, Any]) -> RunSpec:
        """Inverse of to_json (after json.loads); KeyError/TypeError/ValueError when damaged."""
        cmd = d["command"]
        hc = d.get("health_check")
        return RunSpec(
            run_id=d["run_id"], name=d.get("name", ""), cpu=d.get("cpu", 0.0),
            mem_mb=d.get("mem_mb", 0.0), kill_grace_secs=d.get("kill_grace_secs", 5.0),
            fd_limit=d.get("fd_limit", 0), revocable=d.get("revocable", False),
            command=CommandSpec(
                value=cmd["value"], shell=cmd["shell"], arguments=tuple(cmd["arguments"]),
                environment=tuple((k, v) for k, v in cmd["environment"]),
                user=cmd.get("user", "")),
            ports=tuple(PortBinding(**p) for p in d.get("ports", ())),
            uid=int(d.get("uid", -1)), gid=int(d.get("gid", -1)),
            groups=tuple(int(g) for g in d.get("groups", ())), run_as=str(d.get("run_as", "")),
            home=str(d.get("home", "")),
            health_check=None if hc is None else HealthCheckSpec(
                **{**hc, "type": HealthCheckType(hc["type"])}))

    def environment(self, sandbox: str) -> dict[str, str]:
        """The task's environment: a few inherited variables, Peloton's, ports, then the spec's own.

        Ports appear as PORT0.. in the order assigned, PORT_<NAME>, the
        spec's env_name, and PORT for the first one, as Peloton and
        Marathon tasks expect; the spec's variables win over all of these.
        """
        env = _inherited_environment()
        if self.uid >= 0:
            # Who the task is, not who the agent is.
            name = self.run_as or f"peloton-task-{self.uid}"
            env.update(USER=name, LOGNAME=name, HOME=self.home or sandbox)
        run = RunId.parse(self.run_id)
        env.update(PELOTON_JOB_ID=run.job_id, PELOTON_INSTANCE_ID=str(run.instance),
                   PELOTON_TASK_ID=self.run_id, MESOS_TASK_ID=self.run_id, MESOS_SANDBOX=sandbox)
        for i, port in enumerate(self.ports):
            env[f"PORT{i}"] = str(port.port)
            env[f"PORT_{port.name.upper().replace('-', '_')}"] = str(port.port)
            if port.env_name:
                env[port.env_name] = str(port.port)
        if self.ports:
            env.setdefault("PORT", str(self.ports[0].port))
        env.update(self.command.environment)
        return env

    def argv(self) -> tuple[str, list[str]]:
        """The program and its full argv, following Mesos' CommandInfo rules."""
        cmd = self.command
        if cmd.shell:
            return "/bin/sh", ["sh", "-c", cmd.value]
        return cmd.value, list(cmd.arguments) or [cmd.value]


@dataclass(frozen=True, slots=True)
class Update:
    """A status update as the agent produces it (the host manager adds the host)."""

    uuid: str
    run_id: str
    state: TaskState
    timestamp: float
    message: str = ""
    reason: str = ""
    exit_code: int | None = None
    healthy: HealthState | None = None
    #: Extra facts for ListTasks; not part of the update on the wire.
    pid: int = field(default=0, compare=False)


def stable_uuid(run_id: str, state: TaskState) -> str:
    """The uuid of a run's STARTING/RUNNING/terminal update: `<run id>/<state>`.

    Stable, so the same transition reported again (after an agent restart,
    or on reconciliation) deduplicates at every consumer; unique, because
    run ids are never reused.  Not an RFC 4122 UUID: uuid5() costs more
    than the rest of a status update on the agent's hot path.
    """
    return f"{run_id}/{state.value}"
