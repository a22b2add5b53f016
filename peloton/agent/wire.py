"""Converters between the agent protocol's messages and the agent's own values.

Named by direction: `*_from_pb` reads a message, `*_to_pb` builds one.
The host manager side has its own converters (hostmgr/backends/local_wire.py).
"""

from __future__ import annotations

from peloton.agent.model import PortBinding, RunSpec, Update, VolumeMount
from peloton.api.gen.pelotonpy.internal.agent import agent_pb2 as pb
from peloton.core.model.task import CommandSpec, HealthCheckSpec, HealthCheckType
from peloton.core.remote_volume import SCHEMES, FetchKind, RemoteVolume
from peloton.core.states import HealthState, TaskState

STATE_TO_PB = {
    TaskState.STARTING: pb.RUN_STATE_STARTING, TaskState.RUNNING: pb.RUN_STATE_RUNNING,
    TaskState.SUCCEEDED: pb.RUN_STATE_SUCCEEDED, TaskState.FAILED: pb.RUN_STATE_FAILED,
    TaskState.KILLED: pb.RUN_STATE_KILLED, TaskState.LOST: pb.RUN_STATE_LOST,
}
HEALTH_TO_PB = {
    None: pb.HEALTH_NONE, HealthState.HEALTH_UNKNOWN: pb.HEALTH_UNKNOWN,
    HealthState.HEALTHY: pb.HEALTH_HEALTHY, HealthState.UNHEALTHY: pb.HEALTH_UNHEALTHY,
}
_CHECK_TYPE = {pb.HealthCheck.COMMAND: HealthCheckType.COMMAND,
               pb.HealthCheck.HTTP: HealthCheckType.HTTP, pb.HealthCheck.GRPC: HealthCheckType.GRPC}


def update_to_pb(update: Update) -> pb.StatusUpdate:
    """An agent update as the host manager receives it."""
    msg = pb.StatusUpdate(uuid=update.uuid, run_id=update.run_id, state=STATE_TO_PB[update.state],
                          timestamp=update.timestamp, message=update.message, reason=update.reason,
                          health=HEALTH_TO_PB[update.healthy])
    if update.exit_code is not None:
        msg.exit_code = update.exit_code
    return msg


def run_spec_from_pb(msg: pb.TaskLaunch) -> RunSpec:
    """What to run, from a Launch request."""
    cmd = msg.command
    check: HealthCheckSpec | None = None
    if msg.HasField("health_check"):
        hc = msg.health_check
        check = HealthCheckSpec(
            type=_CHECK_TYPE.get(hc.type, HealthCheckType.COMMAND),
            initial_interval_secs=hc.initial_delay_secs, interval_secs=hc.interval_secs,
            timeout_secs=hc.timeout_secs, max_consecutive_failures=hc.max_consecutive_failures,
            command=hc.command, http_scheme=hc.http_scheme, http_port=hc.port,
            http_path=hc.http_path)
    return RunSpec(
        run_id=msg.run_id, name=msg.name,
        command=CommandSpec(value=cmd.value, shell=cmd.shell, arguments=tuple(cmd.arguments),
                            environment=tuple((e.name, e.value) for e in cmd.environment),
                            user=cmd.user),
        cpu=msg.resources.cpu, mem_mb=msg.resources.mem_mb,
        ports=tuple(PortBinding(p.name, p.port, p.env_name) for p in msg.ports),
        health_check=check, kill_grace_secs=msg.kill_grace_secs, fd_limit=msg.fd_limit,
        revocable=msg.revocable,
        volume=(VolumeMount(msg.volume.volume_id, msg.volume.container_path,
                            msg.volume.size_mb, msg.volume.created)
                if msg.HasField("volume") else None),
        remote=tuple(RemoteVolume(url=v.url, sha256=v.sha256, path=v.path,
                                  kind=SCHEMES.get(v.url.partition(":")[0].lower(),
                                                   FetchKind.MESOS),
                                  cache=v.cache, archive=v.compression if v.extract else None,
                                  executable=v.executable)
                     for v in msg.remote_volumes if not v.error),
        remote_error="; ".join(v.error for v in msg.remote_volumes if v.error))
