"""A Pystachio Job as Aurora's Thrift JobConfiguration, field by field as Aurora's client sends it.

* key: role/environment/name; owner: the local user (Identity);
* TaskConfig: production, isService, maxTaskFailures, priority, contactEmail,
  tier, partitionPolicy, slaPolicy, metadata (the job's plus the caller's),
  resources (numCpus, ramMb and diskMb from the bytes in the config, one
  namedPort per port the task needs, numGpus when non-zero), constraints
  (`limit:N` -> LimitConstraint, `a,b` / `!a,b` -> (negated) ValueConstraint),
  container (Mesos by default, Docker, Mesos with an image and volumes),
  taskLinks empty, and executorConfig: `AuroraExecutor` with the job as
  Thermos JSON (the job minus `instances` and `update_config`, templates
  bound except the run-time ones; keys sorted, so the same job always gives
  the same bytes and an unchanged job is no update) or the custom executor's
  name and data;
* cronSchedule (None when unset), cronCollisionPolicy, instanceCount.

The ports a task needs are those its processes name in
`{{thermos.ports[name]}}` and the announcer's portmap entries that are not
static numbers (an alias `aurora -> http` resolves to `http`).

The input is a job that passed validate.check.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterable
from typing import Any

from pystachio import Empty

from aurorabridge.client import schema
from aurorabridge.client.validate import port_names
from aurorabridge.thrift_api import api

#: Job fields left out of the executor data (they describe the job, not one task).
ALIASED_FIELDS = ("update_config", "instances")


def _get(field: Any, default: Any = None) -> Any:
    return default if field is Empty else field.get()


def resolve_portmap(portmap: dict[str, Any]) -> dict[str, Any]:
    """Follow aliases in an announcer portmap: {'aurora': 'http', 'http': 80} -> both 80."""
    table: dict[str, Any] = {}
    for name, port in portmap.items():
        text = str(port)
        table[str(name)] = int(text) if text.isdigit() else text
    resolved = {}
    for name in table:
        seen = {name}
        target = table[name]
        while isinstance(target, str) and target in table:
            if target in seen:
                raise ValueError(f"Found cycle in portmap at {target!r}")
            seen.add(target)
            target = table[target]
        resolved[name] = target
    return resolved


def ports(job: Any) -> set[str]:
    """The named ports the scheduler must allocate for `job`'s tasks."""
    referenced = port_names(job.task())
    portmap = resolve_portmap(dict(_get(job.announce().portmap(), {}))) if job.has_announce() else {}
    unallocated = {p for p in portmap.values() if not isinstance(p, int)}
    unresolved = {p for p in (portmap.get(r, r) for r in referenced) if not isinstance(p, int)}
    return {str(p) for p in unallocated | unresolved}


def constraints(values: dict[str, str]) -> list[Any]:
    """The job's `constraints` map as Thrift Constraints."""
    result = []
    for name, value in sorted(values.items()):
        if value.startswith("limit:"):
            inner = api.TaskConstraint(limit=api.LimitConstraint(limit=int(value[len("limit:"):])))
        else:
            negated = value.startswith("!")
            body = value[1:] if negated else value
            inner = api.TaskConstraint(value=api.ValueConstraint(negated=negated,
                                                                 values=set(body.split(","))))
        result.append(api.Constraint(name=name, constraint=inner))
    return result


def _image(image: Any) -> Any:
    if image is Empty:
        return None
    value = image.unwrap()
    if isinstance(value, schema.DockerImage):
        return api.Image(docker=api.DockerImage(name=_get(value.name()), tag=_get(value.tag())))
    return api.Image(appc=api.AppcImage(name=_get(value.name()), imageId=_get(value.image_id())))


def container(field: Any) -> Any:
    """The job's `container` (Docker, Mesos, or the deprecated Container(docker=...))."""
    if field is Empty:
        return api.Container(mesos=api.MesosContainer())
    value = field.unwrap()
    if isinstance(value, schema.Container):
        value = value.docker()
        if value is Empty:
            raise ValueError("If a container is specified it must set one type.")
    if isinstance(value, schema.Docker):
        params = [api.DockerParameter(name=p["name"], value=p["value"])
                  for p in _get(value.parameters(), ())]
        return api.Container(docker=api.DockerContainer(image=_get(value.image()), parameters=params))
    volumes = [api.Volume(containerPath=v["container_path"], hostPath=v["host_path"],
                          mode=api.Mode._NAMES_TO_VALUES[str(v["mode"]).upper()])
               for v in _get(value.volumes(), ())]
    return api.Container(mesos=api.MesosContainer(image=_image(value.image()), volumes=volumes))


