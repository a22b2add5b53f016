"""Wire to wire: v0 JobConfig/TaskConfig <-> v1alpha stateless JobSpec/PodSpec.

Used when a job stored from one API is read through the other, following
Peloton's pkg/common/api converters: a TaskConfig becomes a one-container
PodSpec that carries the raw Mesos messages *and* their v1alpha spelling
(see `mesos_pod`), and on the way back the raw messages win, so v0 -> v1 ->
v0 loses nothing.  One deliberate difference from Peloton: a v1alpha
preemption policy only carries kill_on_preempt, so the v0 policy type is
left unset (the job SLA decides) instead of being derived from
kill_on_preempt.  A v1alpha job's SLA `revocable` overrides its pods', as
in Peloton.
"""

from __future__ import annotations

from typing import cast

from peloton.api.convert.merge import merge_task_config
from peloton.api.convert.mesos_pod import (
    command_to_v1,
    container_to_v1,
    executor_to_v1,
    mesos_command_of,
    mesos_container_of,
    mesos_executor_of,
)
from peloton.api.gen.peloton.api.v0 import peloton_pb2 as v0_peloton_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha import peloton_pb2 as v1_peloton_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import Unimplemented


def task_config_to_v1(config: task_pb2.TaskConfig, pod_name: str = "") -> pod_pb2.PodSpec:
    """A v0 TaskConfig -> v1alpha PodSpec with one container (Peloton's ConvertTaskConfigToPodSpec)."""
    pod = pod_pb2.PodSpec(controller=config.controller, revocable=config.revocable,
                          kill_grace_period_seconds=config.killGracePeriodSeconds)
    if pod_name:
        pod.pod_name.value = pod_name
    for label in config.labels:
        pod.labels.add(key=label.key, value=label.value)
    if config.HasField("constraint"):
        pod.constraint.ParseFromString(config.constraint.SerializeToString())
    if config.HasField("volume"):
        pod.volume.container_path = config.volume.containerPath
        pod.volume.size_mb = config.volume.sizeMB
    if config.HasField("preemptionPolicy"):
        pod.preemption_policy.kill_on_preempt = config.preemptionPolicy.killOnPreempt
    if config.HasField("restartPolicy"):
        pod.restart_policy.max_failures = config.restartPolicy.maxFailures
    box = pod_pb2.ContainerSpec(name=config.name)
    if config.HasField("resource"):
        r = config.resource
        box.resource.CopyFrom(pod_pb2.ResourceSpec(cpu_limit=r.cpuLimit, mem_limit_mb=r.memLimitMb,
                                                   disk_limit_mb=r.diskLimitMb, fd_limit=r.fdLimit,
                                                   gpu_limit=r.gpuLimit))
    if config.HasField("container"):
        container_to_v1(config.container, pod, box)
    if config.HasField("command"):
        command_to_v1(config.command, pod, box)
    if config.HasField("executor"):
        executor_to_v1(config.executor, pod, box)
    for port in config.ports:
        box.ports.add(name=port.name, value=port.value, env_name=port.envName)
    if config.HasField("healthCheck"):
        # The two health check messages share field numbers and enum values.
        box.liveness_check.ParseFromString(config.healthCheck.SerializeToString())
    if box.ByteSize():
        pod.containers.append(box)
    return pod


def pod_spec_to_v0(pod: pod_pb2.PodSpec) -> task_pb2.TaskConfig:
    """A v1alpha PodSpec -> v0 TaskConfig (one container at most, no init containers)."""
    if len(pod.containers) > 1:
        raise Unimplemented("containers: more than one container per pod is not supported",
                            field="containers")
    if pod.init_containers:
        raise Unimplemented("init_containers: init containers are not supported",
                            field="init_containers")
    out = task_pb2.TaskConfig(controller=pod.controller, revocable=pod.revocable,
                              killGracePeriodSeconds=pod.kill_grace_period_seconds)
    for label in pod.labels:
        out.labels.add(key=label.key, value=label.value)
    if pod.HasField("constraint"):
        out.constraint.ParseFromString(pod.constraint.SerializeToString())
    if pod.HasField("restart_policy"):
        out.restartPolicy.maxFailures = pod.restart_policy.max_failures
    if pod.HasField("volume"):
        out.volume.containerPath = pod.volume.container_path
        out.volume.sizeMB = pod.volume.size_mb
    if pod.HasField("preemption_policy"):
        out.preemptionPolicy.killOnPreempt = pod.preemption_policy.kill_on_preempt
    if not pod.containers:
        return out
    box = pod.containers[0]
    out.name = box.name
    if box.HasField("resource"):
        r = box.resource
        out.resource.CopyFrom(task_pb2.ResourceConfig(cpuLimit=r.cpu_limit, memLimitMb=r.mem_limit_mb,
                                                      diskLimitMb=r.disk_limit_mb, fdLimit=r.fd_limit,
                                                      gpuLimit=r.gpu_limit))
    container = mesos_container_of(pod, box)
    if container is not None:
        out.container.CopyFrom(container)
    command = mesos_command_of(pod, box)
    if command is not None:
        out.command.CopyFrom(command)
    executor = mesos_executor_of(pod, box)
    if executor is not None:
        out.executor.CopyFrom(executor)
    for port in box.ports:
        out.ports.add(name=port.name, value=port.value, envName=port.env_name)
    if box.HasField("liveness_check"):
        check = box.liveness_check
        out.healthCheck.CopyFrom(task_pb2.HealthCheckConfig(
            enabled=check.enabled, initialIntervalSecs=check.initial_interval_secs,
            intervalSecs=check.interval_secs, maxConsecutiveFailures=check.max_consecutive_failures,
            timeoutSecs=check.timeout_secs,
            type=cast(task_pb2.HealthCheckConfig.Type, int(check.type))))
        if check.HasField("command_check"):
            out.healthCheck.commandCheck.command = check.command_check.command
            out.healthCheck.commandCheck.unshareEnvironments = check.command_check.unshare_environments
        if check.HasField("http_check"):
            out.healthCheck.httpCheck.scheme = check.http_check.scheme
            out.healthCheck.httpCheck.port = check.http_check.port
            out.healthCheck.httpCheck.path = check.http_check.path
    return out


