"""v0 JobConfig <-> core JobSpec: merging, validation that names fields, Get round trips."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from peloton.api.convert import v0_job
from peloton.api.convert.common import DOC_V0_JOB_CONFIG
from peloton.api.convert.validate import check_v0_update
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import AndConstraint, Label, LabelKind, leaves
from peloton.core.model.job import JobRuntime, JobSummary, PlacementStrategy, SlaSpec
from peloton.core.model.task import UriSpec
from peloton.core.states import JobState, JobType, TaskState
from tests.unit.api.helpers import JOB_ID, v0_config


def test_batch_fixture_to_core() -> None:
    spec = v0_job.job_spec_from_v0(v0_config("batch_job.yaml"))
    assert (spec.name, spec.type, spec.instance_count, spec.owner) == (
        "nightly-report", JobType.BATCH, 4, "alice")
    assert spec.labels == (Label("team", "reporting"), Label("shard-count", "4"))
    assert spec.sla == SlaSpec(priority=7, preemptible=True, max_running_time_secs=600)
    task = spec.default_task
    assert task.resources.cpu == 0.5 and task.fd_limit == 100
    assert task.command.environment == (("REPORT_DAY", "2019-10-01"),)
    assert task.command.uris == (UriSpec("https://example.invalid/report.tar.gz"),)
    assert task.restart_policy.max_failures == 3
    assert isinstance(task.constraint, AndConstraint)
    assert [leaf.kind for leaf in leaves(task.constraint)] == [LabelKind.HOST, LabelKind.TASK]
    assert spec.document_kind == DOC_V0_JOB_CONFIG and spec.document


def test_instance_configs_merge_top_level_fields_only() -> None:
    spec = v0_job.job_spec_from_v0(v0_config("batch_job.yaml"))
    assert sorted(spec.instance_tasks) == [0, 2]
    zero, two = spec.task_spec(0), spec.task_spec(2)
    # Instance 0 replaced command and name; the rest comes from the default.
    assert zero.command.value == "python3 -m report --coordinator"
    assert zero.command.environment == ()  # the whole command block was replaced
    assert zero.resources == spec.default_task.resources
    assert zero.controller and zero.kill_grace_period_secs == 30
    # Instance 2 replaced the resource block whole: its fdLimit is not inherited.
    assert two.resources.cpu == 2 and two.fd_limit == 0
    assert two.command == spec.default_task.command
    assert spec.task_spec(1) == spec.task_spec(3) == spec.default_task


def _with(text_edit: dict[str, object]) -> job_pb2.JobConfig:
    cfg = v0_config("batch_job.yaml")
    for path, value in text_edit.items():
        *parents, leaf = path.split(".")
        target: Any = cfg
        for part in parents:
            target = getattr(target, part) if not part.isdigit() else target[int(part)]
        setattr(target, leaf, value)
    return cfg


@pytest.mark.parametrize(("edit", "field"), [
    ({"defaultConfig.resource.cpuLimit": -1.0}, "defaultConfig.resource.cpuLimit"),
    ({"defaultConfig.resource.memLimitMb": float("nan")}, "defaultConfig.resource.memLimitMb"),
    ({"instanceCount": 0}, "instanceCount"),
    ({"instanceCount": 100_001}, "instanceCount"),
    ({"defaultConfig.restartPolicy.maxFailures": 101}, "defaultConfig.restartPolicy.maxFailures"),
    ({"defaultConfig.controller": True}, "defaultConfig.controller"),
    ({"defaultConfig.revocable": True, "sla.preemptible": False}, "defaultConfig.revocable"),
    ({"sla.revocable": True, "sla.preemptible": False}, "sla.revocable"),
    ({"sla.maximumRunningInstances": 5}, "sla.maximumRunningInstances"),
    ({"sla.maximumRunningInstances": 2, "sla.minimumRunningInstances": 3},
     "sla.minimumRunningInstances"),
    ({"type": 9}, "type"),
])
def test_validation_names_the_field(edit: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(_with(edit))
    assert err.value.field == field
    assert str(err.value).startswith(field)


def test_errors_in_an_instance_config_point_at_it() -> None:
    cfg = v0_config("batch_job.yaml")
    cfg.instanceConfig[2].resource.cpuLimit = -2
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == "instanceConfig[2].resource.cpuLimit"
    cfg = v0_config("batch_job.yaml")
    cfg.instanceConfig[3].controller = True
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == "instanceConfig[3].controller"


def test_instance_config_beyond_the_count_is_refused() -> None:
    cfg = v0_config("batch_job.yaml")
    cfg.instanceConfig[4].name = "ghost"
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == "instanceConfig[4]"


def test_command_and_ports_rules() -> None:
    cfg = v0_config("batch_job.yaml")
    cfg.defaultConfig.ClearField("command")
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == "defaultConfig.command"
    for port, field in (({"value": 80}, "defaultConfig.ports[0].name"),
                        ({"name": "http"}, "defaultConfig.ports[0].envName"),
                        ({"name": "http", "value": 70000}, "defaultConfig.ports[0].value")):
        cfg = v0_config("batch_job.yaml")
        cfg.defaultConfig.ports.add(**port)
        with pytest.raises(InvalidArgument) as err:
            v0_job.job_spec_from_v0(cfg)
        assert err.value.field == field
    cfg = v0_config("batch_job.yaml")
    cfg.defaultConfig.ports.add(name="a", value=80)
    cfg.defaultConfig.ports.add(name="a", value=81)
    with pytest.raises(InvalidArgument, match="duplicate"):
        v0_job.job_spec_from_v0(cfg)


def test_batch_health_check_and_service_kill_on_preempt_are_refused() -> None:
    cfg = v0_config("batch_job.yaml")
    cfg.defaultConfig.healthCheck.type = cfg.defaultConfig.healthCheck.COMMAND
    cfg.defaultConfig.healthCheck.commandCheck.command = "true"
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == "defaultConfig.healthCheck"
    svc = v0_config("service_job.yaml")
    svc.defaultConfig.preemptionPolicy.killOnPreempt = True
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(svc)
    assert err.value.field == "defaultConfig.preemptionPolicy.killOnPreempt"
    svc = v0_config("service_job.yaml")
    svc.sla.maxRunningTime = 60
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(svc)
    assert err.value.field == "sla.maxRunningTime"


def test_bad_constraint_names_the_node() -> None:
    cfg = v0_config("batch_job.yaml")
    cfg.defaultConfig.constraint.andConstraint.constraints[1].labelConstraint.kind = (
        task_pb2.LabelConstraint.UNKNOWN)
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == ("defaultConfig.constraint.andConstraint.constraints[1]"
                               ".labelConstraint.kind")


def test_a_default_every_instance_overrides_is_not_checked() -> None:
    # Peloton validates merged instance configs only (its testjob_with_health_check.yaml
    # has an empty health check command in a default no instance uses).
    cfg = v0_config("service_job.yaml")
    cfg.instanceCount = 1
    override = cfg.instanceConfig[0]
    override.healthCheck.CopyFrom(cfg.defaultConfig.healthCheck)
    override.healthCheck.httpCheck.port = 8080
    # A command health check without a command: invalid, but only in the default.
    cfg.defaultConfig.healthCheck.type = task_pb2.HealthCheckConfig.COMMAND
    cfg.defaultConfig.healthCheck.commandCheck.command = ""
    health = v0_job.job_spec_from_v0(cfg).task_spec(0).health_check
    assert health is not None and health.http_port == 8080
    cfg.instanceCount = 2  # now instance 1 uses the default, which is checked
    with pytest.raises(InvalidArgument) as err:
        v0_job.job_spec_from_v0(cfg)
    assert err.value.field == "defaultConfig.healthCheck.commandCheck.command"


def test_get_returns_the_document_with_scheduler_fields() -> None:
    cfg = v0_config("batch_job.yaml")
    spec = replace(v0_job.job_spec_from_v0(cfg), version=3, created_at=1_570_000_000.5,
                   respool_id="pool-1")
    out = v0_job.job_config_to_v0(spec)
    assert out.changeLog.version == 3
    assert out.changeLog.createdAt == 1_570_000_000_500_000_000
    assert out.respoolID.value == "pool-1"
    out.ClearField("changeLog")
    out.ClearField("respoolID")
    assert out == cfg


def test_without_a_document_the_config_is_built_and_reads_back_the_same() -> None:
    spec = v0_job.job_spec_from_v0(v0_config("batch_job.yaml"))
    bare = replace(spec, document_kind="", document=b"")
    rebuilt = v0_job.job_spec_from_v0(v0_job.job_config_to_v0(bare))
    assert replace(rebuilt, document_kind="", document=b"") == bare


def test_task_config_for_instance_is_the_merged_document() -> None:
    spec = v0_job.job_spec_from_v0(v0_config("batch_job.yaml"))
    zero = v0_job.task_config_for_instance(spec, 0)
    assert zero.name == "shard-zero" and zero.resource.cpuLimit == 0.5
    assert v0_job.task_config_for_instance(spec, 1).command.environment.variables[0].name == "REPORT_DAY"
    # The cached document is not changed by callers editing the result.
    zero.name = "changed"
    assert v0_job.task_config_for_instance(spec, 0).name == "shard-zero"


def test_runtime_info_times_and_counts() -> None:
    runtime = JobRuntime(state=JobState.RUNNING, goal_state=JobState.SUCCEEDED,
                         creation_time=1_569_888_000.0, start_time=1_569_888_001.25,
                         task_stats={TaskState.RUNNING: 3, TaskState.PENDING: 1},
                         config_version=2, desired_state_version=4, workflow_version=1,
                         update_id="upd-1", revision=9)
    out = v0_job.job_runtime_to_v0(runtime)
    assert out.creationTime == "2019-10-01T00:00:00Z"
    assert out.startTime == "2019-10-01T00:00:01.25Z"
    assert out.completionTime == ""
    assert dict(out.taskStats) == {"RUNNING": 3, "PENDING": 1}
    assert (out.configurationVersion, out.desiredStateVersion, out.workflowVersion) == (2, 4, 1)
    assert out.updateID.value == "upd-1" and out.revision.version == 9
    assert out.state == job_pb2.RUNNING and out.goalState == job_pb2.SUCCEEDED


def test_job_info_and_summary() -> None:
    spec = v0_job.job_spec_from_v0(v0_config("batch_job.yaml"))
    info = v0_job.job_info_to_v0(JOB_ID, spec, JobRuntime())
    assert info.id.value == JOB_ID and info.config.name == "nightly-report"
    summary = v0_job.job_summary_to_v0(JobSummary(
        job_id=JOB_ID, name="n", type=JobType.SERVICE, owner="o", owning_team="t",
        respool_id="p", instance_count=2, labels=(Label("a", "b"),), runtime=JobRuntime(),
        sla=SlaSpec(priority=3)))
    assert (summary.type, summary.sla.priority, summary.labels[0].key) == (job_pb2.SERVICE, 3, "a")


def test_states_and_types_map_both_ways() -> None:
    for state in JobState:
        assert v0_job.job_state_from_v0(v0_job.job_state_to_v0(state)) is state
    for kind in JobType:
        assert v0_job.job_type_from_v0(v0_job.job_type_to_v0(kind)) is kind


def test_query_spec() -> None:
    spec = job_pb2.QuerySpec(jobStates=[job_pb2.RUNNING, job_pb2.FAILED], owner="alice",
                             keywords=["nightly"],
                             pagination=query_pb2.PaginationSpec(offset=5, limit=20, orderBy=[
                                 query_pb2.OrderBy(order=query_pb2.OrderBy.ASC,
                                                   property=query_pb2.PropertyPath(value="name"))]))
    spec.respool.value = "/analytics"
    spec.creationTimeRange.max.seconds = 100
    query = v0_job.job_query_from_v0(spec, respool_id="pool-1")
    assert query.states == {JobState.RUNNING, JobState.FAILED}
    assert (query.owner, query.name, query.respool_id, query.respool_path) == (
        "alice", None, "pool-1", "/analytics")
    assert query.creation_time == (None, 100.0) and query.completion_time is None
    assert query.order_by == (("name", False),)
    assert (query.offset, query.limit, query.max_limit) == (5, 20, None)


def test_v0_update_may_only_add_instances() -> None:
    old = v0_job.job_spec_from_v0(v0_config("batch_job.yaml"))
    grown = v0_config("batch_job.yaml")
    grown.instanceCount = 6
    grown.instanceConfig[5].name = "shard-five"
    grown.instanceConfig[5].command.value = "echo five"
    check_v0_update(old, v0_job.job_spec_from_v0(grown))
    edits: list[tuple[Callable[[job_pb2.JobConfig], None], str]] = [
        (lambda c: setattr(c, "instanceCount", 3), "instanceCount"),
        (lambda c: setattr(c, "name", "renamed"), "name"),
        (lambda c: setattr(c.defaultConfig.resource, "cpuLimit", 1.0), "defaultConfig"),
        (lambda c: setattr(c.instanceConfig[2], "name", "other"), "instanceConfig[2]")]
    for edit, field in edits:
        cfg = v0_config("batch_job.yaml")
        edit(cfg)
        with pytest.raises(InvalidArgument) as err:
            check_v0_update(old, v0_job.job_spec_from_v0(cfg))
        assert err.value.field == field


@pytest.mark.parametrize(("wire", "core"), [
    (job_pb2.PLACEMENT_STRATEGY_INVALID, PlacementStrategy.UNSET),
    (job_pb2.PLACEMENT_STRATEGY_PACK_HOST, PlacementStrategy.PACK_HOST),
    (job_pb2.PLACEMENT_STRATEGY_SPREAD_JOB, PlacementStrategy.SPREAD_JOB),
    (9, PlacementStrategy.UNSET),   # Peloton only tests for SPREAD_JOB
])
def test_placement_strategy_is_read_and_written_back(wire: int, core: PlacementStrategy) -> None:
    config = v0_config("batch_job.yaml")
    config.placementStrategy = wire  # type: ignore[assignment]
    spec = v0_job.job_spec_from_v0(config)
    assert spec.placement_strategy is core
    assert v0_job.job_config_to_v0(spec).placementStrategy == wire
    bare = replace(spec, document_kind="", document=b"")
    assert v0_job.job_spec_from_v0(v0_job.job_config_to_v0(bare)).placement_strategy is core
