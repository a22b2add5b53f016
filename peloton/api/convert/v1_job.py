"""v1alpha stateless job messages <-> core: JobSpec in (validated), JobInfo/Status/Summary out.

A v1alpha job is a SERVICE job.  As for v0, every instance's merged config
is converted and checked, and the request is kept as the job's document.
Reads answer as Peloton's do: Peloton stored a v1alpha spec as the v0
JobConfig it converts to and read it back through ConvertJobConfigToJobSpec
/ ConvertTaskConfigToPodSpec (pkg/jobmgr/util/handler/api_converter.go), so
a pod read back carries both spellings of what it runs (`command` and
`entrypoint`, `container` and `image`, `executor` and
`mesos_spec.executor_spec`), and GetPod shows the instance's v0-merged
config; the scheduler-owned fields (revision version, instance count, pool)
come from the core.  Job entity versions are
`<config>-<desired state>-<workflow>` (JobRuntime.entity_version).
"""

from __future__ import annotations

from dataclasses import replace
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
from peloton.api.convert.v0_job import JobQuerySpec
from peloton.api.convert.v0_task import task_spec_from_v0
from peloton.api.convert.v1_pod import pod_spec_from_v1, task_spec_to_v1
from peloton.api.convert.v1_pod_status import pod_state_to_v1
from peloton.api.convert.v1_workflow import workflow_status_to_v1
from peloton.api.convert.validate import V1_NAMES, Where, check_job, check_task
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.job import JobRuntime, JobSpec, JobSummary, SlaSpec
from peloton.core.model.task import TaskSpec
from peloton.core.model.update import UpdateInfo
from peloton.core.states import JobState, JobType

_STATE_TO_V1: dict[JobState, stateless_pb2.JobState] = {
    s: cast(stateless_pb2.JobState, stateless_pb2.JobState.Value(
        "JOB_STATE_INVALID" if s is JobState.UNKNOWN else f"JOB_STATE_{s.value}"))
    for s in JobState}
_STATE_FROM_V1: dict[int, JobState] = {int(v): k for k, v in _STATE_TO_V1.items()}


def job_state_to_v1(state: JobState) -> stateless_pb2.JobState:
    """Core JobState -> JOB_STATE_* (UNKNOWN is JOB_STATE_INVALID, as in Peloton's cast)."""
    return _STATE_TO_V1[state]


def job_state_from_v1(value: int, field: str = "state") -> JobState:
    """JOB_STATE_* -> core."""
    try:
        return _STATE_FROM_V1[value]
    except KeyError:
        raise InvalidArgument(f"{field}: not a job state: {value}", field=field) from None


def sla_from_v1(sla: stateless_pb2.SlaSpec) -> SlaSpec:
    """v1alpha SlaSpec -> core (running-instance limits do not exist for services)."""
    return SlaSpec(priority=sla.priority, preemptible=sla.preemptible, revocable=sla.revocable,
                   maximum_unavailable_instances=sla.maximum_unavailable_instances)


def sla_to_v1(sla: SlaSpec) -> stateless_pb2.SlaSpec:
    """Core SlaSpec -> v1alpha SlaSpec."""
    return stateless_pb2.SlaSpec(priority=sla.priority, preemptible=sla.preemptible,
                                 revocable=sla.revocable,
                                 maximum_unavailable_instances=sla.maximum_unavailable_instances)


def _as_task_config(pod: pod_pb2.PodSpec, revocable: bool | None) -> task_pb2.TaskConfig:
    config = v0_v1.pod_spec_to_v0(pod)
    if revocable is not None:
        config.revocable = revocable
    return config


def job_spec_from_v1(msg: stateless_pb2.JobSpec, *, allow_empty: bool = False) -> JobSpec:
    """A v1alpha JobSpec (CreateJob / ReplaceJob) -> validated core JobSpec keeping the request.

    As in Peloton, the pod specs are converted to v0 task configs and an instance's
    config is the v0 top-level merge of those (so an instance spec that replaces the
    container but says nothing of a liveness check keeps the default's, as it ran in
    Peloton; GetPod still shows the pod-level merge of what was sent).
    """
    sla = sla_from_v1(msg.sla)
    revocable = msg.sla.revocable if msg.HasField("sla") else None
    spec = JobSpec(
        name=msg.name, type=JobType.SERVICE, instance_count=msg.instance_count,
        default_task=TaskSpec(), respool_id=msg.respool_id.value, owner=msg.owner,
        owning_team=msg.owning_team, ldap_groups=tuple(msg.ldap_groups),
        description=msg.description, labels=labels_from_wire(msg.labels), sla=sla,
        document_kind=DOC_V1_JOB_SPEC, document=msg.SerializeToString(deterministic=True))
    check_job(spec, V1_NAMES, allow_empty=allow_empty)
    # Read every pod spec once in v1alpha terms, so what cannot be read is named as the user wrote it.
    default = None
    if msg.HasField("default_spec"):
        pod_spec_from_v1(msg.default_spec, field="default_spec")
        default = _as_task_config(msg.default_spec, revocable)
    overrides: dict[int, task_pb2.TaskConfig] = {}
    for instance, pod in msg.instance_spec.items():
        pod_spec_from_v1(pod, field=f"instance_spec[{instance}]")
        overrides[instance] = _as_task_config(pod, revocable)

    def convert(config: task_pb2.TaskConfig, field: str) -> TaskSpec:
        return task_spec_from_v0(config, sla_preemptible=sla.preemptible, field=field)

    def check(task: TaskSpec, instance: int, where: Where, others: bool) -> None:
        check_task(task, job_type=JobType.SERVICE, sla=sla, instance=instance, names=V1_NAMES,
                   where=where, other_instances=others)

    default_task, instance_tasks = expand_instances(
        msg.instance_count, default, overrides, merge=merge_task_config, convert=convert,
        check=check, default_name="default_spec", override_name="instance_spec")
    return replace(spec, default_task=default_task, instance_tasks=instance_tasks)


