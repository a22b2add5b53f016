"""Aurora's input rules, checked in full before the bridge makes any Peloton call.

From Aurora's ConfigurationManager and SchedulerThriftInterface:
job keys are good identifiers and the environment matches the allowed
pattern; the instance count is 1..max_tasks_per_job; cpu, ram and disk are
> 0; the tier is known; a dedicated constraint belongs to the role; an SLA
policy is in range (check_sla_policy); cron is
valid (scheduleCronJob) or absent (createJob); update settings have a positive group size and non-negative
failure limits, waits and pulse timeout; ranges are well-formed.  Each
violation is an InvalidArgument naming the field, which the handlers turn
into INVALID_REQUEST, so nothing is ever half-applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aurorabridge import labels
from aurorabridge.atop import constraints, thermos
from aurorabridge.atop.job_key import JobKey, check_environment, check_identifier, job_key
from aurorabridge.atop.job_spec import group_size
from aurorabridge.atop.resources import TaskResources, task_resources
from aurorabridge.config import ValidationSettings
from aurorabridge.thrift_api import api
from peloton.core.cron import schedule as cron_schedule
from peloton.core.errors import InvalidArgument

#: Tiers answered by getTierConfigs (Peloton's bridge's set).
TIERS = ("preemptible", "revocable", "preferred")
MAX_I32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CheckedTask:
    """A TaskConfig that passed validation, with what was derived on the way."""

    task: Any
    key: JobKey
    resources: TaskResources
    instance_count: int


def check_instance_count(count: Any, limits: ValidationSettings) -> int:
    """1 <= count <= max_tasks_per_job."""
    if not isinstance(count, int) or count <= 0:
        raise InvalidArgument(f"instanceCount must be positive, got {count}", field="instanceCount")
    if count > limits.max_tasks_per_job:
        raise InvalidArgument(f"instanceCount {count} exceeds the limit of {limits.max_tasks_per_job} "
                              "tasks per job", field="instanceCount")
    return count


def check_task(task: Any, count: Any, limits: ValidationSettings, key: Any = None) -> CheckedTask:
    """Validate a TaskConfig to be run `count` times (its job key, or `key` when given)."""
    if task is None:
        raise InvalidArgument("taskConfig is required", field="taskConfig")
    checked_key = job_key(key if key is not None else task.job, "job key")
    if key is not None and task.job is not None and job_key(task.job, "taskConfig.job") != checked_key:
        raise InvalidArgument(f"taskConfig.job {job_key(task.job)} differs from the job key {checked_key}",
                              field="taskConfig.job")
    check_environment(checked_key, limits.allowed_environments)
    instances = check_instance_count(count, limits)
    if task.owner is not None and task.owner.user:
        check_identifier(task.owner.user, "owner.user")
    if task.tier is not None and task.tier not in TIERS:
        raise InvalidArgument(f"unknown tier {task.tier!r}; known tiers: {', '.join(TIERS)}", field="tier")
    if task.priority is not None and task.priority < 0:
        raise InvalidArgument(f"priority must be >= 0, got {task.priority}", field="priority")
    if task.maxTaskFailures is not None and task.maxTaskFailures < -1:
        raise InvalidArgument("maxTaskFailures must be -1 (unlimited) or more", field="maxTaskFailures")
    if task.slaPolicy is not None:
        check_sla_policy(task.slaPolicy, instances, "taskConfig.slaPolicy")
    resources = task_resources(task, limits.allow_gpus)
    constraints.check_dedicated(task.constraints, checked_key.role)
    # Building the constraint rejects the forms Peloton cannot express.
    constraints.pod_constraint(task.constraints, labels.job_key_label(*_parts(checked_key)))
    thermos.task_command(task)
    return CheckedTask(task, checked_key, resources, instances)


#: Aurora's answer to createJob with a cron schedule (SchedulerThriftInterface.NO_CRON).
NO_CRON = "Cron jobs may only be created/updated by calling scheduleCronJob."


def check_job_configuration(config: Any, limits: ValidationSettings,
                            cron: bool | None = False) -> CheckedTask:
    """Validate a JobConfiguration: for createJob (`cron` False: no cron schedule allowed),
    scheduleCronJob / replaceCronTemplate (`cron` True: a valid schedule, a non-service task, a
    collision policy other than the removed RUN_OVERLAP) or populateJobConfig (None: either)."""
    if config is None:
        raise InvalidArgument("job configuration is required", field="description")
    if cron or (cron is None and config.cronSchedule):
        check_cron(config)
    elif config.cronSchedule:
        raise InvalidArgument(NO_CRON, field="cronSchedule")
    if config.owner is not None and config.owner.user:
        check_identifier(config.owner.user, "owner.user")
    return check_task(config.taskConfig, config.instanceCount, limits, key=config.key)


def check_cron(config: Any) -> None:
    """Aurora's cron checks (SanitizedCronJob, ConfigurationManager, CronJobManagerImpl)."""
    key = job_key(config.key, "job key") if config.key is not None else None
    if not config.cronSchedule:
        raise InvalidArgument(f"Job {key} has no cron schedule", field="cronSchedule")
    try:
        cron_schedule.parse(config.cronSchedule)
    except InvalidArgument as exc:
        raise InvalidArgument(f"Invalid cron schedule: {exc.message}", field="cronSchedule") from None
    if config.taskConfig is not None and config.taskConfig.isService:
        raise InvalidArgument("A service task may not be run on a cron schedule",
                              field="taskConfig.isService")
    if config.cronCollisionPolicy == api.CronCollisionPolicy.RUN_OVERLAP:
        raise InvalidArgument("The RUN_OVERLAP collision policy has been removed (AURORA-38).",
                              field="cronCollisionPolicy")
    if config.cronCollisionPolicy not in (None, *api.CronCollisionPolicy._VALUES_TO_NAMES):
        raise InvalidArgument(f"unknown cronCollisionPolicy {config.cronCollisionPolicy}",
                              field="cronCollisionPolicy")


