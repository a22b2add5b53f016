"""v0 task.TaskConfig <-> core TaskSpec.

Reading keeps what scheduling and the agent need: resources, the Mesos
CommandInfo (shell, value, arguments, VALUE environment variables, fetch
URIs with their flags, user), the container image (Docker, or a Mesos
container's Docker image), the custom executor's data, constraints, health
check, ports, restart and preemption policy, persistent volume.  The rest of
a ContainerInfo (Docker parameters, host volumes, networks) is not in the
core; it survives in the job's stored request document.

Zero values on the wire mean "unset" (proto3): a health check interval of 0
takes Mesos' default, a kill grace period of 0 takes the core default.  The
job-level rules (what a batch task may not have, maxFailures, ports, ...)
are in `validate`; this module only rejects what cannot be read at all.
"""

from __future__ import annotations

from peloton.api.convert.common import labels_from_wire
from peloton.api.convert.constraints import constraint_from_v0, constraint_to_v0
from peloton.api.convert.validate import wire_resources
from peloton.api.gen.mesos.v1 import mesos_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.task import (
    CommandSpec,
    HealthCheckSpec,
    HealthCheckType,
    PortSpec,
    RestartPolicy,
    TaskSpec,
    UriSpec,
    VolumeSpec,
)

_DEFAULT_TASK = TaskSpec()
_DEFAULT_HEALTH = HealthCheckSpec()
_HEALTH_TYPES = {task_pb2.HealthCheckConfig.COMMAND: HealthCheckType.COMMAND,
                 task_pb2.HealthCheckConfig.HTTP: HealthCheckType.HTTP,
                 task_pb2.HealthCheckConfig.GRPC: HealthCheckType.GRPC}
_PREEMPTIBLE = task_pb2.PreemptionPolicy.TYPE_PREEMPTIBLE
_NON_PREEMPTIBLE = task_pb2.PreemptionPolicy.TYPE_NON_PREEMPTIBLE
#: Executor id written when a spec with executor data goes back to the wire (the field is required).
EXECUTOR_ID = "peloton-custom-executor"


def command_from_mesos(cmd: mesos_pb2.CommandInfo) -> CommandSpec:
    """A Mesos CommandInfo -> core CommandSpec (shell defaults to true, as in Mesos)."""
    env = tuple((var.name, var.value) for var in cmd.environment.variables
                if var.type == mesos_pb2.Environment.Variable.VALUE)
    return CommandSpec(value=cmd.value, shell=cmd.shell, arguments=tuple(cmd.arguments),
                       environment=env, uris=tuple(uri_from_mesos(u) for u in cmd.uris),
                       user=cmd.user)


def command_to_mesos(command: CommandSpec) -> mesos_pb2.CommandInfo:
    """A core CommandSpec -> Mesos CommandInfo (shell always written explicitly)."""
    out = mesos_pb2.CommandInfo(shell=command.shell, arguments=list(command.arguments))
    if command.value:
        out.value = command.value
    if command.user:
        out.user = command.user
    for name, value in command.environment:
        out.environment.variables.add(name=name, value=value,
                                      type=mesos_pb2.Environment.Variable.VALUE)
    for uri in command.uris:
        uri_to_mesos(uri, out.uris.add())
    return out


def uri_from_mesos(uri: mesos_pb2.CommandInfo.URI) -> UriSpec:
    """A Mesos URI -> core UriSpec (extract defaults to true, as in Mesos)."""
    return UriSpec(value=uri.value, executable=uri.executable,
                   extract=uri.extract if uri.HasField("extract") else True,
                   cache=uri.cache, output_file=uri.output_file)


def uri_to_mesos(uri: UriSpec, out: mesos_pb2.CommandInfo.URI) -> None:
    """A core UriSpec -> Mesos URI (`out`); only what differs from Mesos' defaults."""
    out.value = uri.value
    if uri.executable:
        out.executable = True
    if not uri.extract:
        out.extract = False
    if uri.cache:
        out.cache = True
    if uri.output_file:
        out.output_file = uri.output_file


def image_from_mesos(container: mesos_pb2.ContainerInfo) -> str:
    """The image a ContainerInfo runs: Docker's image, or a Mesos container's Docker image."""
    if container.HasField("docker"):
        return container.docker.image
    if container.mesos.HasField("image") and container.mesos.image.HasField("docker"):
        return container.mesos.image.docker.name
    return ""


def executor_data_from_mesos(executor: mesos_pb2.ExecutorInfo, field: str) -> bytes:
    """The data of an executor, kept opaque for round trips.

    A CUSTOM executor (Aurora's Thermos) must carry data.  A DEFAULT one is the
    command executor: the task's command runs, and any data rides along untouched
    (the Aurora bridge keeps the client's TaskConfig there so reads give it back).
    """
    if executor.type == mesos_pb2.ExecutorInfo.DEFAULT:
        return executor.data
    if executor.type != mesos_pb2.ExecutorInfo.CUSTOM:
        raise InvalidArgument(f"{field}.type: only DEFAULT and CUSTOM executors are supported",
                              field=f"{field}.type")
    if not executor.data:
        raise InvalidArgument(f"{field}.data: a custom executor needs data", field=f"{field}.data")
    return executor.data


