"""Mesos ContainerInfo / CommandInfo / ExecutorInfo <-> their v1alpha pod spelling.

A v1alpha container can say what to run in two ways: the raw Mesos messages
(`container`, `command`, `executor`) or the pod-level fields (image,
entrypoint, environment, volume mounts, and `mesos_spec` for the shell flag,
fetch URIs, Docker parameters, network and executor).  Going to v1alpha both
are written (as Peloton does); coming back the raw message wins when present.
A container with no command, entrypoint, environment or URIs has no command
(so an instance spec that only changes resources keeps the default's command).
Without `mesos_spec` an entrypoint with arguments runs without a shell
(Peloton left Mesos' default shell=true, which would drop the arguments), and
an image alone means a Docker container (Peloton dropped it).
"""

from __future__ import annotations

from peloton.api.gen.mesos.v1 import mesos_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.apachemesos import apachemesos_pb2
from peloton.api.gen.peloton.api.v1alpha.volume import volume_pb2

_MesosSpec = apachemesos_pb2.PodSpec
_NETWORKS = {mesos_pb2.ContainerInfo.DockerInfo.HOST: _MesosSpec.NetworkSpec.NETWORK_TYPE_HOST,
             mesos_pb2.ContainerInfo.DockerInfo.BRIDGE: _MesosSpec.NetworkSpec.NETWORK_TYPE_BRIDGE,
             mesos_pb2.ContainerInfo.DockerInfo.NONE: _MesosSpec.NetworkSpec.NETWORK_TYPE_NONE,
             mesos_pb2.ContainerInfo.DockerInfo.USER: _MesosSpec.NetworkSpec.NETWORK_TYPE_USER}
_EXECUTORS = {mesos_pb2.ExecutorInfo.DEFAULT: _MesosSpec.ExecutorSpec.EXECUTOR_TYPE_DEFAULT,
              mesos_pb2.ExecutorInfo.CUSTOM: _MesosSpec.ExecutorSpec.EXECUTOR_TYPE_CUSTOM}


def container_to_v1(info: mesos_pb2.ContainerInfo, pod: pod_pb2.PodSpec,
                    box: pod_pb2.ContainerSpec) -> None:
    """Write a ContainerInfo into a pod: raw copy, image, volumes, Docker parameters, network."""
    box.container.CopyFrom(info)
    pod.mesos_spec.SetInParent()
    docker = info.type == mesos_pb2.ContainerInfo.DOCKER
    pod.mesos_spec.type = _MesosSpec.CONTAINER_TYPE_DOCKER if docker else _MesosSpec.CONTAINER_TYPE_MESOS
    for vol in info.volumes:
        if not any(v.name == vol.host_path for v in pod.volumes):
            pod.volumes.add(name=vol.host_path, type=volume_pb2.VolumeSpec.VOLUME_TYPE_HOST_PATH,
                            host_path=volume_pb2.VolumeSpec.HostPathVolumeSource(path=vol.host_path))
        box.volume_mounts.add(name=vol.host_path, mount_path=vol.container_path,
                              read_only=vol.mode == mesos_pb2.Volume.RO)
    if docker:
        for param in info.docker.parameters:
            pod.mesos_spec.docker_parameters.add(key=param.key, value=param.value)
        box.image = info.docker.image
        pod.mesos_spec.network_spec.type = _NETWORKS.get(
            info.docker.network, _MesosSpec.NetworkSpec.NETWORK_TYPE_INVALID)
        if info.network_infos:
            pod.mesos_spec.network_spec.name = info.network_infos[0].name
    else:
        box.image = info.mesos.image.docker.name


def command_to_v1(cmd: mesos_pb2.CommandInfo, pod: pod_pb2.PodSpec,
                  box: pod_pb2.ContainerSpec) -> None:
    """Write a CommandInfo into a pod: raw copy, entrypoint, environment, shell, URIs."""
    box.command.CopyFrom(cmd)
    pod.mesos_spec.SetInParent()
    for uri in cmd.uris:
        pod.mesos_spec.uris.add(value=uri.value, executable=uri.executable, extract=uri.extract,
                                cache=uri.cache, output_file=uri.output_file)
    for var in cmd.environment.variables:
        if var.type == mesos_pb2.Environment.Variable.VALUE:
            box.environment.add(name=var.name, value=var.value)
    if cmd.HasField("shell"):
        pod.mesos_spec.shell = cmd.shell
    box.entrypoint.value = cmd.value
    box.entrypoint.arguments.extend(cmd.arguments)


