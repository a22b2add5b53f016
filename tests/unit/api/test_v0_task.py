"""v0 TaskConfig <-> TaskSpec, and task runtime / info / events / queries out."""

from __future__ import annotations

import pytest

from peloton.api.convert import v0_task, v0_task_runtime
from peloton.api.convert.constraints import constraint_from_v0, constraint_to_v0
from peloton.api.gen.mesos.v1 import mesos_pb2
from peloton.api.gen.peloton.api.v0.task import task_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.events import PodEvent
from peloton.core.model.resources import Resources
from peloton.core.model.task import (
    CommandSpec,
    HealthCheckSpec,
    HealthCheckType,
    PortSpec,
    RestartPolicy,
    TaskInfo,
    TaskRuntime,
    TaskSpec,
    TerminationReason,
    UriSpec,
    VolumeSpec,
)
from peloton.core.states import HealthState, TaskState
from tests.unit.api.helpers import JOB_ID, v0_config

RICH = TaskSpec(
    name="web", resources=Resources(cpu=1.5, mem_mb=256, disk_mb=512, gpu=1), fd_limit=64,
    ports=(PortSpec("http", 0, "HTTP_PORT"), PortSpec("admin", 9001)),
    command=CommandSpec(value="/bin/web", shell=False, arguments=("-v", "--x=1"),
                        environment=(("A", "1"), ("B", "two")),
                        uris=(UriSpec("https://u.invalid/a"),
                              UriSpec("https://u.invalid/b.tgz", executable=True, extract=False,
                                      cache=True, output_file="etc/b")),
                        user="www"),
    container_image="registry.invalid/web:1", executor_data=b'{"task": 1}',
    constraint=OrConstraint((
        LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "a"), 1),
        AndConstraint((LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("app", "web"), 2),
                       LabelConstraint(LabelKind.HOST, Condition.GREATER_THAN, Label("ssd"), 0))))),
    health_check=HealthCheckSpec(type=HealthCheckType.HTTP, enabled=True, initial_interval_secs=3,
                                 interval_secs=4, timeout_secs=2, max_consecutive_failures=5,
                                 http_scheme="https", http_port=9001, http_path="/ok"),
    restart_policy=RestartPolicy(7), labels=(Label("app", "web"),), controller=True,
    kill_grace_period_secs=12, preemptible=False, kill_on_preempt=True, revocable=False,
    volume=VolumeSpec("state", 128))


def test_task_spec_round_trips_through_task_config() -> None:
    config = v0_task.task_config_to_v0(RICH)
    assert v0_task.task_spec_from_v0(config, sla_preemptible=True) == RICH
    command_check = TaskSpec(health_check=HealthCheckSpec(command="check.sh"), preemptible=True)
    assert v0_task.task_spec_from_v0(v0_task.task_config_to_v0(command_check)) == command_check


def test_written_config_is_a_valid_wire_message() -> None:
    config = v0_task.task_config_to_v0(RICH)
    assert config.IsInitialized()
    assert task_pb2.TaskConfig.FromString(config.SerializeToString()) == config
    assert config.container.type == mesos_pb2.ContainerInfo.DOCKER
    assert config.executor.type == mesos_pb2.ExecutorInfo.CUSTOM
    assert config.preemptionPolicy.type == task_pb2.PreemptionPolicy.TYPE_NON_PREEMPTIBLE


def test_zero_values_take_defaults_and_policy_follows_the_sla() -> None:
    config = task_pb2.TaskConfig()
    config.healthCheck.type = task_pb2.HealthCheckConfig.COMMAND
    spec = v0_task.task_spec_from_v0(config, sla_preemptible=False)
    default = HealthCheckSpec()
    assert spec.health_check is not None
    assert (spec.health_check.initial_interval_secs, spec.health_check.interval_secs,
            spec.health_check.timeout_secs, spec.health_check.max_consecutive_failures) == (
        default.initial_interval_secs, default.interval_secs, default.timeout_secs,
        default.max_consecutive_failures)
    assert spec.kill_grace_period_secs == TaskSpec().kill_grace_period_secs
    assert spec.preemptible is False
    config.preemptionPolicy.type = task_pb2.PreemptionPolicy.TYPE_PREEMPTIBLE
    assert v0_task.task_spec_from_v0(config, sla_preemptible=False).preemptible is True