def as_peloton_reads(doc: stateless_pb2.JobSpec) -> stateless_pb2.JobSpec:
    """A v1alpha spec as Peloton returned it: through the v0 JobConfig it stored, and back."""
    return v0_v1.job_config_to_v1(v0_v1.job_spec_to_v0(doc))


def job_spec_to_v1(spec: JobSpec) -> stateless_pb2.JobSpec:
    """A job's spec as v1alpha shows it: from its request document when it has one, else built."""
    out = stateless_pb2.JobSpec()
    if spec.document_kind == DOC_V1_JOB_SPEC:
        out.CopyFrom(as_peloton_reads(v1_document(spec.document)))
    elif spec.document_kind == DOC_V0_JOB_CONFIG:
        out.CopyFrom(v0_v1.job_config_to_v1(v0_document(spec.document)))
    else:
        out.name, out.owner, out.owning_team = spec.name, spec.owner, spec.owning_team
        out.ldap_groups.extend(spec.ldap_groups)
        out.description = spec.description
        for label in spec.labels:
            out.labels.add(key=label.key, value=label.value)
        out.sla.CopyFrom(sla_to_v1(spec.sla))
        out.default_spec.CopyFrom(task_spec_to_v1(spec.default_task))
        for instance, task in sorted(spec.instance_tasks.items()):
            out.instance_spec[instance].CopyFrom(task_spec_to_v1(task))
    out.instance_count = spec.instance_count
    out.revision.version = spec.version
    out.revision.created_at = out.revision.updated_at = time_to_ns(spec.created_at)
    if spec.respool_id:
        out.respool_id.value = spec.respool_id
    return out


def pod_spec_for_instance(spec: JobSpec, job_id: str, instance: int) -> pod_pb2.PodSpec:
    """One instance's merged PodSpec (as GetPod shows it), named `<job>-<instance>`.

    As Peloton's GetPod: the instance's task config (its v0 config merged over the
    default's, the SLA deciding `revocable`) converted by ConvertTaskConfigToPodSpec.
    """
    name = f"{job_id}-{instance}"
    if spec.document_kind == DOC_V1_JOB_SPEC:
        config = v0_v1.task_config_for_instance(v1_document(spec.document), instance)
        return v0_v1.task_config_to_v1(config, name)
    if spec.document_kind == DOC_V0_JOB_CONFIG:
        return v0_v1.pod_spec_for_instance(v0_document(spec.document), instance, name)
    return task_spec_to_v1(spec.task_spec(instance), name)


def job_status_to_v1(runtime: JobRuntime, workflow: UpdateInfo | None = None) -> stateless_pb2.JobStatus:
    """A job's runtime (and its current workflow, if any) -> v1alpha JobStatus."""
    out = stateless_pb2.JobStatus(state=_STATE_TO_V1[runtime.state],
                                  desired_state=_STATE_TO_V1[runtime.goal_state],
                                  creation_time=time_to_rfc3339(runtime.creation_time))
    out.revision.version = runtime.revision
    out.revision.created_at = time_to_ns(runtime.creation_time)
    out.revision.updated_at = time_to_ns(runtime.update_time)
    out.version.value = runtime.entity_version()
    for state, count in runtime.task_stats.items():
        out.pod_stats[pod_pb2.PodState.Name(pod_state_to_v1(state))] = count
    if workflow is not None:
        out.workflow_status.CopyFrom(workflow_status_to_v1(workflow, runtime))
    return out


def job_info_to_v1(job_id: str, spec: JobSpec, runtime: JobRuntime,
                   workflow: UpdateInfo | None = None) -> stateless_pb2.JobInfo:
    """A job -> v1alpha JobInfo."""
    out = stateless_pb2.JobInfo(spec=job_spec_to_v1(spec), status=job_status_to_v1(runtime, workflow))
    out.job_id.value = job_id
    return out


def job_summary_to_v1(summary: JobSummary, workflow: UpdateInfo | None = None) -> stateless_pb2.JobSummary:
    """Core JobSummary -> v1alpha JobSummary."""
    out = stateless_pb2.JobSummary(name=summary.name, owner=summary.owner,
                                   owning_team=summary.owning_team,
                                   instance_count=summary.instance_count,
                                   status=job_status_to_v1(summary.runtime, workflow),
                                   sla=sla_to_v1(summary.sla))
    out.job_id.value = summary.job_id
    out.respool_id.value = summary.respool_id
    for label in summary.labels:
        out.labels.add(key=label.key, value=label.value)
    return out


def job_query_from_v1(spec: stateless_pb2.QuerySpec) -> JobQuerySpec:
    """A v1alpha job QuerySpec -> JobQuerySpec."""
    page = spec.pagination
    return JobQuerySpec(
        states=frozenset(job_state_from_v1(s, f"spec.job_states[{i}]")
                         for i, s in enumerate(spec.job_states)),
        owner=spec.owner or None, name=spec.name or None, respool_path=spec.respool.value or None,
        labels=labels_from_wire(spec.labels), keywords=tuple(spec.keywords),
        creation_time=(time_range_from_wire(spec.creation_time_range)
                       if spec.HasField("creation_time_range") else None),
        completion_time=(time_range_from_wire(spec.completion_time_range)
                         if spec.HasField("completion_time_range") else None),
        order_by=tuple((o.property.value, o.order == o.ORDER_BY_DESC) for o in page.order_by),
        offset=page.offset, limit=page.limit or None, max_limit=page.max_limit or None)