def job_config_to_v1(config: job_pb2.JobConfig) -> stateless_pb2.JobSpec:
    """A v0 JobConfig -> v1alpha stateless JobSpec (Peloton's ConvertJobConfigToJobSpec)."""
    out = stateless_pb2.JobSpec(
        name=config.name, owner=config.owner, owning_team=config.owningTeam,
        ldap_groups=list(config.ldapGroups), description=config.description,
        instance_count=config.instanceCount)
    log = config.changeLog
    out.revision.CopyFrom(v1_peloton_pb2.Revision(
        version=log.version, created_at=log.createdAt, updated_at=log.updatedAt,
        updated_by=log.updatedBy))
    for label in config.labels:
        out.labels.add(key=label.key, value=label.value)
    sla = config.sla
    out.sla.CopyFrom(stateless_pb2.SlaSpec(
        priority=sla.priority, preemptible=sla.preemptible, revocable=sla.revocable,
        maximum_unavailable_instances=sla.maximumUnavailableInstances))
    out.default_spec.CopyFrom(task_config_to_v1(config.defaultConfig))
    for instance, task in config.instanceConfig.items():
        out.instance_spec[instance].CopyFrom(task_config_to_v1(task))
    out.respool_id.value = config.respoolID.value
    return out


def job_spec_to_v0(spec: stateless_pb2.JobSpec) -> job_pb2.JobConfig:
    """A v1alpha stateless JobSpec -> v0 JobConfig of type SERVICE; the SLA decides revocable."""
    out = job_pb2.JobConfig(type=job_pb2.SERVICE, name=spec.name, owner=spec.owner,
                            owningTeam=spec.owning_team, ldapGroups=list(spec.ldap_groups),
                            description=spec.description, instanceCount=spec.instance_count)
    if spec.HasField("revision"):
        rev = spec.revision
        out.changeLog.CopyFrom(v0_peloton_pb2.ChangeLog(
            version=rev.version, createdAt=rev.created_at, updatedAt=rev.updated_at,
            updatedBy=rev.updated_by))
    for label in spec.labels:
        out.labels.add(key=label.key, value=label.value)
    if spec.HasField("sla"):
        out.sla.CopyFrom(job_pb2.SlaConfig(
            priority=spec.sla.priority, preemptible=spec.sla.preemptible,
            revocable=spec.sla.revocable,
            maximumUnavailableInstances=spec.sla.maximum_unavailable_instances))
    revocable = spec.sla.revocable if spec.HasField("sla") else None
    if spec.HasField("default_spec"):
        out.defaultConfig.CopyFrom(pod_spec_to_v0(spec.default_spec))
        if revocable is not None:
            out.defaultConfig.revocable = revocable
    for instance, pod in spec.instance_spec.items():
        task = out.instanceConfig[instance]
        task.CopyFrom(pod_spec_to_v0(pod))
        if revocable is not None and spec.HasField("default_spec"):
            task.revocable = revocable
    if spec.HasField("respool_id"):
        out.respoolID.value = spec.respool_id.value
    return out


def task_config_for_instance(spec: stateless_pb2.JobSpec, instance: int) -> task_pb2.TaskConfig:
    """One instance's config of a v1alpha JobSpec as it runs: pod specs as v0, then merged.

    This is the v0 top-level merge of the converted default and instance pod specs, which
    is how Peloton ran v1alpha jobs (and how `v1_job.job_spec_from_v1` reads them).
    """
    revocable = spec.sla.revocable if spec.HasField("sla") else None

    def as_v0(pod: pod_pb2.PodSpec) -> task_pb2.TaskConfig:
        config = pod_spec_to_v0(pod)
        if revocable is not None:
            config.revocable = revocable
        return config

    default = as_v0(spec.default_spec) if spec.HasField("default_spec") else None
    override = spec.instance_spec.get(instance)
    merged = merge_task_config(default, as_v0(override) if override is not None else None)
    return merged if merged is not None else task_pb2.TaskConfig()


def pod_spec_for_instance(config: job_pb2.JobConfig, instance: int, pod_name: str = "") -> pod_pb2.PodSpec:
    """One instance's merged task config of a v0 JobConfig, as a v1alpha PodSpec."""
    default = config.defaultConfig if config.HasField("defaultConfig") else None
    override = config.instanceConfig.get(instance)
    merged = merge_task_config(default, override)
    return task_config_to_v1(merged if merged is not None else task_pb2.TaskConfig(), pod_name)
