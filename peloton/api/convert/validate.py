"""The job and task rules both APIs enforce on the way in.

Rules follow Peloton's pkg/jobmgr/job/config/validate.go, checked on the
converted core values so v0 and v1alpha share them; each failure raises
InvalidArgument whose `field` is the wire path the client wrote (v0
camelCase or v1alpha snake_case, from the `Names` tables below).  Where
Peloton was lax we are stricter, on purpose: maxFailures above 100 is
rejected instead of silently clamped, a task with no command (and no
custom executor) is rejected instead of failing on the host, duplicate
port names and port numbers above 65535 are rejected.

A task rule is checked on an instance's *merged* config, as in Peloton; the
`where(top_level_field)` callback tells whether that field came from the
default config or from the instance's own config, so the message points at
the text the user has to fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from peloton.core.errors import InvalidArgument
from peloton.core.model.job import MAX_INSTANCES_PER_JOB, JobSpec, SlaSpec
from peloton.core.model.resources import Resources, check_amount
from peloton.core.model.task import HealthCheckType, TaskSpec
from peloton.core.remote_volume import remote_volumes
from peloton.core.sla import task_sla
from peloton.core.states import JobType

#: Peloton's _maxTaskRetries; we reject above it rather than clamp.
MAX_TASK_FAILURES = 100
MAX_PORT = 65535

#: Chooses the prefix ("defaultConfig" or "instanceConfig[3]") of a top-level task field.
Where = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Names:
    """One API's field names: task fields as (top-level field, path), job fields as paths."""

    task: Mapping[str, tuple[str, str]]
    port: Mapping[str, str]
    instance_count: str
    sla: Mapping[str, str]


V0_NAMES = Names(
    task={
        "cpu": ("resource", "resource.cpuLimit"), "mem": ("resource", "resource.memLimitMb"),
        "disk": ("resource", "resource.diskLimitMb"), "gpu": ("resource", "resource.gpuLimit"),
        "ports": ("ports", "ports"), "command": ("command", "command"),
        "executor": ("executor", "executor"), "health": ("healthCheck", "healthCheck"),
        "health_command": ("healthCheck", "healthCheck.commandCheck.command"),
        "health_port": ("healthCheck", "healthCheck.httpCheck.port"),
        "max_failures": ("restartPolicy", "restartPolicy.maxFailures"),
        "volume_path": ("volume", "volume.containerPath"), "volume_size": ("volume", "volume.sizeMB"),
        "kill_on_preempt": ("preemptionPolicy", "preemptionPolicy.killOnPreempt"),
        "preemption": ("preemptionPolicy", "preemptionPolicy.type"),
        "controller": ("controller", "controller"), "revocable": ("revocable", "revocable"),
        "labels": ("labels", "labels"), "uris": ("command", "command.uris"),
    },
    port={"name": "name", "value": "value", "env": "envName"},
    instance_count="instanceCount",
    sla={"max_running": "sla.maximumRunningInstances", "min_running": "sla.minimumRunningInstances",
         "max_time": "sla.maxRunningTime", "revocable": "sla.revocable"},
)

_C0 = "containers[0]"
#: v1alpha names.  The top-level fields are those of the v0 TaskConfig a pod is converted to,
#: because a v1alpha job's instance specs are merged as v0 task configs (see v1_job).
V1_NAMES = Names(
    task={
        "cpu": ("resource", f"{_C0}.resource.cpu_limit"),
        "mem": ("resource", f"{_C0}.resource.mem_limit_mb"),
        "disk": ("resource", f"{_C0}.resource.disk_limit_mb"),
        "gpu": ("resource", f"{_C0}.resource.gpu_limit"),
        "ports": ("ports", f"{_C0}.ports"), "command": ("command", f"{_C0}.entrypoint"),
        "executor": ("executor", f"{_C0}.executor"),
        "health": ("healthCheck", f"{_C0}.liveness_check"),
        "health_command": ("healthCheck", f"{_C0}.liveness_check.command_check.command"),
        "health_port": ("healthCheck", f"{_C0}.liveness_check.http_check.port"),
        "max_failures": ("restartPolicy", "restart_policy.max_failures"),
        "volume_path": ("volume", "volume.container_path"), "volume_size": ("volume", "volume.size_mb"),
        "kill_on_preempt": ("preemptionPolicy", "preemption_policy.kill_on_preempt"),
        "preemption": ("preemptionPolicy", "preemption_policy"),
        "controller": ("controller", "controller"), "revocable": ("revocable", "revocable"),
        "labels": ("labels", "labels"), "uris": ("command", "mesos_spec.uris"),
    },
    port={"name": "name", "value": "value", "env": "env_name"},
    instance_count="instance_count",
    sla={"max_running": "sla.maximum_running_instances", "min_running": "sla.minimum_running_instances",
         "max_time": "sla.max_running_time", "revocable": "sla.revocable"},
)


