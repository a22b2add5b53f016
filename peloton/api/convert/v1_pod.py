"""v1alpha pod.PodSpec <-> core TaskSpec.

A pod has at most one container here (Peloton refused more, and init
containers, with UNIMPLEMENTED).  What the container runs is read through
`mesos_pod` (raw Mesos messages first, then image / entrypoint /
environment / mesos_spec), so a pod reads the same whether it is looked at
as a v1alpha PodSpec or, through `v0_v1`, as a v0 TaskConfig.

Mapping notes: the liveness check is the task's health check; a readiness
check has no core meaning and is kept only in the job's document.
Preemptibility comes from the job SLA (a v1alpha preemption policy has only
kill_on_preempt), and the SLA's `revocable`, when an SLA is given, overrides
the pod's, as in Peloton's ConvertJobSpecToJobConfig.
"""

from __future__ import annotations

from peloton.api.convert.common import labels_from_wire
from peloton.api.convert.constraints import constraint_from_v1, constraint_to_v1
from peloton.api.convert.mesos_pod import mesos_command_of, mesos_container_of, mesos_executor_of
from peloton.api.convert.v0_task import (
    EXECUTOR_ID,
    command_from_mesos,
    command_to_mesos,
    executor_data_from_mesos,
    image_from_mesos,
)
from peloton.api.convert.validate import wire_resources
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.apachemesos import apachemesos_pb2
from peloton.core.errors import InvalidArgument, Unimplemented
from peloton.core.model.task import (
    CommandSpec,
    HealthCheckSpec,
    HealthCheckType,
    PortSpec,
    RestartPolicy,
    TaskSpec,
    VolumeSpec,
)

_DEFAULT_TASK = TaskSpec()
_DEFAULT_HEALTH = HealthCheckSpec()
_Check = pod_pb2.HealthCheckSpec
_HEALTH_TYPES = {_Check.HEALTH_CHECK_TYPE_COMMAND: HealthCheckType.COMMAND,
                 _Check.HEALTH_CHECK_TYPE_HTTP: HealthCheckType.HTTP}
_MesosSpec = apachemesos_pb2.PodSpec


def _health_from_v1(hc: pod_pb2.HealthCheckSpec, field: str) -> HealthCheckSpec:
    if hc.type not in _HEALTH_TYPES:
        raise InvalidArgument(f"{field}.type must be COMMAND or HTTP", field=f"{field}.type")
    d = _DEFAULT_HEALTH
    return HealthCheckSpec(
        type=_HEALTH_TYPES[hc.type], enabled=hc.enabled,
        initial_interval_secs=float(hc.initial_interval_secs or d.initial_interval_secs),
        interval_secs=float(hc.interval_secs or d.interval_secs),
        timeout_secs=float(hc.timeout_secs or d.timeout_secs),
        max_consecutive_failures=hc.max_consecutive_failures or d.max_consecutive_failures,
        command=hc.command_check.command, http_scheme=hc.http_check.scheme or d.http_scheme,
        http_port=hc.http_check.port, http_path=hc.http_check.path or d.http_path)


def _health_to_v1(hc: HealthCheckSpec, out: pod_pb2.HealthCheckSpec) -> None:
    out.type = (_Check.HEALTH_CHECK_TYPE_HTTP if hc.type is HealthCheckType.HTTP
                else _Check.HEALTH_CHECK_TYPE_COMMAND)
    out.enabled = hc.enabled
    out.initial_interval_secs = round(hc.initial_interval_secs)
    out.interval_secs = round(hc.interval_secs)
    out.timeout_secs = round(hc.timeout_secs)
    out.max_consecutive_failures = hc.max_consecutive_failures
    if hc.type is HealthCheckType.HTTP:
        out.http_check.scheme = hc.http_scheme
        out.http_check.port = hc.http_port
        out.http_check.path = hc.http_path
    else:
        out.command_check.command = hc.command


