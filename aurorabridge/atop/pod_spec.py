"""An Aurora TaskConfig as a Peloton v1alpha PodSpec that a Peloton agent really runs.

The pod has one container: resources (cpu, mem, disk, gpu limits), one
dynamic port per named port (exposed to the task as `$PORT_<NAME>`), the
image (Docker `name:tag` or DockerContainer.image; appc images rejected),
host-path volumes, and the command running the Thermos processes (atop/thermos.py) as
the container entrypoint with `mesos_spec.shell` set, so the agent runs it with
`sh -c`; a Thermos task's kill grace period is its finalization_wait plus a margin.
Labels carry the bridge marker, the job key, Aurora metadata and the task's SLA (its
slaPolicy and whether its tier is production, for SLA-aware host drains: atop/sla.py)
and, for a task with an Announcer, the labels that ask for service discovery
(atop/announce.py).

The whole canonical TaskConfig, Thrift-binary encoded, rides in
`mesos_spec.executor_spec.data` (where Peloton's bridge put it): reads give
clients back exactly what they sent.  The executor type stays DEFAULT (the
command executor), so no agent tries to start a Thermos executor; with
`thermos_executor_path` set, the pod instead uses Peloton's original form:
a CUSTOM executor whose entrypoint is that executor.  Tasks run as the job's
role (the container's CommandInfo.user), as Aurora runs them.
"""

from __future__ import annotations

from typing import Any

from aurorabridge import labels, thrift_util
from aurorabridge.atop import constraints, thermos
from aurorabridge.atop.announce import announce_labels
from aurorabridge.atop.job_key import JobKey
from aurorabridge.atop.resources import TaskResources
from aurorabridge.atop.sla import sla_label
from aurorabridge.thrift_api import api
from peloton.api.convert.mesos_pod import mesos_command_of
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.apachemesos import apachemesos_pb2
from peloton.api.gen.peloton.api.v1alpha.volume import volume_pb2
from peloton.core.errors import InvalidArgument

REVOCABLE_TIER = "revocable"
_MesosSpec = apachemesos_pb2.PodSpec


def _image(container: Any) -> tuple[str, bool]:
    """(image, is_docker_container)."""
    if container is None:
        return "", False
    if container.docker is not None:
        if not container.docker.image:
            raise InvalidArgument("a Docker container must name an image", field="container.docker.image")
        return str(container.docker.image), True
    image = container.mesos.image if container.mesos is not None else None
    if image is None:
        return "", False
    if image.appc is not None:
        raise InvalidArgument("appc images are not supported; use a Docker image", field="container")
    if image.docker is None or not image.docker.name:
        raise InvalidArgument("a Mesos image must be a Docker image with a name", field="container")
    return f"{image.docker.name}:{image.docker.tag or 'latest'}", False


def _volumes(container: Any) -> tuple[list[Any], list[Any]]:
    mesos = container.mesos if container is not None else None
    specs, mounts = [], []
    for vol in (mesos.volumes if mesos is not None else None) or ():
        if not vol.hostPath or not vol.containerPath:
            raise InvalidArgument("volumes need hostPath and containerPath", field="container.mesos.volumes")
        specs.append(volume_pb2.VolumeSpec(
            name=vol.hostPath, type=volume_pb2.VolumeSpec.VOLUME_TYPE_HOST_PATH,
            host_path=volume_pb2.VolumeSpec.HostPathVolumeSource(path=vol.hostPath)))
        mounts.append(pod_pb2.VolumeMount(name=vol.hostPath, read_only=vol.mode == 2,
                                          mount_path=vol.containerPath))
    return specs, mounts


def _mesos_spec(container: Any, task: Any, blob: bytes, thermos_path: str, docker: bool) -> Any:
    spec = _MesosSpec(type=_MesosSpec.CONTAINER_TYPE_DOCKER if docker else _MesosSpec.CONTAINER_TYPE_MESOS,
                      shell=True)
    if docker:
        spec.docker_parameters.extend(_MesosSpec.DockerParameter(key=p.name, value=p.value)
                                      for p in container.docker.parameters or ())
        spec.network_spec.type = _MesosSpec.NetworkSpec.NETWORK_TYPE_HOST
    for uri in task.mesosFetcherUris or ():
        spec.uris.add(value=uri.value, extract=bool(uri.extract), cache=bool(uri.cache),
                      output_file=uri.outputFile or "")
    executor = _MesosSpec.ExecutorSpec.EXECUTOR_TYPE_DEFAULT
    if thermos_path:
        executor = _MesosSpec.ExecutorSpec.EXECUTOR_TYPE_CUSTOM
        spec.uris.add(value=thermos_path, executable=True, extract=True)
        spec.executor_spec.executor_id = "PLACEHOLDER"
    spec.executor_spec.type = executor
    spec.executor_spec.data = blob
    return spec


def pod_spec(task: Any, key: JobKey, res: TaskResources, thermos_path: str = "", *,
             user: str = "") -> Any:
    """The PodSpec of `task` (already validated by validation.check_task); with `user`, its
    tasks run as that Unix user (Mesos CommandInfo.user: Aurora runs a job as its role)."""
    canonical = thrift_util.canonical(task)
    canonical.job = api.JobKey(role=key.role, environment=key.environment, name=key.name)
    blob = thrift_util.encode(canonical)
    key_label = labels.job_key_label(key.role, key.environment, key.name)
    metadata = sorted({(m.key, m.value) for m in canonical.metadata or ()})
    image, docker = _image(canonical.container)
    volumes, mounts = _volumes(canonical.container)
    container = pod_pb2.ContainerSpec(
        name=key.name,
        resource=pod_pb2.ResourceSpec(cpu_limit=res.cpus, mem_limit_mb=float(res.ram_mb),
                                      disk_limit_mb=float(res.disk_mb), gpu_limit=res.gpus),
        ports=[pod_pb2.PortSpec(name=p, type=pod_pb2.PortSpec.PORT_TYPE_DYNAMIC_ENV_VAR,
                                env_name=thermos.port_env_name(p)) for p in res.ports],
        image=image, volume_mounts=mounts)
    if thermos_path:
        container.entrypoint.value = "${MESOS_SANDBOX=.}/" + thermos_path.rsplit("/", 1)[-1]
    else:
        command = thermos.task_command(canonical)
        if command is not None:
            container.entrypoint.value = command
    sla = sla_label(canonical)
    spec = pod_pb2.PodSpec(
        labels=[labels.label(*labels.BRIDGE_POD), key_label, *labels.metadata_labels(metadata),
                labels.label(sla.key, sla.value), *announce_labels(canonical, key)],
        containers=[container], revocable=canonical.tier == REVOCABLE_TIER, volumes=volumes,
        mesos_spec=_mesos_spec(canonical.container, canonical, blob, thermos_path, docker))
    if user:
        info = mesos_command_of(spec, spec.containers[0])
        if info is not None:
            info.user = user
            spec.containers[0].command.CopyFrom(info)
    constraint = constraints.pod_constraint(canonical.constraints, key_label)
    if constraint is not None:
        spec.constraint.CopyFrom(constraint)
    if not canonical.isService and (canonical.maxTaskFailures or 0) > 0:
        spec.restart_policy.max_failures = canonical.maxTaskFailures
    grace = thermos.kill_grace_secs(canonical)
    if grace is not None:
        spec.kill_grace_period_seconds = grace
    return spec