def _fail(message: str, field: str) -> InvalidArgument:
    return InvalidArgument(f"{field}: {message}", field=field)


def wire_resources(cpu: float, mem_mb: float, disk_mb: float, gpu: float, *,
                   fields: tuple[str, str, str, str]) -> Resources:
    """A task's resources from wire floats, each checked by the core's rule (`check_amount`:
    finite, >= 0, at most MAX_AMOUNT) and refused by field name.

    `Resources` holds fixed-point units, which have no infinity or NaN and
    overflow on 1e308, so this check runs before the value is built.
    """
    for amount, name in zip((cpu, mem_mb, disk_mb, gpu), fields, strict=True):
        check_amount(amount, name)
    return Resources(cpu=cpu, mem_mb=mem_mb, disk_mb=disk_mb, gpu=gpu)


def check_task(spec: TaskSpec, *, job_type: JobType, sla: SlaSpec, instance: int,
               names: Names, where: Where, other_instances: bool = False) -> None:
    """Check one instance's merged task spec; `instance` is the lowest instance using it.

    `other_instances` says that instances other than `instance` (some non-zero) use the
    same spec too, which matters for the controller rule.
    """
    def at(key: str) -> str:
        top, path = names.task[key]
        return f"{where(top)}.{path}"

    for key, amount in (("cpu", spec.resources.cpu), ("mem", spec.resources.mem_mb),
                        ("disk", spec.resources.disk_mb), ("gpu", spec.resources.gpu)):
        if not math.isfinite(amount) or amount < 0:
            raise _fail(f"must be >= 0, got {amount}", at(key))
    custom_executor = bool(spec.executor_data)
    seen: set[str] = set()
    for i, port in enumerate(spec.ports):
        base = f"{at('ports')}[{i}]"
        if not port.name:
            raise _fail("port name is required", f"{base}.{names.port['name']}")
        if port.name in seen:
            raise _fail(f"duplicate port name {port.name!r}", f"{base}.{names.port['name']}")
        seen.add(port.name)
        if port.value > MAX_PORT:
            raise _fail(f"port must be <= {MAX_PORT}, got {port.value}", f"{base}.{names.port['value']}")
        if port.dynamic and not port.env_name and not custom_executor:
            raise _fail("a dynamic port (value 0) needs an env name", f"{base}.{names.port['env']}")
    if not spec.command.value and not spec.command.arguments and not custom_executor:
        raise _fail("a command is required", at("command"))
    if job_type is JobType.BATCH and custom_executor:
        raise _fail("batch tasks may not use an executor", at("executor"))
    health = spec.health_check
    if health is not None:
        if job_type is JobType.BATCH:
            raise _fail("batch tasks may not have a health check", at("health"))
        if health.type is HealthCheckType.COMMAND and not health.command:
            raise _fail("a command health check needs a command", at("health_command"))
        # Port 0 probes the task's first port (usually a dynamic one, unknown until placed).
        if health.type is HealthCheckType.HTTP and not (
                0 < health.http_port <= MAX_PORT or (health.http_port == 0 and spec.ports)):
            raise _fail("an HTTP health check needs a port (or the task needs a port to probe)",
                        at("health_port"))
    try:  # fetched files and immutable remote volumes (core/remote_volume.py)
        remote_volumes(spec.command.uris)
    except InvalidArgument as err:
        index = (err.field or "").rpartition("[")[2].rstrip("]")
        raise _fail(err.message, f"{at('uris')}[{index}]" if index.isdigit() else at("uris")) \
            from None
    if spec.restart_policy.max_failures > MAX_TASK_FAILURES:
        raise _fail(f"must be <= {MAX_TASK_FAILURES}, got {spec.restart_policy.max_failures}",
                    at("max_failures"))
    if spec.volume is not None:
        if not spec.volume.container_path:
            raise _fail("a persistent volume needs a container path", at("volume_path"))
        if spec.volume.size_mb <= 0:
            raise _fail("a persistent volume needs a size > 0", at("volume_size"))
    if job_type is not JobType.BATCH and spec.kill_on_preempt:
        raise _fail("must be false for service jobs", at("kill_on_preempt"))
    if spec.revocable and not spec.preemptible:
        raise _fail("revocable tasks must be preemptible", at("revocable"))
    if spec.controller and (instance != 0 or other_instances):
        raise _fail("only instance 0 may be the controller task", at("controller"))
    try:
        task_sla(spec.labels)  # our SLA label, read by SLA-aware host drains
    except InvalidArgument as err:
        raise _fail(err.message, at("labels")) from None
    if spec.preemptible != sla.preemptible and instance < sla.minimum_running_instances:
        raise _fail("instances below sla minimumRunningInstances form a gang and may not "
                    "override the job's preemption policy", at("preemption"))


