"""The YAML loader reads Peloton's job, stateless, pool and update files as Go's CLI did."""

from __future__ import annotations

import pytest

from peloton.api import yaml_load
from peloton.api.gen.mesos.v1 import mesos_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import InvalidArgument
from tests.unit.api.helpers import fixture_text


def test_batch_fixture_keys_are_matched_case_and_underscore_insensitively() -> None:
    loaded = yaml_load.load_job_config(fixture_text("batch_job.yaml"))
    cfg = loaded.message
    assert cfg.name == "nightly-report" and cfg.owningTeam == "reporting"
    assert list(cfg.ldapGroups) == ["reporting", "infra"]
    assert cfg.instanceCount == 4
    assert cfg.sla.priority == 7 and cfg.sla.maxRunningTime == 600
    assert cfg.defaultConfig.resource.memLimitMb == 256
    assert cfg.defaultConfig.restartPolicy.maxFailures == 3
    # A number given for a string field is taken as written.
    assert cfg.labels[1].value == "4"


def test_enums_by_name_or_number_and_int_map_keys() -> None:
    cfg = yaml_load.load_job_config(fixture_text("batch_job.yaml")).message
    constraint = cfg.defaultConfig.constraint
    assert constraint.type == task_pb2.Constraint.AND_CONSTRAINT
    host, task = constraint.andConstraint.constraints
    assert host.type == task.type == task_pb2.Constraint.LABEL_CONSTRAINT
    assert host.labelConstraint.kind == task_pb2.LabelConstraint.HOST
    assert task.labelConstraint.condition == task_pb2.LabelConstraint.CONDITION_LESS_THAN
    assert sorted(cfg.instanceConfig) == [0, 2]
    assert cfg.instanceConfig[0].controller is True
    assert cfg.instanceConfig[0].killGracePeriodSeconds == 30


def test_null_values_are_skipped() -> None:
    cfg = yaml_load.load_job_config(fixture_text("batch_job.yaml")).message
    assert not cfg.HasField("changeLog")
    assert not cfg.defaultConfig.HasField("healthCheck")
    assert not cfg.defaultConfig.HasField("container")


def test_unknown_keys_are_warnings_naming_their_path() -> None:
    loaded = yaml_load.load_job_config(fixture_text("batch_job.yaml"))
    assert loaded.warnings == ("sla.minimuminstancepercent: unknown field, ignored",)
    nested = yaml_load.load_job_config("name: x\ndefaultconfig:\n  resource:\n    cpulimt: 1\n"
                                       "instanceconfig:\n  3:\n    nmae: y\n")
    assert nested.warnings == (
        "defaultconfig.resource.cpulimt: unknown field, ignored (did you mean cpuLimit?)",
        "instanceconfig[3].nmae: unknown field, ignored (did you mean name?)")


def test_unknown_fields_carry_line_and_closest_field_and_syntax_errors_name_the_file() -> None:
    text = "name: x\ndefaultconfig:\n  resource:\n    cpulimt: 1\nsla:\n  minimuminstancecount: 2\n"
    loaded = yaml_load.load_job_config(text, "job.yaml")
    first, legacy = loaded.unknown
    assert first.describe("job.yaml") == (
        "job.yaml:4: defaultconfig.resource.cpulimt: unknown field (did you mean cpuLimit?)")
    assert not first.legacy and legacy.legacy and legacy.line == 6
    with pytest.raises(InvalidArgument) as err:
        yaml_load.load_job_config("name: x\n  bad: [\n", "job.yaml")
    assert err.value.message.startswith("job.yaml:2:")
    assert "<unicode string>" not in err.value.message


def test_proto2_mesos_fields_and_enum_names() -> None:
    cfg = yaml_load.load_job_config(fixture_text("service_job.yaml")).message
    container = cfg.defaultConfig.container
    assert container.type == mesos_pb2.ContainerInfo.DOCKER
    assert container.volumes[0].mode == mesos_pb2.Volume.RO
    assert cfg.defaultConfig.command.shell is False
    assert list(cfg.defaultConfig.command.arguments) == ["--port", "$HTTP_PORT"]
    assert cfg.type == job_pb2.SERVICE


@pytest.mark.parametrize(("text", "field"), [
    ("instancecount: ten\n", "instancecount"),
    ("instancecount: -1\n", "instancecount"),
    ("instancecount: 1.5\n", "instancecount"),
    ("ldapgroups: web\n", "ldapgroups"),
    ("sla:\n  preemptible: maybe\n", "sla.preemptible"),
    ("sla: 3\n", "sla"),
    ("type: PETS\n", "type"),
    ("type: 7\n", "type"),
    ("defaultconfig:\n  resource:\n    cpulimit: [1]\n", "defaultconfig.resource.cpulimit"),
    ("instanceconfig:\n  zero:\n    name: a\n", "instanceconfig[zero]"),
    ("instanceconfig:\n  0:\n    ports: [{name: a, value: x}]\n", "instanceconfig[0].ports[0].value"),
])
def test_wrong_types_name_the_path(text: str, field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        yaml_load.load_job_config(text)
    assert err.value.field == field
    assert field in str(err.value)


def test_missing_required_mesos_field_is_reported_before_serialization() -> None:
    with pytest.raises(InvalidArgument) as err:
        yaml_load.load_job_config("defaultconfig:\n  container:\n    docker:\n      image: x\n")
    assert "defaultConfig.container.type" in str(err.value)


@pytest.mark.parametrize("text", ["name: [unclosed\n", "", "- a\n- b\n"])
def test_bad_documents_are_invalid_arguments(text: str) -> None:
    with pytest.raises(InvalidArgument):
        yaml_load.load_job_config(text)


def test_respool_fixture() -> None:
    loaded = yaml_load.load_respool_config(fixture_text("respool.yaml"))
    cfg = loaded.message
    assert loaded.warnings == ()
    assert [r.kind for r in cfg.resources] == ["cpu", "memory", "disk", "gpu"]
    assert cfg.resources[1].type == respool_pb2.STATIC
    assert cfg.controllerLimit.maxPercent == 10 and cfg.slackLimit.maxPercent == 25
    assert cfg.policy == respool_pb2.PriorityFIFO


def test_stateless_and_update_fixtures() -> None:
    spec = yaml_load.load_stateless_job_spec(fixture_text("stateless_spec.yaml"))
    assert spec.warnings == ()
    assert spec.message.default_spec.containers[0].liveness_check.command_check.command
    assert sorted(spec.message.instance_spec) == [2]
    update = yaml_load.load_update_config(fixture_text("update.yaml")).message
    assert (update.batchSize, update.rollbackOnFailure, update.inPlace) == (2, True, True)
    v1 = yaml_load.load_update_spec("batch_size: 3\nmax_instance_retries: 2\nstart_pods: true\n")
    assert (v1.message.batch_size, v1.message.max_instance_retries, v1.message.start_pods) == (3, 2, True)


def test_timestamps_in_query_specs() -> None:
    loaded = yaml_load.load_yaml("creationtimerange:\n  min: '2019-10-01T00:00:00Z'\n", job_pb2.QuerySpec)
    assert loaded.message.creationTimeRange.min.seconds == 1569888000