def check_sla_policy(policy: Any, instance_count: int | None, what: str) -> None:
    """Aurora's range checks on an SlaPolicy (ConfigurationManager.validateSlaPolicy, and the
    same values for slaDrainHosts): exactly one policy; a percentage in [0, 100] and a count
    >= 0 that, for a job of `instance_count` instances, still let one instance be disrupted;
    durations >= 0; a coordinator with a URL."""
    chosen = [name for name in ("percentageSlaPolicy", "countSlaPolicy", "coordinatorSlaPolicy")
              if getattr(policy, name) is not None]
    if len(chosen) != 1:
        raise InvalidArgument(f"{what} must set exactly one of percentageSlaPolicy, countSlaPolicy "
                              "and coordinatorSlaPolicy", field=what)
    field = f"{what}.{chosen[0]}"
    inner = getattr(policy, chosen[0])
    if chosen[0] == "coordinatorSlaPolicy":
        if not inner.coordinatorUrl:
            raise InvalidArgument(f"{field}.coordinatorUrl is required", field=f"{field}.coordinatorUrl")
        return
    if (inner.durationSecs or 0) < 0:
        raise InvalidArgument(f"{field}.durationSecs must be >= 0, got {inner.durationSecs}",
                              field=f"{field}.durationSecs")
    if chosen[0] == "percentageSlaPolicy":
        percentage = inner.percentage or 0.0
        if not 0.0 <= percentage <= 100.0:
            raise InvalidArgument(f"{field}.percentage must be between 0 and 100, got {percentage}",
                                  field=f"{field}.percentage")
        if instance_count and instance_count - instance_count * percentage / 100.0 < 1:
            raise InvalidArgument(
                f"{field}.percentage: Current PercentageSlaPolicy: percentage={percentage:f} will not "
                "allow any instances "
                f"to be killed. Must be less than {(instance_count - 1) / instance_count * 100.0:f}.",
                field=f"{field}.percentage")
        return
    count = inner.count or 0
    if count < 0:
        raise InvalidArgument(f"{field}.count must be >= 0, got {count}", field=f"{field}.count")
    if instance_count and instance_count - count < 1:
        raise InvalidArgument(f"{field}.count: Current CountSlaPolicy: count={count} will not allow any "
                              f"instances to be killed. Must be less than instanceCount={instance_count}.",
                              field=f"{field}.count")


def check_ranges(ranges: Any, what: str) -> list[tuple[int, int]]:
    """Well-formed [first, last] ranges, sorted."""
    out = []
    for r in ranges or ():
        if r.first is None or r.last is None or r.first < 0 or r.last < r.first:
            raise InvalidArgument(f"{what}: range [{r.first}, {r.last}] is invalid", field=what)
        out.append((r.first, r.last))
    return sorted(out)


def check_update_settings(settings: Any, instance_count: int) -> None:
    """SchedulerThriftInterface.startJobUpdate's checks on JobUpdateSettings."""
    if settings is None:
        raise InvalidArgument("update settings are required", field="settings")
    strategy = settings.updateStrategy
    if strategy is not None and not any((strategy.queueStrategy, strategy.batchStrategy,
                                         strategy.varBatchStrategy)):
        raise InvalidArgument("settings.updateStrategy names no strategy (queueStrategy, batchStrategy "
                              "or varBatchStrategy)", field="settings.updateStrategy")
    variable = strategy.varBatchStrategy if strategy is not None else None
    if variable is not None and any((s or 0) <= 0 for s in variable.groupSizes or [0]):
        raise InvalidArgument("All update group sizes must be positive "
                              "(settings.updateStrategy.varBatchStrategy.groupSizes is "
                              f"{list(variable.groupSizes or [])})",
                              field="settings.updateStrategy.varBatchStrategy.groupSizes")
    if group_size(settings) <= 0:
        raise InvalidArgument("updateGroupSize (the update group size) must be positive",
                              field="updateGroupSize")
    for name in ("maxPerInstanceFailures", "maxFailedInstances", "minWaitInInstanceRunningMs",
                 "blockIfNoPulsesAfterMs"):
        value = getattr(settings, name)
        if value is not None and value < 0:
            raise InvalidArgument(f"{name} must be >= 0, got {value}", field=name)
    if (settings.maxPerInstanceFailures or 0) * instance_count > MAX_I32:
        raise InvalidArgument("maxPerInstanceFailures * instanceCount is too large",
                              field="maxPerInstanceFailures")
    check_ranges(settings.updateOnlyTheseInstances, "updateOnlyTheseInstances")


def check_instance_ids(ids: Any, what: str) -> list[int]:
    """A sorted list of non-negative instance ids."""
    out = sorted(set(ids or ()))
    if any(i < 0 for i in out):
        raise InvalidArgument(f"{what}: instance ids must be >= 0", field=what)
    return out


def _parts(key: JobKey) -> tuple[str, str, str]:
    return key.role, key.environment, key.name
