"""Converters between Mesos v1 JSON (what the v1 scheduler HTTP API sends and receives) and backend values.

Named by direction: `*_to_json` builds a Mesos message, `*_from_json`
reads one.  Mesos writes its protos as JSON with the .proto field names,
enums by name, bytes in base64 and times in seconds.

Resources a host may use are those unreserved ("*") or reserved to our
role; persistent volumes, mount/path disks and shared resources are left
out (the backend cannot use them).
"""

from __future__ import annotations

import base64
import binascii
import re
import socket
import uuid
from typing import Any

from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import HealthCheckSpec, HealthCheckType, UriSpec
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.base import BackendHost, StatusUpdate
from peloton.hostmgr.backends.task_env import environment

Json = dict[str, Any]

#: Mesos task states as ours.  STAGING is only seen in reconciliation answers; KILLING (sent
#: only to TASK_KILLING_STATE frameworks) is still running; the partition-aware states
#: (sent only to PARTITION_AWARE frameworks) all mean the run is no longer known to run.
STATE_FROM_MESOS: dict[str, TaskState] = {
    "TASK_STAGING": TaskState.STARTING, "TASK_STARTING": TaskState.STARTING,
    "TASK_RUNNING": TaskState.RUNNING, "TASK_KILLING": TaskState.RUNNING,
    "TASK_FINISHED": TaskState.SUCCEEDED, "TASK_FAILED": TaskState.FAILED,
    "TASK_ERROR": TaskState.FAILED, "TASK_KILLED": TaskState.KILLED, "TASK_LOST": TaskState.LOST,
    "TASK_DROPPED": TaskState.LOST, "TASK_GONE": TaskState.LOST,
    "TASK_GONE_BY_OPERATOR": TaskState.LOST, "TASK_UNREACHABLE": TaskState.LOST,
    "TASK_UNKNOWN": TaskState.LOST,
}
#: The command executor's message for a process that exited ("Command exited with status 3").
_EXITED = re.compile(r"exited with status (\d+)")
_HEALTH_CHECK_TYPE = {HealthCheckType.COMMAND: "COMMAND", HealthCheckType.HTTP: "HTTP",
                      HealthCheckType.GRPC: "TCP"}  # Mesos has no gRPC check: probe the port


# -- ids ----------------------------------------------------------------------------------
def uuid_from_json(value: str) -> str:
    """A TaskStatus uuid (base64 of 16 bytes) as a canonical UUID string."""
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return str(uuid.UUID(bytes=raw)) if len(raw) == 16 else value


def uuid_to_json(text: str) -> str:
    """Inverse of uuid_from_json, for ACKNOWLEDGE."""
    try:
        return base64.b64encode(uuid.UUID(text).bytes).decode()
    except ValueError:
        return text


def value_of(msg: Json, key: str) -> str:
    """The `value` of an id field (`{"task_id": {"value": "..."}}`), "" when absent."""
    return str((msg.get(key) or {}).get("value", ""))


# -- status updates -----------------------------------------------------------------------
def status_from_json(status: Json, hostname: str, update_uuid: str,
                     health_checked: bool = False) -> StatusUpdate:
    """A Mesos TaskStatus as the host manager's consumers see it.

    Mesos has no exit code field: it is read from the command executor's
    message, and the message says it the way every backend does
    ("exited with code 3").  An unknown state reads as LOST.
    """
    state = STATE_FROM_MESOS.get(str(status.get("state", "")), TaskState.LOST)
    message = str(status.get("message", ""))
    exit_code: int | None = None
    exited = _EXITED.search(message)
    if exited and state in (TaskState.SUCCEEDED, TaskState.FAILED):
        exit_code = int(exited.group(1))
    elif state is TaskState.SUCCEEDED:
        exit_code = 0
    if exit_code is not None:
        said = f"exited with code {exit_code}"
        plain = message in ("", f"Command exited with status {exit_code}")
        message = said if plain else f"{said} ({message})"
    healthy: HealthState | None = None
    if "healthy" in status:
        healthy = HealthState.HEALTHY if status["healthy"] else HealthState.UNHEALTHY
    elif health_checked and state is TaskState.RUNNING:
        healthy = HealthState.HEALTH_UNKNOWN
    return StatusUpdate(
        uuid=update_uuid, run_id=value_of(status, "task_id"), state=state, hostname=hostname,
        agent_id=value_of(status, "agent_id"), timestamp=float(status.get("timestamp", 0.0)),
        message=message, reason=str(status.get("reason", "")), exit_code=exit_code,
        healthy=healthy)


# -- resources and hosts ------------------------------------------------------------------
def role_of(res: Json) -> str:
    """The role a resource is reserved to; "*" when unreserved."""
    if res.get("reservations"):
        return str(res["reservations"][-1].get("role", "*"))
    return str(res.get("role", "*"))


def usable(res: Json, role: str) -> bool:
    """Can a task of `role` use this resource (see the module docstring)?"""
    disk = res.get("disk") or {}
    return (role_of(res) in ("*", role) and "persistence" not in disk and "source" not in disk
            and "shared" not in res)


def scalar_sum(resources: list[Json], name: str, revocable: bool = False) -> float:
    """Total of one scalar resource (regular or revocable)."""
    return sum(float(r.get("scalar", {}).get("value", 0.0)) for r in resources
               if r.get("name") == name and ("revocable" in r) == revocable)


def port_ranges(resources: list[Json]) -> tuple[PortRange, ...]:
    """The non-revocable `ports` ranges, sorted."""
    spans = sorted((int(s["begin"]), int(s["end"])) for r in resources
                   if r.get("name") == "ports" and "revocable" not in r
                   for s in r.get("ranges", {}).get("range", []))
    return tuple(PortRange(b, e) for b, e in spans)