def check_job(spec: JobSpec, names: Names, *, allow_empty: bool = False) -> None:
    """Check the job-level rules: instance count and SLA.

    `allow_empty`: zero instances is a valid target (v1alpha ReplaceJob, as Peloton's
    ValidateConfig: its Aurora bridge rolls a job's first deploy back to no instances).
    """
    low = 0 if allow_empty else 1
    if not low <= spec.instance_count <= MAX_INSTANCES_PER_JOB:
        raise _fail(f"must be between {low} and {MAX_INSTANCES_PER_JOB}, "
                    f"got {spec.instance_count}", names.instance_count)
    sla = spec.sla
    if spec.type is not JobType.BATCH:
        for key, value in (("max_running", sla.maximum_running_instances),
                           ("min_running", sla.minimum_running_instances),
                           ("max_time", sla.max_running_time_secs)):
            if value:
                raise _fail("must be 0 for service jobs", names.sla[key])
    if sla.revocable and not sla.preemptible:
        raise _fail("a revocable job must be preemptible", names.sla["revocable"])
    max_running = sla.maximum_running_instances or spec.instance_count
    if max_running > spec.instance_count:
        raise _fail("must not exceed the instance count", names.sla["max_running"])
    if sla.minimum_running_instances > max_running:
        raise _fail("must not exceed maximumRunningInstances", names.sla["min_running"])


def check_v0_update(old: JobSpec, new: JobSpec) -> None:
    """Peloton's ValidateUpdatedConfig for v0 JobManager.Update: only new instances may be added.

    Name, labels, owning team, pool, type, LDAP groups and the default config may not
    change, the instance count may not shrink, and existing instances keep their config.
    """
    for field, before, after in (
            ("name", old.name, new.name), ("labels", old.labels, new.labels),
            ("owningTeam", old.owning_team, new.owning_team),
            ("respoolID", old.respool_id, new.respool_id), ("type", old.type, new.type),
            ("ldapGroups", old.ldap_groups, new.ldap_groups),
            ("defaultConfig", old.default_task, new.default_task)):
        if before != after:
            raise _fail("may not change in an update", field)
    if new.instance_count < old.instance_count:
        raise _fail(f"may not shrink from {old.instance_count}", "instanceCount")
    for instance in sorted(set(old.instance_tasks) | set(new.instance_tasks)):
        if instance < old.instance_count and old.task_spec(instance) != new.task_spec(instance):
            raise _fail("an existing instance's config may not change", f"instanceConfig[{instance}]")