def executor_to_v1(info: mesos_pb2.ExecutorInfo, pod: pod_pb2.PodSpec,
                   box: pod_pb2.ContainerSpec) -> None:
    """Write an ExecutorInfo into a pod: raw copy and mesos_spec.executor_spec."""
    box.executor.CopyFrom(info)
    spec = pod.mesos_spec.executor_spec
    spec.type = _EXECUTORS.get(info.type, _MesosSpec.ExecutorSpec.EXECUTOR_TYPE_INVALID)
    spec.executor_id = info.executor_id.value
    spec.data = info.data
    for res in info.resources:
        if res.name == "cpus":
            spec.resources.cpu = res.scalar.value
        elif res.name == "mem":
            spec.resources.mem_mb = res.scalar.value


def mesos_container_of(pod: pod_pb2.PodSpec,
                       box: pod_pb2.ContainerSpec) -> mesos_pb2.ContainerInfo | None:
    """The ContainerInfo a pod's main container runs in (None: no container, plain process)."""
    if box.HasField("container"):
        return box.container
    kind = pod.mesos_spec.type
    if kind == _MesosSpec.CONTAINER_TYPE_INVALID and not box.image:
        return None
    mesos = kind == _MesosSpec.CONTAINER_TYPE_MESOS
    out = mesos_pb2.ContainerInfo(
        type=mesos_pb2.ContainerInfo.MESOS if mesos else mesos_pb2.ContainerInfo.DOCKER)
    host_paths = {v.name: v.host_path.path for v in pod.volumes
                  if v.type == volume_pb2.VolumeSpec.VOLUME_TYPE_HOST_PATH}
    for mount in box.volume_mounts:
        if mount.name in host_paths:
            out.volumes.add(container_path=mount.mount_path, host_path=host_paths[mount.name],
                            mode=mesos_pb2.Volume.RO if mount.read_only else mesos_pb2.Volume.RW)
    if box.image and mesos:
        out.mesos.image.CopyFrom(mesos_pb2.Image(type=mesos_pb2.Image.DOCKER, cached=True,
                                                 docker=mesos_pb2.Image.Docker(name=box.image)))
    elif box.image:
        net = {v: k for k, v in _NETWORKS.items()}.get(pod.mesos_spec.network_spec.type,
                                                        mesos_pb2.ContainerInfo.DockerInfo.HOST)
        out.docker.CopyFrom(mesos_pb2.ContainerInfo.DockerInfo(image=box.image, network=net))
        for param in pod.mesos_spec.docker_parameters:
            out.docker.parameters.add(key=param.key, value=param.value)
        if pod.mesos_spec.network_spec.name:
            out.network_infos.add(name=pod.mesos_spec.network_spec.name)
    return out


def mesos_command_of(pod: pod_pb2.PodSpec, box: pod_pb2.ContainerSpec) -> mesos_pb2.CommandInfo | None:
    """The CommandInfo a pod's main container runs (None: the container says nothing of one).

    Peloton always made one, so a container that only set resources produced an empty
    command which, merged over the default config, replaced the default's command.
    """
    if box.HasField("command"):
        return box.command
    if not (box.HasField("entrypoint") or box.environment or pod.mesos_spec.uris):
        return None
    out = mesos_pb2.CommandInfo(arguments=list(box.entrypoint.arguments))
    out.shell = pod.mesos_spec.shell if pod.HasField("mesos_spec") else not box.entrypoint.arguments
    if box.entrypoint.value:
        out.value = box.entrypoint.value
    for uri in pod.mesos_spec.uris:
        added = out.uris.add(value=uri.value, executable=uri.executable, extract=uri.extract,
                             cache=uri.cache)
        if uri.output_file:
            added.output_file = uri.output_file
    for env in box.environment:
        out.environment.variables.add(name=env.name, value=env.value,
                                      type=mesos_pb2.Environment.Variable.VALUE)
    return out


def mesos_executor_of(pod: pod_pb2.PodSpec,
                      box: pod_pb2.ContainerSpec) -> mesos_pb2.ExecutorInfo | None:
    """The ExecutorInfo of a pod's main container (None: the default command executor)."""
    if box.HasField("executor"):
        return box.executor
    if not pod.mesos_spec.HasField("executor_spec"):
        return None
    spec = pod.mesos_spec.executor_spec
    out = mesos_pb2.ExecutorInfo(type={v: k for k, v in _EXECUTORS.items()}.get(
        spec.type, mesos_pb2.ExecutorInfo.UNKNOWN), data=spec.data)
    out.executor_id.value = spec.executor_id
    for name, amount in (("cpus", spec.resources.cpu), ("mem", spec.resources.mem_mb)):
        if amount > 0:
            out.resources.add(name=name, type=mesos_pb2.Value.SCALAR,
                              scalar=mesos_pb2.Value.Scalar(value=amount))
    return out