def labels_from_attributes(attributes: list[Json]) -> tuple[Label, ...]:
    """Agent attributes as host labels: text and scalars as they are, one label per SET item,
    ranges in Mesos' text form ("[31000-32000]")."""
    out: list[Label] = []
    for attr in attributes:
        name, kind = str(attr.get("name", "")), attr.get("type", "TEXT")
        if kind == "SCALAR":
            out.append(Label(name, f"{float(attr['scalar']['value']):g}"))
        elif kind == "SET":
            out.extend(Label(name, str(item)) for item in attr.get("set", {}).get("item", []))
        elif kind == "RANGES":
            spans = ",".join(f"{s['begin']}-{s['end']}" for s in attr["ranges"].get("range", []))
            out.append(Label(name, f"[{spans}]"))
        else:
            out.append(Label(name, str(attr.get("text", {}).get("value", ""))))
    return tuple(out)


def host_from_agent_json(agent: Json, role: str) -> BackendHost:
    """One agent of a GET_AGENTS answer as a host: its total resources our role may use."""
    info = agent["agent_info"]
    resources = [r for r in (agent.get("total_resources") or info.get("resources", []))
                 if usable(r, role)]
    ip_port = str(agent.get("pid", "")).rpartition("@")[2]
    address = ip_port or f"{info['hostname']}:{info.get('port', 5051)}"
    return BackendHost(
        hostname=str(info["hostname"]), agent_id=value_of(info, "id"),
        capacity=Resources(cpu=scalar_sum(resources, "cpus"), mem_mb=scalar_sum(resources, "mem"),
                           disk_mb=scalar_sum(resources, "disk"),
                           gpu=scalar_sum(resources, "gpus")),
        ports=port_ranges(resources), labels=labels_from_attributes(info.get("attributes", [])),
        revocable_cpu=scalar_sum(resources, "cpus", revocable=True), address=address,
        file_address=address)


# -- launches -----------------------------------------------------------------------------
def _health_check_to_json(hc: HealthCheckSpec) -> Json:
    out: Json = {"type": _HEALTH_CHECK_TYPE[hc.type], "delay_seconds": hc.initial_interval_secs,
                 "interval_seconds": hc.interval_secs, "timeout_seconds": hc.timeout_secs,
                 "consecutive_failures": hc.max_consecutive_failures}
    if hc.type is HealthCheckType.COMMAND:
        out["command"] = {"shell": True, "value": hc.command}
    elif hc.type is HealthCheckType.HTTP:
        out["http"] = {"scheme": hc.http_scheme, "port": hc.http_port, "path": hc.http_path}
    else:
        out["tcp"] = {"port": hc.http_port}
    return out


def uri_to_json(uri: UriSpec) -> Json:
    """A URI for the Mesos fetcher.  Our `#sha256=` fragment is not sent: the fetcher would
    take it into the file's name, and it cannot check a digest (the local agent does)."""
    out: Json = {"value": uri.value.partition("#")[0], "executable": uri.executable,
                 "extract": uri.extract, "cache": uri.cache}
    if uri.output_file:
        out["output_file"] = uri.output_file
    return out


def task_info_to_json(task: LaunchSpec, agent_id: str, resources: list[Json]) -> Json:
    """A TaskInfo for the command executor; the task id is our run id."""
    spec, cmd = task.spec, task.spec.command
    command: Json = {"shell": cmd.shell, "value": cmd.value, "environment": {"variables": [
        {"name": k, "value": v} for k, v in environment(task).items()]}}
    if not cmd.shell:
        command["arguments"] = list(cmd.arguments) or [cmd.value]
    if cmd.user:
        command["user"] = cmd.user
    if cmd.uris:
        command["uris"] = [uri_to_json(uri) for uri in cmd.uris]
    info: Json = {"name": spec.name or task.run_id, "task_id": {"value": task.run_id},
                  "agent_id": {"value": agent_id}, "resources": resources, "command": command,
                  "kill_policy": {"grace_period": {
                      "nanoseconds": int(spec.kill_grace_period_secs * 1e9)}}}
    if spec.labels:
        info["labels"] = {"labels": [{"key": lb.key, "value": lb.value} for lb in spec.labels]}
    if spec.container_image or spec.fd_limit > 0:
        mesos: Json = {}
        if spec.container_image:
            mesos["image"] = {"type": "DOCKER", "docker": {"name": spec.container_image}}
        info["container"] = {"type": "MESOS", "mesos": mesos}
        if spec.fd_limit > 0:
            info["container"]["rlimit_info"] = {"rlimits": [
                {"type": "RLMT_NOFILE", "soft": spec.fd_limit, "hard": spec.fd_limit}]}
    if spec.health_check is not None and spec.health_check.enabled:
        info["health_check"] = _health_check_to_json(spec.health_check)
    return info


def framework_to_json(*, name: str, role: str, principal: str, user: str,
                      failover_timeout: float, gpu: bool, revocable: bool,
                      framework_id: str) -> Json:
    """FrameworkInfo for SUBSCRIBE (checkpointing on: tasks survive agent restarts)."""
    caps = ([{"type": "GPU_RESOURCES"}] if gpu else []) + (
        [{"type": "REVOCABLE_RESOURCES"}] if revocable else [])
    info: Json = {"user": user, "name": name, "role": role, "principal": principal,
                  "failover_timeout": failover_timeout, "checkpoint": True,
                  "hostname": socket.gethostname(), "capabilities": caps}
    if framework_id:
        info["id"] = {"value": framework_id}
    return info
