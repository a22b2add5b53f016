"""v0 job messages <-> core: JobConfig -> JobSpec (validated), JobSpec/JobRuntime -> JobInfo.

On the way in every instance's merged config is converted and checked (see
`merge.expand_instances` and `validate`), and the JobConfig itself is kept
as the job's document, so that Get answers with exactly what the client
sent (placement strategy, Docker parameters, URI flags, ... included) plus
the fields the scheduler owns: change log version, instance count, pool.
A job created through v1alpha is read back through the `v0_v1` converter,
and one with no document is written from the core spec.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

from peloton.api.convert import v0_v1
from peloton.api.convert.common import (
    DOC_V0_JOB_CONFIG,
    DOC_V1_JOB_SPEC,
    labels_from_wire,
    time_range_from_wire,
    time_to_ns,
    time_to_rfc3339,
    v0_document,
    v1_document,
)
from peloton.api.convert.merge import expand_instances, merge_task_config
from peloton.api.convert.v0_task import task_config_to_v0, task_spec_from_v0
from peloton.api.convert.validate import V0_NAMES, Where, check_job, check_task
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.job import JobRuntime, JobSpec, JobSummary, PlacementStrategy, SlaSpec
from peloton.core.model.task import TaskSpec
from peloton.core.states import JobState, JobType

_TYPES: dict[int, JobType] = {job_pb2.BATCH: JobType.BATCH, job_pb2.SERVICE: JobType.SERVICE,
                              job_pb2.DAEMON: JobType.DAEMON}
_TYPES_TO_V0: dict[JobType, job_pb2.JobType] = {
    JobType.BATCH: job_pb2.BATCH, JobType.SERVICE: job_pb2.SERVICE, JobType.DAEMON: job_pb2.DAEMON}
_STATE_TO_V0: dict[JobState, job_pb2.JobState] = {
    s: cast(job_pb2.JobState, job_pb2.JobState.Value(s.value)) for s in JobState}
_STATE_FROM_V0: dict[int, JobState] = {int(v): k for k, v in _STATE_TO_V0.items()}


def job_type_from_v0(value: int, field: str = "type") -> JobType:
    """v0 JobType -> core (BATCH, SERVICE, DAEMON)."""
    try:
        return _TYPES[value]
    except KeyError:
        raise InvalidArgument(f"{field}: unknown job type {value}", field=field) from None


def job_type_to_v0(job_type: JobType) -> job_pb2.JobType:
    """Core JobType -> v0."""
    return _TYPES_TO_V0[job_type]


def job_state_to_v0(state: JobState) -> job_pb2.JobState:
    """Core JobState -> v0 (same names)."""
    return _STATE_TO_V0[state]


def job_state_from_v0(value: int, field: str = "state") -> JobState:
    """v0 JobState -> core."""
    try:
        return _STATE_FROM_V0[value]
    except KeyError:
        raise InvalidArgument(f"{field}: unknown job state {value}", field=field) from None


def sla_from_v0(sla: job_pb2.SlaConfig) -> SlaSpec:
    """v0 SlaConfig -> core SlaSpec."""
    return SlaSpec(priority=sla.priority, preemptible=sla.preemptible, revocable=sla.revocable,
                   maximum_running_instances=sla.maximumRunningInstances,
                   minimum_running_instances=sla.minimumRunningInstances,
                   max_running_time_secs=sla.maxRunningTime,
                   maximum_unavailable_instances=sla.maximumUnavailableInstances)


def sla_to_v0(sla: SlaSpec) -> job_pb2.SlaConfig:
    """Core SlaSpec -> v0 SlaConfig."""
    return job_pb2.SlaConfig(priority=sla.priority, preemptible=sla.preemptible,
                             revocable=sla.revocable,
                             maximumRunningInstances=sla.maximum_running_instances,
                             minimumRunningInstances=sla.minimum_running_instances,
                             maxRunningTime=sla.max_running_time_secs,
                             maximumUnavailableInstances=sla.maximum_unavailable_instances)


_STRATEGIES: dict[job_pb2.PlacementStrategy, PlacementStrategy] = {
    job_pb2.PLACEMENT_STRATEGY_INVALID: PlacementStrategy.UNSET,
    job_pb2.PLACEMENT_STRATEGY_PACK_HOST: PlacementStrategy.PACK_HOST,
    job_pb2.PLACEMENT_STRATEGY_SPREAD_JOB: PlacementStrategy.SPREAD_JOB}


def placement_strategy_from_v0(value: job_pb2.PlacementStrategy) -> PlacementStrategy:
    """v0 PlacementStrategy -> core; an unknown number is UNSET, as Peloton only tests for
    SPREAD_JOB (its batch placement strategy packs everything else)."""
    return _STRATEGIES.get(value, PlacementStrategy.UNSET)


def job_spec_from_v0(config: job_pb2.JobConfig) -> JobSpec:
    """A v0 JobConfig (Create / Update request) -> validated core JobSpec keeping the config."""
    job_type = job_type_from_v0(config.type)
    sla = sla_from_v0(config.sla)
    spec = JobSpec(
        name=config.name, type=job_type, instance_count=config.instanceCount,
        default_task=TaskSpec(), respool_id=config.respoolID.value, owner=config.owner,
        owning_team=config.owningTeam, ldap_groups=tuple(config.ldapGroups),
        description=config.description, labels=labels_from_wire(config.labels), sla=sla,
        document_kind=DOC_V0_JOB_CONFIG, document=config.SerializeToString(deterministic=True),
        placement_strategy=placement_strategy_from_v0(config.placementStrategy))
    check_job(spec, V0_NAMES)

    def convert(task: task_pb2.TaskConfig, field: str) -> TaskSpec:
        return task_spec_from_v0(task, sla_preemptible=sla.preemptible, field=field)

    def check(task: TaskSpec, instance: int, where: Where, others: bool) -> None:
        check_task(task, job_type=job_type, sla=sla, instance=instance, names=V0_NAMES,
                   where=where, other_instances=others)

    default = config.defaultConfig if config.HasField("defaultConfig") else None
    default_task, instance_tasks = expand_instances(
        config.instanceCount, default, dict(config.instanceConfig), merge=merge_task_config,
        convert=convert, check=check, default_name="defaultConfig", override_name="instanceConfig")
    return replace(spec, default_task=default_task, instance_tasks=instance_tasks)


def _labels_to_v0(labels: tuple[Label, ...], out: job_pb2.JobConfig) -> None:
    for label in labels:
        out.labels.add(key=label.key, value=label.value)


def job_config_to_v0(spec: JobSpec) -> job_pb2.JobConfig:
    """A job's config as v0 shows it: its request document when it has one, else built."""
    out = job_pb2.JobConfig()
    if spec.document_kind == DOC_V0_JOB_CONFIG:
        out.CopyFrom(v0_document(spec.document))
    elif spec.document_kind == DOC_V1_JOB_SPEC:
        out.CopyFrom(v0_v1.job_spec_to_v0(v1_document(spec.document)))
    else:
        out.name, out.owner, out.owningTeam = spec.name, spec.owner, spec.owning_team
        out.type = job_type_to_v0(spec.type)
        out.ldapGroups.extend(spec.ldap_groups)
        out.description = spec.description
        _labels_to_v0(spec.labels, out)
        out.sla.CopyFrom(sla_to_v0(spec.sla))
        out.placementStrategy = next(
            k for k, v in _STRATEGIES.items() if v is spec.placement_strategy)
        out.defaultConfig.CopyFrom(task_config_to_v0(spec.default_task))
        for instance, task in sorted(spec.instance_tasks.items()):
            out.instanceConfig[instance].CopyFrom(task_config_to_v0(task))
    # The scheduler owns these, whatever the document said.
    out.instanceCount = spec.instance_count
    out.changeLog.version = spec.version
    out.changeLog.createdAt = out.changeLog.updatedAt = time_to_ns(spec.created_at)
    if spec.respool_id:
        out.respoolID.value = spec.respool_id
    return out