def _health_from_v0(hc: task_pb2.HealthCheckConfig, field: str) -> HealthCheckSpec:
    if hc.type not in _HEALTH_TYPES:
        raise InvalidArgument(f"{field}.type must be COMMAND or HTTP", field=f"{field}.type")
    d = _DEFAULT_HEALTH
    return HealthCheckSpec(
        type=_HEALTH_TYPES[hc.type], enabled=hc.enabled,
        initial_interval_secs=float(hc.initialIntervalSecs or d.initial_interval_secs),
        interval_secs=float(hc.intervalSecs or d.interval_secs),
        timeout_secs=float(hc.timeoutSecs or d.timeout_secs),
        max_consecutive_failures=hc.maxConsecutiveFailures or d.max_consecutive_failures,
        command=hc.commandCheck.command, http_scheme=hc.httpCheck.scheme or d.http_scheme,
        http_port=hc.httpCheck.port, http_path=hc.httpCheck.path or d.http_path)


def _health_to_v0(hc: HealthCheckSpec, out: task_pb2.HealthCheckConfig) -> None:
    out.type = next(k for k, v in _HEALTH_TYPES.items() if v is hc.type)
    out.enabled = hc.enabled
    out.initialIntervalSecs = round(hc.initial_interval_secs)
    out.intervalSecs = round(hc.interval_secs)
    out.timeoutSecs = round(hc.timeout_secs)
    out.maxConsecutiveFailures = hc.max_consecutive_failures
    if hc.type is HealthCheckType.COMMAND:
        out.commandCheck.command = hc.command
    elif hc.type is HealthCheckType.HTTP:
        out.httpCheck.scheme = hc.http_scheme
        out.httpCheck.port = hc.http_port
        out.httpCheck.path = hc.http_path


def task_spec_from_v0(config: task_pb2.TaskConfig, *, sla_preemptible: bool = True,
                      field: str = "defaultConfig") -> TaskSpec:
    """A (merged) v0 TaskConfig -> core TaskSpec; `sla_preemptible` fills an unset preemption policy."""
    res = config.resource
    policy = config.preemptionPolicy
    if policy.type not in (task_pb2.PreemptionPolicy.TYPE_INVALID, _PREEMPTIBLE, _NON_PREEMPTIBLE):
        raise InvalidArgument(f"{field}.preemptionPolicy.type is unknown",
                              field=f"{field}.preemptionPolicy.type")
    preemptible = sla_preemptible if policy.type == task_pb2.PreemptionPolicy.TYPE_INVALID \
        else policy.type == _PREEMPTIBLE
    return TaskSpec(
        name=config.name,
        resources=wire_resources(res.cpuLimit, res.memLimitMb, res.diskLimitMb, res.gpuLimit,
                                 fields=(f"{field}.resource.cpuLimit", f"{field}.resource.memLimitMb",
                                         f"{field}.resource.diskLimitMb",
                                         f"{field}.resource.gpuLimit")),
        fd_limit=res.fdLimit,
        ports=tuple(PortSpec(p.name, p.value, p.envName) for p in config.ports),
        command=command_from_mesos(config.command) if config.HasField("command") else CommandSpec(),
        container_image=image_from_mesos(config.container) if config.HasField("container") else "",
        executor_data=(executor_data_from_mesos(config.executor, f"{field}.executor")
                       if config.HasField("executor") else b""),
        constraint=(constraint_from_v0(config.constraint, f"{field}.constraint")
                    if config.HasField("constraint") else None),
        health_check=(_health_from_v0(config.healthCheck, f"{field}.healthCheck")
                      if config.HasField("healthCheck") else None),
        restart_policy=RestartPolicy(config.restartPolicy.maxFailures),
        labels=labels_from_wire(config.labels),
        controller=config.controller,
        kill_grace_period_secs=float(config.killGracePeriodSeconds
                                     or _DEFAULT_TASK.kill_grace_period_secs),
        preemptible=preemptible,
        kill_on_preempt=policy.killOnPreempt,
        revocable=config.revocable,
        volume=(VolumeSpec(config.volume.containerPath, float(config.volume.sizeMB))
                if config.HasField("volume") else None),
    )


def task_config_to_v0(spec: TaskSpec) -> task_pb2.TaskConfig:
    """A core TaskSpec -> a complete v0 TaskConfig (used when no request document is kept)."""
    out = task_pb2.TaskConfig(name=spec.name, controller=spec.controller, revocable=spec.revocable,
                              killGracePeriodSeconds=round(spec.kill_grace_period_secs))
    for label in spec.labels:
        out.labels.add(key=label.key, value=label.value)
    r = spec.resources
    out.resource.CopyFrom(task_pb2.ResourceConfig(cpuLimit=r.cpu, memLimitMb=r.mem_mb,
                                                  diskLimitMb=r.disk_mb, gpuLimit=r.gpu,
                                                  fdLimit=spec.fd_limit))
    out.command.CopyFrom(command_to_mesos(spec.command))
    if spec.container_image:
        out.container.type = mesos_pb2.ContainerInfo.DOCKER
        out.container.docker.image = spec.container_image
    if spec.executor_data:
        out.executor.type = mesos_pb2.ExecutorInfo.CUSTOM
        out.executor.executor_id.value = EXECUTOR_ID
        out.executor.data = spec.executor_data
    if spec.health_check is not None:
        _health_to_v0(spec.health_check, out.healthCheck)
    for port in spec.ports:
        out.ports.add(name=port.name, value=port.value, envName=port.env_name)
    if spec.constraint is not None:
        out.constraint.CopyFrom(constraint_to_v0(spec.constraint))
    if spec.restart_policy.max_failures:
        out.restartPolicy.maxFailures = spec.restart_policy.max_failures
    if spec.volume is not None:
        out.volume.containerPath = spec.volume.container_path
        out.volume.sizeMB = round(spec.volume.size_mb)
    out.preemptionPolicy.type = _PREEMPTIBLE if spec.preemptible else _NON_PREEMPTIBLE
    out.preemptionPolicy.killOnPreempt = spec.kill_on_preempt
    return out