def pod_spec_from_v1(pod: pod_pb2.PodSpec, *, preemptible: bool = True, revocable: bool | None = None,
                     field: str = "default_spec") -> TaskSpec:
    """A (merged) v1alpha PodSpec -> core TaskSpec.

    `preemptible` is the job SLA's; `revocable`, when not None (the job has an SLA),
    replaces the pod's own flag.
    """
    if len(pod.containers) > 1:
        raise Unimplemented(f"{field}.containers: more than one container per pod is not supported",
                            field=f"{field}.containers")
    if pod.init_containers:
        raise Unimplemented(f"{field}.init_containers: init containers are not supported",
                            field=f"{field}.init_containers")
    box = pod.containers[0] if pod.containers else pod_pb2.ContainerSpec()
    where = f"{field}.containers[0]"
    res = box.resource
    container = mesos_container_of(pod, box) if pod.containers else None
    executor = mesos_executor_of(pod, box) if pod.containers else None
    command = mesos_command_of(pod, box) if pod.containers else None
    return TaskSpec(
        name=box.name,
        resources=wire_resources(res.cpu_limit, res.mem_limit_mb, res.disk_limit_mb,
                                 res.gpu_limit,
                                 fields=(f"{where}.resource.cpu_limit",
                                         f"{where}.resource.mem_limit_mb",
                                         f"{where}.resource.disk_limit_mb",
                                         f"{where}.resource.gpu_limit")),
        fd_limit=res.fd_limit,
        ports=tuple(PortSpec(p.name, p.value, p.env_name) for p in box.ports),
        command=command_from_mesos(command) if command is not None else CommandSpec(),
        container_image=image_from_mesos(container) if container is not None else "",
        executor_data=(executor_data_from_mesos(executor, f"{where}.executor")
                       if executor is not None else b""),
        constraint=(constraint_from_v1(pod.constraint, f"{field}.constraint")
                    if pod.HasField("constraint") else None),
        health_check=(_health_from_v1(box.liveness_check, f"{where}.liveness_check")
                      if box.HasField("liveness_check") else None),
        restart_policy=RestartPolicy(pod.restart_policy.max_failures),
        labels=labels_from_wire(pod.labels),
        controller=pod.controller,
        kill_grace_period_secs=float(pod.kill_grace_period_seconds
                                     or _DEFAULT_TASK.kill_grace_period_secs),
        preemptible=preemptible,
        kill_on_preempt=pod.preemption_policy.kill_on_preempt,
        revocable=pod.revocable if revocable is None else revocable,
        volume=(VolumeSpec(pod.volume.container_path, float(pod.volume.size_mb))
                if pod.HasField("volume") else None),
    )


def task_spec_to_v1(spec: TaskSpec, pod_name: str = "") -> pod_pb2.PodSpec:
    """A core TaskSpec -> a complete v1alpha PodSpec (used when no request document is kept)."""
    out = pod_pb2.PodSpec(controller=spec.controller, revocable=spec.revocable,
                          kill_grace_period_seconds=round(spec.kill_grace_period_secs))
    if pod_name:
        out.pod_name.value = pod_name
    for label in spec.labels:
        out.labels.add(key=label.key, value=label.value)
    box = out.containers.add(name=spec.name, image=spec.container_image)
    r = spec.resources
    box.resource.CopyFrom(pod_pb2.ResourceSpec(cpu_limit=r.cpu, mem_limit_mb=r.mem_mb,
                                               disk_limit_mb=r.disk_mb, gpu_limit=r.gpu,
                                               fd_limit=spec.fd_limit))
    # The raw CommandInfo carries what the pod fields cannot (the user); both are written.
    box.command.CopyFrom(command_to_mesos(spec.command))
    box.entrypoint.value = spec.command.value
    box.entrypoint.arguments.extend(spec.command.arguments)
    for name, value in spec.command.environment:
        box.environment.add(name=name, value=value)
    mesos = out.mesos_spec
    mesos.shell = spec.command.shell
    for uri in spec.command.uris:
        mesos.uris.add(value=uri.value, executable=uri.executable, extract=uri.extract,
                       cache=uri.cache, output_file=uri.output_file)
    if spec.container_image:
        mesos.type = _MesosSpec.CONTAINER_TYPE_DOCKER
    if spec.executor_data:
        mesos.executor_spec.type = _MesosSpec.ExecutorSpec.EXECUTOR_TYPE_CUSTOM
        mesos.executor_spec.executor_id = EXECUTOR_ID
        mesos.executor_spec.data = spec.executor_data
    for port in spec.ports:
        box.ports.add(name=port.name, value=port.value, env_name=port.env_name)
    if spec.health_check is not None:
        _health_to_v1(spec.health_check, box.liveness_check)
    if spec.constraint is not None:
        out.constraint.CopyFrom(constraint_to_v1(spec.constraint))
    if spec.restart_policy.max_failures:
        out.restart_policy.max_failures = spec.restart_policy.max_failures
    if spec.volume is not None:
        out.volume.container_path = spec.volume.container_path
        out.volume.size_mb = round(spec.volume.size_mb)
    if spec.kill_on_preempt:
        out.preemption_policy.kill_on_preempt = True
    return out