def task_config_for_instance(spec: JobSpec, instance: int) -> task_pb2.TaskConfig:
    """One instance's merged TaskConfig (as v0 TaskInfo.config shows it), document first."""
    merged: task_pb2.TaskConfig | None
    if spec.document_kind == DOC_V0_JOB_CONFIG:
        doc = v0_document(spec.document)
        default = doc.defaultConfig if doc.HasField("defaultConfig") else None
        override = doc.instanceConfig.get(instance)
        merged = merge_task_config(default, override)
    elif spec.document_kind == DOC_V1_JOB_SPEC:
        return v0_v1.task_config_for_instance(v1_document(spec.document), instance)
    else:
        return task_config_to_v0(spec.task_spec(instance))
    out = task_pb2.TaskConfig()
    if merged is not None:
        out.CopyFrom(merged)
    return out


def job_runtime_to_v0(runtime: JobRuntime) -> job_pb2.RuntimeInfo:
    """Core JobRuntime -> v0 RuntimeInfo (times RFC 3339, counts keyed by v0 state names)."""
    out = job_pb2.RuntimeInfo(
        state=_STATE_TO_V0[runtime.state], goalState=_STATE_TO_V0[runtime.goal_state],
        creationTime=time_to_rfc3339(runtime.creation_time),
        startTime=time_to_rfc3339(runtime.start_time),
        completionTime=time_to_rfc3339(runtime.completion_time),
        configVersion=runtime.config_version, configurationVersion=runtime.config_version,
        workflowVersion=runtime.workflow_version, stateVersion=runtime.state_version,
        desiredStateVersion=runtime.desired_state_version)
    for state, count in runtime.task_stats.items():
        out.taskStats[state.value] = count
    out.revision.version = runtime.revision
    out.revision.createdAt = time_to_ns(runtime.creation_time)
    out.revision.updatedAt = time_to_ns(runtime.update_time)
    if runtime.update_id:
        out.updateID.value = runtime.update_id
    return out


