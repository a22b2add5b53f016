"""Aurora TaskConfigs of Peloton pods, decoded once per distinct pod spec.

A bridge-written pod spec carries the canonical TaskConfig it was built from
(atop.pod_spec); reading returns it as sent.  Other pods (jobs created
through Peloton's own API) are described from the spec: resources, ports,
constraints, metadata labels, image and volumes, tier from the SLA.

Task listings convert thousands of pods that share a handful of specs, so
`TaskConfigReader` caches results by the stored bytes (or the serialized
spec).  Cached structs are shared between replies and must not be mutated.
"""

from __future__ import annotations

from typing import Any

from aurorabridge import labels, thrift_util
from aurorabridge.ptoa import basics
from aurorabridge.ptoa.constraints import aurora_constraints
from aurorabridge.thrift_api import api
from peloton.api.gen.peloton.api.v1alpha.pod.apachemesos import apachemesos_pb2

_DOCKER = apachemesos_pb2.PodSpec.CONTAINER_TYPE_DOCKER
MAX_CACHED = 4096


def tier_of(sla: Any) -> str:
    """Aurora tier from a Peloton SlaSpec (Peloton's ptoa/task_tier.go)."""
    return "revocable" if sla is not None and sla.revocable else "preemptible"


def _container(spec: Any) -> Any:
    main = spec.containers[0]
    if spec.mesos_spec.type == _DOCKER:
        return api.Container(docker=api.DockerContainer(image=main.image, parameters=[
            api.DockerParameter(name=p.key, value=p.value) for p in spec.mesos_spec.docker_parameters]))
    image = None
    if main.image:
        name, _, tag = main.image.rpartition(":")
        image = api.Image(docker=api.DockerImage(name=name or main.image, tag=tag if name else "latest"))
    volumes = [api.Volume(containerPath=m.mount_path, hostPath=m.name, mode=2 if m.read_only else 1)
               for m in main.volume_mounts]
    return api.Container(mesos=api.MesosContainer(image=image, volumes=volumes or None))


def from_pod_spec(spec: Any, job_name: str, owner: str, sla: Any) -> Any:
    """Describe a pod spec that carries no stored TaskConfig."""
    resources: list[Any] = []
    if spec.containers:
        res = spec.containers[0].resource
        for kind, value in (("numCpus", res.cpu_limit), ("ramMb", int(res.mem_limit_mb)),
                            ("diskMb", int(res.disk_limit_mb)), ("numGpus", int(res.gpu_limit))):
            if value > 0:
                resources.append(api.Resource(**{kind: value}))
        resources += [api.Resource(namedPort=p.name) for p in spec.containers[0].ports]
    return api.TaskConfig(
        job=basics.job_key(job_name), owner=api.Identity(user=owner), isService=True,
        priority=sla.priority if sla is not None else 0, maxTaskFailures=spec.restart_policy.max_failures,
        tier=tier_of(sla), resources=resources, constraints=aurora_constraints(spec),
        metadata=[api.Metadata(key=k, value=v) for k, v in labels.parse_metadata(spec.labels)],
        container=_container(spec) if spec.containers else None)


def _without_executor(task: Any) -> Any:
    copy = thrift_util.canonical(task)
    copy.executorConfig = None
    return copy


class TaskConfigReader:
    """Converts pod specs to TaskConfigs with a bounded cache."""

    def __init__(self) -> None:
        self._full: dict[bytes, Any] = {}
        self._bare: dict[bytes, Any] = {}

    def task_config(self, spec: Any, job_name: str, owner: str, sla: Any, with_executor: bool = True) -> Any:
        """The TaskConfig of `spec`; without executorConfig unless `with_executor`."""
        blob = bytes(spec.mesos_spec.executor_spec.data)
        key = blob or b"spec:" + spec.SerializeToString(deterministic=True) + job_name.encode()
        cache = self._full if with_executor else self._bare
        hit = cache.get(key)
        if hit is not None:
            return hit
        full = self._full.get(key)
        if full is None:
            full = self._decode(blob, spec, job_name, owner, sla)
            self._remember(self._full, key, full)
        result = full if with_executor else _without_executor(full)
        if not with_executor:
            self._remember(self._bare, key, result)
        return result

    @staticmethod
    def _decode(blob: bytes, spec: Any, job_name: str, owner: str, sla: Any) -> Any:
        if blob:
            try:
                return thrift_util.decode(api.TaskConfig, blob)
            except Exception:  # not ours (another executor's data): describe the spec
                pass
        return from_pod_spec(spec, job_name, owner, sla)

    @staticmethod
    def _remember(cache: dict[bytes, Any], key: bytes, value: Any) -> None:
        if len(cache) >= MAX_CACHED:
            cache.clear()
        cache[key] = value
