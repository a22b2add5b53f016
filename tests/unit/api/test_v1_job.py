"""v1alpha stateless JobSpec <-> core, job status / summary / query, and workflows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from peloton.api.convert import v0_task, v0_v1, v1_job, v1_pod, v1_workflow
from peloton.api.convert.common import DOC_V1_JOB_SPEC, parse_entity_version
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.core.errors import InvalidArgument, Unimplemented
from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from peloton.core.model.job import JobRuntime, JobSummary, SlaSpec
from peloton.core.model.update import UpdateInfo, UpdateSpec, WorkflowEvent
from peloton.core.states import JobState, JobType, TaskState, WorkflowState, WorkflowType
from tests.unit.api.helpers import JOB_ID, v1_spec


def test_stateless_fixture_to_core() -> None:
    spec = v1_job.job_spec_from_v1(v1_spec())
    assert (spec.type, spec.name, spec.owner, spec.instance_count) == (
        JobType.SERVICE, "api-server", "bob", 3)
    assert spec.sla == SlaSpec(priority=5, preemptible=True, maximum_unavailable_instances=1)
    task = spec.default_task
    assert task.name == "api" and task.container_image == "registry.invalid/api:2.0"
    assert task.command.value == "/usr/bin/api" and task.command.arguments == ("--listen", "0.0.0.0")
    assert task.command.shell is False  # an entrypoint with arguments, no mesos_spec
    assert task.command.environment == (("LOG_LEVEL", "info"),)
    assert task.health_check is not None and task.health_check.command.startswith("curl")
    assert task.constraint == LabelConstraint(LabelKind.TASK, Condition.LESS_THAN,
                                              Label("app", "api"), 1)
    assert task.restart_policy.max_failures == 5 and task.preemptible
    assert spec.document_kind == DOC_V1_JOB_SPEC


def test_instance_specs_merge_as_v0_task_configs_as_peloton_ran_them() -> None:
    spec = v1_job.job_spec_from_v1(v1_spec())
    canary = spec.task_spec(2)
    assert canary.container_image.endswith("2.1-rc1") and canary.command.arguments[-1] == "--canary"
    # The canary's container became its own command (environment included, so none is left) ...
    assert canary.command.environment == ()
    # ... but it said nothing of a liveness check, so it keeps the default's health check.
    assert canary.health_check == spec.default_task.health_check is not None
    assert canary.labels == spec.default_task.labels
    assert spec.task_spec(1) == spec.default_task
    # GetPod shows the v0-merged config, as Peloton's (taskConfigV2Ops.GetTaskConfig holds the
    # merged config, converted by ConvertTaskConfigToPodSpec): the default's check included.
    pod = v1_job.pod_spec_for_instance(spec, JOB_ID, 2)
    assert pod.containers[0].liveness_check.command_check.command.startswith("curl")


def test_direct_pod_reading_agrees_with_the_v0_route() -> None:
    msg = v1_spec()
    for pod in (msg.default_spec, msg.instance_spec[2]):
        direct = v1_pod.pod_spec_from_v1(pod, preemptible=True, revocable=False)
        via_v0 = v0_task.task_spec_from_v0(v0_v1.pod_spec_to_v0(pod), sla_preemptible=True)
        assert direct == via_v0


def test_sla_revocable_overrides_the_pods() -> None:
    msg = v1_spec()
    msg.default_spec.revocable = True
    assert v1_job.job_spec_from_v1(msg).default_task.revocable is False
    msg.sla.revocable = True
    assert v1_job.job_spec_from_v1(msg).default_task.revocable is True
    msg.sla.preemptible = False
    with pytest.raises(InvalidArgument) as err:
        v1_job.job_spec_from_v1(msg)
    assert err.value.field == "sla.revocable"


@pytest.mark.parametrize(("edit", "field"), [
    (lambda m: setattr(m.default_spec.containers[0].resource, "cpu_limit", -1.0),
     "default_spec.containers[0].resource.cpu_limit"),
    (lambda m: setattr(m.instance_spec[2].containers[0].resource, "mem_limit_mb", -5.0),
     "instance_spec[2].containers[0].resource.mem_limit_mb"),
    (lambda m: setattr(m.default_spec.containers[0].ports[0], "env_name", ""),
     "default_spec.containers[0].ports[0].env_name"),
    (lambda m: setattr(m.default_spec.restart_policy, "max_failures", 500),
     "default_spec.restart_policy.max_failures"),
    (lambda m: setattr(m.default_spec.preemption_policy, "kill_on_preempt", True),
     "default_spec.preemption_policy.kill_on_preempt"),
    (lambda m: setattr(m.instance_spec[2], "controller", True), "instance_spec[2].controller"),
    (lambda m: setattr(m, "instance_count", 0), "instance_count"),
    (lambda m: setattr(m.default_spec.containers[0].liveness_check, "type", 0),
     "default_spec.containers[0].liveness_check.type"),
    (lambda m: m.default_spec.containers[0].entrypoint.Clear(),
     "default_spec.containers[0].entrypoint"),
])
def test_v1_validation_names_snake_case_fields(edit: object, field: str) -> None:
    msg = v1_spec()
    edit(msg)  # type: ignore[operator]
    with pytest.raises(InvalidArgument) as err:
        v1_job.job_spec_from_v1(msg)
    assert err.value.field == field


def test_more_than_one_container_is_unimplemented() -> None:
    msg = v1_spec()
    msg.default_spec.containers.add(name="sidecar")
    with pytest.raises(Unimplemented) as err:
        v1_job.job_spec_from_v1(msg)
    assert err.value.field == "default_spec.containers"


def test_get_returns_the_spec_as_peloton_stores_it_with_scheduler_fields() -> None:
    msg = v1_spec()
    spec = replace(v1_job.job_spec_from_v1(msg), version=4, respool_id="pool-9")
    out = v1_job.job_spec_to_v1(spec)
    assert (out.revision.version, out.respool_id.value) == (4, "pool-9")
    # Peloton's GetJob: ConvertJobConfigToJobSpec of the JobConfig ConvertJobSpecToJobConfig
    # stored (pkg/jobmgr/util/handler/api_converter.go).
    peloton = v0_v1.job_config_to_v1(v0_v1.job_spec_to_v0(msg))
    out.ClearField("revision")
    peloton.ClearField("revision")
    peloton.respool_id.value = "pool-9"
    assert out == peloton
    # Reading it back and sending it again gives the same job.
    again = v1_job.job_spec_from_v1(out)
    assert (again.default_task, again.instance_tasks) == (spec.default_task, spec.instance_tasks)


def test_pods_read_back_carry_command_and_entrypoint_as_peloton() -> None:
    """Peloton's ConvertTaskConfigToPodSpec sets container.Command from the stored CommandInfo
    and fills Entrypoint, Environment and mesos_spec from it (ConvertMesosCommandToPodSpec);
    likewise container + image, executor + mesos_spec.executor_spec."""
    msg = v1_spec()
    spec = v1_job.job_spec_from_v1(msg)
    for pod in (v1_job.job_spec_to_v1(spec).default_spec,
                v1_job.job_spec_to_v1(spec).instance_spec[2],
                v1_job.pod_spec_for_instance(spec, JOB_ID, 0),
                v1_job.pod_spec_for_instance(spec, JOB_ID, 2)):
        box = pod.containers[0]
        assert box.command.value == box.entrypoint.value == "/usr/bin/api"
        assert list(box.command.arguments) == list(box.entrypoint.arguments)
        assert box.entrypoint.arguments[:2] == ["--listen", "0.0.0.0"]
        assert box.HasField("container") and box.image.startswith("registry.invalid/api:")
        assert box.container.docker.image == box.image
    default = v1_job.pod_spec_for_instance(spec, JOB_ID, 0).containers[0]
    assert [(v.name, v.value) for v in default.command.environment.variables] == [
        ("LOG_LEVEL", "info")]
    assert [(e.name, e.value) for e in default.environment] == [("LOG_LEVEL", "info")]


def test_without_a_document_the_spec_is_built_and_reads_back_the_same() -> None:
    spec = v1_job.job_spec_from_v1(v1_spec())
    bare = replace(spec, document_kind="", document=b"")
    again = v1_job.job_spec_from_v1(v1_job.job_spec_to_v1(bare))
    assert replace(again, document_kind="", document=b"") == bare


def test_pod_spec_for_instance() -> None:
    spec = v1_job.job_spec_from_v1(v1_spec())
    pod = v1_job.pod_spec_for_instance(spec, JOB_ID, 2)
    assert pod.pod_name.value == f"{JOB_ID}-2"
    assert pod.containers[0].name == "api-canary" and pod.labels[0].value == "api"
    assert v1_job.pod_spec_for_instance(spec, JOB_ID, 0).containers[0].name == "api"


def test_job_status_entity_version_and_workflow() -> None:
    runtime = JobRuntime(state=JobState.RUNNING, goal_state=JobState.RUNNING,
                         creation_time=1_569_888_000.0, config_version=3, desired_state_version=2,
                         workflow_version=5, task_stats={TaskState.RUNNING: 2, TaskState.PENDING: 1})
    workflow = UpdateInfo(update_id="u", job_id=JOB_ID, type=WorkflowType.UPDATE,
                          state=WorkflowState.PAUSED, prev_state=WorkflowState.ROLLING_FORWARD,
                          spec=UpdateSpec(batch_size=1), config_version=3, prev_config_version=2,
                          instances_total=3, instances_done=(0,), instances_current=(1,),
                          creation_time=1_569_888_100.0)
    status = v1_job.job_status_to_v1(runtime, workflow)
    assert status.version.value == "3-2-5" and parse_entity_version(status.version.value) == (3, 2, 5)
    assert dict(status.pod_stats) == {"POD_STATE_RUNNING": 2, "POD_STATE_PENDING": 1}
    assert status.state == stateless_pb2.JOB_STATE_RUNNING
    assert status.creation_time == "2019-10-01T00:00:00Z"
    wf = status.workflow_status
    assert (wf.version.value, wf.prev_version.value) == ("3-2-5", "2-2-5")
    assert (wf.state, wf.prev_state) == (stateless_pb2.WORKFLOW_STATE_PAUSED,
                                         stateless_pb2.WORKFLOW_STATE_ROLLING_FORWARD)
    assert (wf.num_instances_completed, wf.num_instances_remaining) == (1, 2)
    assert list(wf.instances_current) == [1]
    assert not v1_job.job_status_to_v1(runtime).HasField("workflow_status")
    with pytest.raises(InvalidArgument):
        parse_entity_version("3-2")


def test_job_info_summary_and_states() -> None:
    spec = v1_job.job_spec_from_v1(v1_spec())
    info = v1_job.job_info_to_v1(JOB_ID, spec, JobRuntime())
    assert info.job_id.value == JOB_ID and info.spec.name == "api-server"
    summary = v1_job.job_summary_to_v1(JobSummary(
        job_id=JOB_ID, name="n", type=JobType.SERVICE, owner="o", owning_team="t", respool_id="p",
        instance_count=1, labels=(), runtime=JobRuntime(), sla=SlaSpec(priority=2)))
    assert (summary.job_id.value, summary.sla.priority, summary.respool_id.value) == (JOB_ID, 2, "p")
    for state in JobState:
        assert v1_job.job_state_from_v1(v1_job.job_state_to_v1(state)) is state
    assert v1_job.job_state_to_v1(JobState.UNKNOWN) == stateless_pb2.JOB_STATE_INVALID


def test_job_query() -> None:
    spec = stateless_pb2.QuerySpec(job_states=[stateless_pb2.JOB_STATE_KILLED], name="api",
                                   keywords=["gold"])
    spec.labels.add(key="tier", value="gold")
    spec.pagination.order_by.add(order=2).property.value = "creation_time"
    spec.completion_time_range.min.seconds = 10
    query = v1_job.job_query_from_v1(spec)
    assert query.states == {JobState.KILLED} and query.name == "api"
    assert query.labels == (Label("tier", "gold"),) and query.keywords == ("gold",)
    assert query.order_by == (("creation_time", True),)
    assert query.completion_time == (10.0, None)


def test_workflow_info_ranges_types_and_events() -> None:
    info = UpdateInfo(update_id="u", job_id=JOB_ID, type=WorkflowType.UPDATE,
                      state=WorkflowState.ROLLING_FORWARD, spec=UpdateSpec(batch_size=2, in_place=True),
                      instances_added=(5, 3, 4), instances_updated=(0, 2), opaque_data="x")
    events = [WorkflowEvent("u", None, WorkflowType.UPDATE, WorkflowState.ROLLING_FORWARD, 1.0),
              WorkflowEvent("u", 3, WorkflowType.UPDATE, WorkflowState.SUCCEEDED, 2.0)]
    out = v1_workflow.workflow_info_to_v1(info, JobRuntime(), events)
    ranges = [(getattr(r, "from"), r.to) for r in out.instances_added]
    assert ranges == [(3, 5)]  # `to` inclusive, as Peloton writes it
    assert [(getattr(r, "from"), r.to) for r in out.instances_updated] == [(0, 0), (2, 2)]
    assert out.update_spec.batch_size == 2 and out.update_spec.in_place
    assert out.opaque_data.data == "x" and len(out.events) == 1
    assert out.instance_events[0].instance_id == 3
    restart = v1_workflow.workflow_info_to_v1(replace(info, type=WorkflowType.RESTART), JobRuntime())
    assert restart.HasField("restart_spec") and not restart.HasField("update_spec")
    start = v1_workflow.workflow_status_to_v1(replace(info, type=WorkflowType.START), JobRuntime())
    assert start.type == 3  # unnamed in v1alpha, Peloton's private number
    assert v1_workflow.workflow_type_from_v1(start.type) is WorkflowType.START
    for state in WorkflowState:
        assert v1_workflow.workflow_state_from_v1(v1_workflow.workflow_state_to_v1(state)) is state


def test_update_create_and_restart_specs() -> None:
    spec = UpdateSpec(batch_size=3, rollback_on_failure=True, max_instance_attempts=2,
                      max_failure_instances=1, start_paused=True, in_place=True, start_tasks=True)
    assert v1_workflow.update_spec_from_v1(v1_workflow.update_spec_to_v1(spec)) == spec
    create = v1_workflow.create_spec_from_v1(stateless_pb2.CreateSpec(
        batch_size=4, max_instance_retries=2, max_tolerable_instance_failures=1, start_paused=True))
    assert create == UpdateSpec(batch_size=4, max_instance_attempts=2, max_failure_instances=1,
                                start_paused=True)
    restart = stateless_pb2.RestartSpec(batch_size=2, in_place=True)
    rng = restart.ranges.add(to=4)
    setattr(rng, "from", 1)
    assert v1_workflow.restart_spec_from_v1(restart) == (UpdateSpec(batch_size=2, in_place=True),
                                                         ((1, 4),))
    bad = pod_pb2.InstanceIDRange(to=1)
    setattr(bad, "from", 1)
    with pytest.raises(InvalidArgument):
        v1_workflow.ranges_from_v1([bad])


def test_an_instance_spec_changing_only_resources_keeps_the_default_command() -> None:
    msg = v1_spec()
    del msg.instance_spec[2]
    small = msg.instance_spec[1].containers.add(name="api-small")
    small.resource.cpu_limit, small.resource.mem_limit_mb = 0.25, 64
    spec = v1_job.job_spec_from_v1(msg)
    assert spec.task_spec(1).resources.cpu == 0.25
    assert spec.task_spec(1).command == spec.default_task.command