def test_mesos_container_image_and_shell_default() -> None:
    config = task_pb2.TaskConfig()
    config.container.type = mesos_pb2.ContainerInfo.MESOS
    config.container.mesos.image.type = mesos_pb2.Image.DOCKER
    config.container.mesos.image.docker.name = "debian"
    config.command.value = "echo hi"
    spec = v0_task.task_spec_from_v0(config)
    assert spec.container_image == "debian"
    assert spec.command.shell is True  # Mesos' default when the field is unset
    secret = config.command.environment.variables.add(name="S", type=mesos_pb2.Environment.Variable.SECRET)
    assert secret.name == "S"
    assert v0_task.task_spec_from_v0(config).command.environment == ()


def test_service_fixture_task() -> None:
    cfg = v0_config("service_job.yaml")
    spec = v0_task.task_spec_from_v0(cfg.defaultConfig, sla_preemptible=cfg.sla.preemptible)
    assert spec.container_image == "registry.invalid/frontend:1.4"
    assert spec.ports == (PortSpec("http", 0, "HTTP_PORT"), PortSpec("admin", 9001, ""))
    assert spec.command == CommandSpec(value="/usr/bin/frontend", shell=False,
                                       arguments=("--port", "$HTTP_PORT"), user="www")
    assert spec.health_check == HealthCheckSpec(
        type=HealthCheckType.HTTP, enabled=True, initial_interval_secs=5, interval_secs=2,
        timeout_secs=1, max_consecutive_failures=4, http_scheme="http", http_port=9001,
        http_path="/health")
    assert spec.volume == VolumeSpec("state", 64) and spec.stateful
    assert spec.preemptible is False


@pytest.mark.parametrize(("edit", "field"), [
    (lambda c: setattr(c.executor, "type", mesos_pb2.ExecutorInfo.UNKNOWN), "defaultConfig.executor.type"),
    (lambda c: c.executor.MergeFrom(mesos_pb2.ExecutorInfo(type=mesos_pb2.ExecutorInfo.CUSTOM,
                                                          executor_id=mesos_pb2.ExecutorID(value="x"))),
     "defaultConfig.executor.data"),
    (lambda c: c.healthCheck.SetInParent(), "defaultConfig.healthCheck.type"),
    (lambda c: setattr(c.preemptionPolicy, "type", 7), "defaultConfig.preemptionPolicy.type"),
    (lambda c: c.constraint.SetInParent(), "defaultConfig.constraint.type"),
    (lambda c: setattr(c.constraint, "type", task_pb2.Constraint.OR_CONSTRAINT),
     "defaultConfig.constraint.orConstraint.constraints"),
])
def test_unreadable_config_is_refused_naming_the_field(edit: object, field: str) -> None:
    config = task_pb2.TaskConfig()
    edit(config)  # type: ignore[operator]
    with pytest.raises(InvalidArgument) as err:
        v0_task.task_spec_from_v0(config)
    assert err.value.field == field


def test_constraint_trees_round_trip() -> None:
    assert RICH.constraint is not None
    assert constraint_from_v0(constraint_to_v0(RICH.constraint)) == RICH.constraint


def test_task_states_map_both_ways_and_unknown_is_refused() -> None:
    for state in TaskState:
        wire = v0_task_runtime.task_state_to_v0(state)
        assert task_pb2.TaskState.Name(wire) == state.value
        assert v0_task_runtime.task_state_from_v0(wire) is state
    with pytest.raises(InvalidArgument):
        v0_task_runtime.task_state_from_v0(task_pb2.UNKNOWN)


