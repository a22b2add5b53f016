"""Converters between the agent protocol (pelotonpy.internal.agent) and backend values.

Named by direction: `*_to_pb` builds a message for an agent, `*_from_pb`
reads one.  The agent has its own converters (peloton/agent/wire.py); the
two sides share only the .proto.
"""

from __future__ import annotations

from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as pb
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import HealthCheckSpec, HealthCheckType, UriSpec
from peloton.core.remote_volume import remote_volumes, unfetchable
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.base import BackendHost, StatusUpdate

STATE_FROM_PB = {
    pb.RUN_STATE_STARTING: TaskState.STARTING, pb.RUN_STATE_RUNNING: TaskState.RUNNING,
    pb.RUN_STATE_SUCCEEDED: TaskState.SUCCEEDED, pb.RUN_STATE_FAILED: TaskState.FAILED,
    pb.RUN_STATE_KILLED: TaskState.KILLED, pb.RUN_STATE_LOST: TaskState.LOST,
}
HEALTH_FROM_PB: dict[int, HealthState | None] = {
    pb.HEALTH_NONE: None, pb.HEALTH_UNKNOWN: HealthState.HEALTH_UNKNOWN,
    pb.HEALTH_HEALTHY: HealthState.HEALTHY, pb.HEALTH_UNHEALTHY: HealthState.UNHEALTHY,
}
_CHECK_TYPE_TO_PB = {HealthCheckType.COMMAND: pb.HealthCheck.COMMAND,
                     HealthCheckType.HTTP: pb.HealthCheck.HTTP, HealthCheckType.GRPC: pb.HealthCheck.GRPC}


def host_from_pb(info: pb.AgentInfo) -> BackendHost:
    """The host an agent described when it registered."""
    c = info.capacity
    return BackendHost(
        hostname=info.hostname, agent_id=info.agent_id,
        capacity=Resources(cpu=c.cpu, mem_mb=c.mem_mb, disk_mb=c.disk_mb, gpu=c.gpu),
        ports=tuple(PortRange(r.begin, r.end) for r in info.ports),
        labels=tuple(Label(lb.key, lb.value) for lb in info.labels), address=info.address,
        file_address=info.file_address, revocable_cpu=max(0.0, info.revocable_cpu))


def update_from_pb(msg: pb.StatusUpdate, hostname: str, agent_id: str) -> StatusUpdate:
    """An agent's update as the host manager's consumers see it.

    An unknown state (a newer agent) reads as LOST: the run is no longer
    known to be running, which is the safe reading.
    """
    return StatusUpdate(
        uuid=msg.uuid, run_id=msg.run_id, state=STATE_FROM_PB.get(msg.state, TaskState.LOST),
        hostname=hostname, agent_id=agent_id, timestamp=msg.timestamp, message=msg.message,
        reason=msg.reason, exit_code=msg.exit_code if msg.HasField("exit_code") else None,
        healthy=HEALTH_FROM_PB.get(msg.health))


def _health_check_to_pb(hc: HealthCheckSpec) -> pb.HealthCheck:
    return pb.HealthCheck(
        type=_CHECK_TYPE_TO_PB[hc.type], initial_delay_secs=hc.initial_interval_secs,
        interval_secs=hc.interval_secs, timeout_secs=hc.timeout_secs,
        max_consecutive_failures=hc.max_consecutive_failures, command=hc.command,
        http_scheme=hc.http_scheme, port=hc.http_port, http_path=hc.http_path)


def launch_to_pb(task: LaunchSpec) -> pb.TaskLaunch:
    """One run for an agent to start.

    Ports: every port of the spec with its assigned number (a static port
    keeps its own value; `task.ports` wins), each with its env name.
    """
    spec = task.spec
    assigned = dict(task.ports)
    ports = []
    for port in spec.ports:
        number = assigned.pop(port.name, port.value)
        if number:
            ports.append(pb.PortBinding(name=port.name, port=number, env_name=port.env_name))
    ports += [pb.PortBinding(name=name, port=number) for name, number in assigned.items()]
    cmd = spec.command
    r = spec.resources
    msg = pb.TaskLaunch(
        run_id=task.run_id, name=spec.name,
        command=pb.Command(value=cmd.value, shell=cmd.shell, arguments=cmd.arguments,
                           environment=[pb.EnvVar(name=k, value=v) for k, v in cmd.environment],
                           user=cmd.user),
        resources=pb.Resources(cpu=r.cpu, mem_mb=r.mem_mb, disk_mb=r.disk_mb, gpu=r.gpu),
        ports=ports, kill_grace_secs=spec.kill_grace_period_secs, fd_limit=max(0, spec.fd_limit),
        revocable=spec.revocable)
    if spec.health_check is not None and spec.health_check.enabled:
        msg.health_check.CopyFrom(_health_check_to_pb(spec.health_check))
    if spec.volume is not None and task.volume_id:
        msg.volume.CopyFrom(pb.PersistentVolume(
            volume_id=task.volume_id, container_path=spec.volume.container_path,
            size_mb=spec.volume.size_mb, created=task.volume_created))
    msg.remote_volumes.extend(remote_volumes_to_pb(cmd.uris))
    return msg


def remote_volumes_to_pb(uris: tuple[UriSpec, ...]) -> list[pb.RemoteVolume]:
    """The command's URIs as the agent fetches them (peloton/core/remote_volume.py).  A URI
    that cannot be read (a job stored before URIs were checked at create) is sent with its
    error, and the agent fails the run with it rather than start it without the file."""
    try:
        vols = remote_volumes(uris)
    except InvalidArgument as exc:
        return [pb.RemoteVolume(url=uris[0].value if uris else "", error=exc.message)]
    problems = [p for v in vols if (p := unfetchable(v)) is not None]
    if problems:
        return [pb.RemoteVolume(url=vols[0].url, error="; ".join(problems))]
    return [pb.RemoteVolume(url=v.url, sha256=v.sha256, path=v.path, cache=v.cache,
                            extract=v.archive is not None, compression=v.archive or "",
                            executable=v.executable) for v in vols]