def job_info_to_v0(job_id: str, spec: JobSpec, runtime: JobRuntime) -> job_pb2.JobInfo:
    """A job's id, config and runtime -> v0 JobInfo."""
    out = job_pb2.JobInfo(config=job_config_to_v0(spec), runtime=job_runtime_to_v0(runtime))
    out.id.value = job_id
    return out


def job_summary_to_v0(summary: JobSummary) -> job_pb2.JobSummary:
    """Core JobSummary -> v0 JobSummary."""
    out = job_pb2.JobSummary(name=summary.name, type=job_type_to_v0(summary.type),
                             owner=summary.owner, owningTeam=summary.owning_team,
                             instanceCount=summary.instance_count,
                             runtime=job_runtime_to_v0(summary.runtime), sla=sla_to_v0(summary.sla))
    out.id.value = summary.job_id
    out.respoolID.value = summary.respool_id
    for label in summary.labels:
        out.labels.add(key=label.key, value=label.value)
    return out


@dataclass(frozen=True, slots=True)
class JobQuerySpec:
    """A job query as plain values (None / empty = no filter); the daemon maps it to storage.

    `owner` is Peloton's owner filter (it matches the owning team).  `order_by` holds
    (property, descending) pairs with Peloton's property names; empty means newest
    first.  `limit` / `max_limit` None are the server's defaults.  Time ranges are
    (min, max) epoch seconds, None where the request left a bound unset.
    """

    states: frozenset[JobState] = frozenset()
    owner: str | None = None
    name: str | None = None
    respool_id: str | None = None
    respool_path: str | None = None
    labels: tuple[Label, ...] = ()
    keywords: tuple[str, ...] = ()
    creation_time: tuple[float | None, float | None] | None = None
    completion_time: tuple[float | None, float | None] | None = None
    order_by: tuple[tuple[str, bool], ...] = ()
    offset: int = 0
    limit: int | None = None
    max_limit: int | None = None


def job_query_from_v0(spec: job_pb2.QuerySpec, respool_id: str = "") -> JobQuerySpec:
    """A v0 job QuerySpec (and the request's respoolID) -> JobQuerySpec."""
    page = spec.pagination
    return JobQuerySpec(
        states=frozenset(job_state_from_v0(s, f"spec.jobStates[{i}]")
                         for i, s in enumerate(spec.jobStates)),
        owner=spec.owner or None, name=spec.name or None, respool_id=respool_id or None,
        respool_path=spec.respool.value or None, labels=labels_from_wire(spec.labels),
        keywords=tuple(spec.keywords),
        creation_time=(time_range_from_wire(spec.creationTimeRange)
                       if spec.HasField("creationTimeRange") else None),
        completion_time=(time_range_from_wire(spec.completionTimeRange)
                         if spec.HasField("completionTimeRange") else None),
        order_by=tuple((o.property.value, o.order == o.DESC) for o in page.orderBy),
        offset=page.offset, limit=page.limit or None, max_limit=page.maxLimit or None)