def test_runtime_to_v0() -> None:
    runtime = TaskRuntime(state=TaskState.FAILED, goal_state=TaskState.RUNNING, run_id=3,
                          prev_run_id=2, desired_run_id=4, host="h1", agent_id="agent-7",
                          ports=(("http", 31000),), start_time=1_569_888_000.0,
                          completion_time=1_569_888_060.5, message="exit 2", reason="REASON_X",
                          exit_code=2, failure_count=1, config_version=5, desired_config_version=6,
                          healthy=HealthState.UNHEALTHY, desired_host="h2",
                          termination=TerminationReason.FAILED, revision=11)
    out = v0_task_runtime.task_runtime_to_v0(JOB_ID, 7, runtime)
    assert out.mesosTaskId.value == f"{JOB_ID}-7-3"
    assert out.prevMesosTaskId.value == f"{JOB_ID}-7-2"
    assert out.desiredMesosTaskId.value == f"{JOB_ID}-7-4"
    assert (out.startTime, out.completionTime) == ("2019-10-01T00:00:00Z", "2019-10-01T00:01:00.5Z")
    assert dict(out.ports) == {"http": 31000}
    assert out.agentID.value == "agent-7" and out.desiredHost == "h2"
    assert out.healthy == task_pb2.UNHEALTHY and out.failureCount == 1
    assert out.terminationStatus.reason == task_pb2.TerminationStatus.TERMINATION_STATUS_REASON_FAILED
    assert out.terminationStatus.exit_code == 2
    assert (out.configVersion, out.desiredConfigVersion, out.revision.version) == (5, 6, 11)
    fresh = v0_task_runtime.task_runtime_to_v0(JOB_ID, 0, TaskRuntime(prev_run_id=0))
    assert not fresh.HasField("prevMesosTaskId") and not fresh.HasField("terminationStatus")
    killed = v0_task_runtime.task_runtime_to_v0(JOB_ID, 0, TaskRuntime(exit_code=-9))
    assert killed.terminationStatus.signal == "9"


def test_task_info_and_pod_event() -> None:
    info = v0_task_runtime.task_info_to_v0(TaskInfo(JOB_ID, 2, RICH, TaskRuntime()))
    assert (info.jobId.value, info.instanceId, info.config.name) == (JOB_ID, 2, "web")
    event = PodEvent(job_id=JOB_ID, instance=2, run_id=5, state=TaskState.RUNNING,
                     goal_state=TaskState.SUCCEEDED, time=1_569_888_000.0, prev_run_id=4,
                     host="h", agent_id="a", config_version=1, desired_config_version=2,
                     healthy=HealthState.HEALTHY, message="m", reason="r")
    out = v0_task_runtime.pod_event_to_v0(event)
    assert out.taskId.value == f"{JOB_ID}-2-5" and out.prevTaskId.value == f"{JOB_ID}-2-4"
    assert out.desriedTaskId.value == f"{JOB_ID}-2-5"  # no desired run: the run itself
    assert (out.actualState, out.goalState, out.healthy) == ("RUNNING", "SUCCEEDED", "HEALTHY")
    assert out.timestamp == "2019-10-01T00:00:00Z"


def test_task_query() -> None:
    spec = task_pb2.QuerySpec(taskStates=[task_pb2.RUNNING], names=["web"], hosts=["h1"])
    spec.pagination.limit = 50
    query = v0_task_runtime.task_query_from_v0(spec)
    assert query.states == {TaskState.RUNNING}
    assert (query.names, query.hosts, query.limit, query.offset) == (("web",), ("h1",), 50, 0)


def test_default_executor_data_is_kept_opaque() -> None:
    """The Aurora bridge stashes the client's TaskConfig in a DEFAULT executor's data."""
    from peloton.api.convert.v0_task import executor_data_from_mesos

    executor = mesos_pb2.ExecutorInfo(type=mesos_pb2.ExecutorInfo.DEFAULT, data=b"aurora-config")
    assert executor_data_from_mesos(executor, "executor") == b"aurora-config"