def sla_policy(field: Any) -> Any:
    """The job's `sla_policy` as a Thrift SlaPolicy."""
    value = field.unwrap()
    if isinstance(value, schema.PercentageSlaPolicy):
        return api.SlaPolicy(percentageSlaPolicy=api.PercentageSlaPolicy(
            percentage=_get(value.percentage()), durationSecs=_get(value.duration_secs())))
    if isinstance(value, schema.CountSlaPolicy):
        return api.SlaPolicy(countSlaPolicy=api.CountSlaPolicy(
            count=_get(value.count()), durationSecs=_get(value.duration_secs())))
    return api.SlaPolicy(coordinatorSlaPolicy=api.CoordinatorSlaPolicy(
        coordinatorUrl=_get(value.coordinator_url()), statusKey=_get(value.status_key())))


def resources(task: Any, named_ports: Iterable[str]) -> list[Any]:
    """numCpus, ramMb, diskMb, a namedPort per port, numGpus when asked for."""
    res = task.resources()
    result = [api.Resource(numCpus=float(_get(res.cpu()))),
              api.Resource(ramMb=_get(res.ram()) // schema.MB),
              api.Resource(diskMb=_get(res.disk()) // schema.MB)]
    result += [api.Resource(namedPort=p) for p in sorted(named_ports)]
    gpus = _get(res.gpu(), 0)
    if gpus:
        result.append(api.Resource(numGpus=gpus))
    return result


def executor_config(job: Any) -> Any:
    """AuroraExecutor with the Thermos JSON, or the custom executor as configured."""
    executor = job.executor_config()
    name = _get(executor.name())
    if name == schema.AURORA_EXECUTOR_NAME:
        underlying, _ = job.interpolate()
        doc, _ = underlying(**{f: Empty for f in ALIASED_FIELDS}).interpolate()
        return api.ExecutorConfig(name=name, data=json.dumps(doc.get(), sort_keys=True))
    return api.ExecutorConfig(name=name, data=_get(executor.data()))


def task_config(job: Any, metadata: Iterable[tuple[str, str]] = (), owner: str | None = None) -> Any:
    """The TaskConfig of `job`."""
    key = api.JobKey(role=_get(job.role()), environment=_get(job.environment()), name=_get(job.name()))
    pairs = {(str(m["key"]), str(m["value"])) for m in _get(job.metadata(), ())} | set(metadata)
    task = api.TaskConfig(
        job=key, owner=api.Identity(user=owner or getpass.getuser()),
        isService=bool(_get(job.service())), priority=_get(job.priority()),
        maxTaskFailures=_get(job.max_task_failures()), production=bool(_get(job.production())),
        tier=_get(job.tier()), resources=resources(job.task(), ports(job)),
        constraints=constraints(dict(_get(job.constraints(), {}))), taskLinks={},
        contactEmail=_get(job.contact()), executorConfig=executor_config(job),
        metadata=[api.Metadata(key=k, value=v) for k, v in sorted(pairs)],
        container=container(job.container()))
    if job.has_partition_policy():
        policy = job.partition_policy()
        task.partitionPolicy = api.PartitionPolicy(reschedule=bool(_get(policy.reschedule())),
                                                   delaySecs=_get(policy.delay_secs()))
    if job.has_sla_policy():
        task.slaPolicy = sla_policy(job.sla_policy())
    return task


def job_configuration(job: Any, metadata: Iterable[tuple[str, str]] = (),
                      owner: str | None = None) -> Any:
    """The JobConfiguration Aurora's client sends for `job` (createJob, scheduleCronJob)."""
    task = task_config(job, metadata, owner)
    policy = str(_get(job.cron_collision_policy())).upper()
    return api.JobConfiguration(
        key=task.job, owner=task.owner, cronSchedule=_get(job.cron_schedule()),
        cronCollisionPolicy=api.CronCollisionPolicy._NAMES_TO_VALUES[policy],
        taskConfig=task, instanceCount=_get(job.instances()))


def backfill_tier(job: Any, tiers: Any) -> Any:
    """Aurora's client fills `tier` from `production` (or `production` from `tier`) with the
    scheduler's getTierConfigs answer before it converts the job."""
    def flag(settings: dict[str, str], name: str) -> bool:
        return str(settings.get(name, "false")).lower() in ("true", "1")

    production = bool(_get(job.production()))
    tier = _get(job.tier())
    if tier is None:
        chosen = next((t.name for t in tiers.tiers if flag(t.settings, "preemptible") != production
                       and not flag(t.settings, "revocable")), tiers.defaultTierName)
        return job(tier=chosen)
    found = next((not flag(t.settings, "preemptible") for t in tiers.tiers if t.name == tier), production)
    return job(production=found)
