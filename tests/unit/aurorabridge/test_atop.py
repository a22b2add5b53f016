"""Aurora -> Peloton: pod spec, command from Thermos, constraints, job and update specs, validation."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from aurorabridge import thrift_util, validation
from aurorabridge.atop import job_spec as js
from aurorabridge.atop.job_key import JobKey
from aurorabridge.atop.pod_spec import pod_spec
from aurorabridge.atop.states import pod_states
from aurorabridge.atop.thermos import bind_templates, task_command, thermos_command
from aurorabridge.config import AURORA_ENVIRONMENTS, ValidationSettings
from aurorabridge.thrift_api import api
from peloton.api.convert.constraints import constraint_from_v1, constraint_to_v1
from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2
from peloton.api.gen.peloton.api.v1alpha.pod.apachemesos import apachemesos_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Condition, Label, LabelConstraint, LabelKind
from tests.unit.aurorabridge import builders as b

LIMITS = ValidationSettings()
KEY = JobKey("www", "devel", "hello")


def runner_task(command: str) -> dict[str, Any]:
    """The task JSON a runner command carries (after `--json`, shell-quoted)."""
    doc: dict[str, Any] = json.loads(shlex.split(command.rsplit(" --json ", 1)[1])[0])
    return doc


def build(task: Any, count: int = 2) -> Any:
    checked = validation.check_task(task, count, LIMITS)
    return pod_spec(checked.task, checked.key, checked.resources)


def test_pod_spec_carries_resources_ports_labels_and_the_command() -> None:
    spec = build(
        b.task_config(
            cpus=1.5,
            ram=512,
            disk=1024,
            ports=("http", "admin-port"),
            gpus=1,
            metadata={"sha": "abc"},
            cmdlines=("./setup", "./serve --port {{thermos.ports[http]}}"),
        )
    )
    c = spec.containers[0]
    assert (
        c.resource.cpu_limit,
        c.resource.mem_limit_mb,
        c.resource.disk_limit_mb,
        c.resource.gpu_limit,
    ) == (1.5, 512, 1024, 1)
    assert [(p.name, p.type, p.env_name) for p in c.ports] == [
        ("admin-port", pod_pb2.PortSpec.PORT_TYPE_DYNAMIC_ENV_VAR, "PORT_ADMIN_PORT"),
        ("http", pod_pb2.PortSpec.PORT_TYPE_DYNAMIC_ENV_VAR, "PORT_HTTP"),
    ]
    assert c.entrypoint.value.startswith('p=/usr/bin/python3; [ -x "$p" ]')
    assert [(p["name"], p["cmdline"]) for p in runner_task(c.entrypoint.value)["processes"]] == [
        ("p0", "./setup"), ("p1", "./serve --port ${PORT_HTTP}")]
    assert spec.kill_grace_period_seconds == 30 + 2  # finalization_wait + the runner's margin
    assert spec.mesos_spec.shell and spec.mesos_spec.type == apachemesos_pb2.PodSpec.CONTAINER_TYPE_MESOS
    assert spec.mesos_spec.executor_spec.type == apachemesos_pb2.PodSpec.ExecutorSpec.EXECUTOR_TYPE_DEFAULT
    assert [(lab.key, lab.value) for lab in spec.labels] == [
        ("aurora_bridge_pod", "com.uber.peloton.internal.aurorabridge_pod"),
        ("aurora_job_key", "www/devel/hello"),
        ("org.apache.aurora.metadata.sha", "abc"),
        ("peloton/sla-policy", '{"production":false}'),  # default tier, no policy of its own
    ]
    stored = thrift_util.decode(api.TaskConfig, spec.mesos_spec.executor_spec.data)
    assert stored.job.name == "hello" and stored.executorConfig.name == "AuroraExecutor"


def test_equal_configs_give_identical_specs_whatever_the_set_order() -> None:
    one = b.task_config(ports=("a", "b"), metadata={"x": "1", "y": "2"})
    two = b.task_config(ports=("b", "a"), metadata={"y": "2", "x": "1"})
    two.resources.reverse()
    assert build(one).SerializeToString(deterministic=True) == build(two).SerializeToString(
        deterministic=True
    )


def test_docker_images_volumes_and_parameters() -> None:
    task = b.task_config(image="nginx:1.25", cmdlines=())
    task.container.docker.parameters = [api.DockerParameter(name="env", value="A=1")]
    spec = build(task)
    assert spec.containers[0].image == "nginx:1.25" and not spec.containers[0].entrypoint.value
    assert spec.mesos_spec.type == apachemesos_pb2.PodSpec.CONTAINER_TYPE_DOCKER
    assert [(p.key, p.value) for p in spec.mesos_spec.docker_parameters] == [("env", "A=1")]
    mesos = b.task_config()
    mesos.container = api.Container(
        mesos=api.MesosContainer(
            image=api.Image(docker=api.DockerImage(name="repo/app", tag="v2")),
            volumes=[api.Volume(containerPath="/data", hostPath="/srv/data", mode=api.Mode.RO)],
        )
    )
    spec = build(mesos)
    assert spec.containers[0].image == "repo/app:v2"
    assert [(v.name, v.host_path.path) for v in spec.volumes] == [("/srv/data", "/srv/data")]
    assert [(m.mount_path, m.read_only) for m in spec.containers[0].volume_mounts] == [("/data", True)]
    appc = b.task_config()
    appc.container = api.Container(mesos=api.MesosContainer(image=api.Image(appc=api.AppcImage(name="x"))))
    with pytest.raises(InvalidArgument, match="appc"):
        build(appc)


def test_constraints_limit_value_and_negated_value() -> None:
    constraints = [
        api.Constraint(name="host", constraint=api.TaskConstraint(limit=api.LimitConstraint(limit=2))),
        api.Constraint(
            name="zone",
            constraint=api.TaskConstraint(value=api.ValueConstraint(negated=False, values=["b", "a"])),
        ),
        api.Constraint(
            name="rack", constraint=api.TaskConstraint(value=api.ValueConstraint(negated=True, values=["r1"]))
        ),
    ]
    c = build(b.task_config(constraints=constraints)).constraint
    assert c.type == pod_pb2.Constraint.CONSTRAINT_TYPE_AND
    limit, rack, zone = c.and_constraint.constraints
    lc = pod_pb2.LabelConstraint
    assert (
        limit.label_constraint.kind,
        limit.label_constraint.condition,
        limit.label_constraint.requirement,
        limit.label_constraint.label.value,
    ) == (lc.LABEL_CONSTRAINT_KIND_POD, lc.LABEL_CONSTRAINT_CONDITION_LESS_THAN, 2, "www/devel/hello")
    assert (rack.label_constraint.condition, rack.label_constraint.requirement) == (
        lc.LABEL_CONSTRAINT_CONDITION_LESS_THAN,
        1,
    )
    assert [x.label_constraint.label.value for x in zone.or_constraint.constraints] == ["a", "b"]
    rack_limit = api.Constraint(
        name="rack", constraint=api.TaskConstraint(limit=api.LimitConstraint(limit=1))
    )
    per_rack = build(b.task_config(constraints=[rack_limit])).constraint.label_constraint
    assert (per_rack.kind, per_rack.condition, per_rack.requirement, per_rack.label.key,
            per_rack.label.value) == (lc.LABEL_CONSTRAINT_KIND_POD, lc.LABEL_CONSTRAINT_CONDITION_LESS_THAN,
                                      1, "peloton.limit-per/rack|aurora_job_key", "www/devel/hello")
    core = constraint_from_v1(build(b.task_config(constraints=[rack_limit])).constraint)
    assert core == LabelConstraint(LabelKind.DOMAIN, Condition.LESS_THAN,
                                   Label("aurora_job_key", "www/devel/hello"), 1, domain="rack")
    assert constraint_to_v1(core).label_constraint == per_rack  # written back the same way
    zero = api.Constraint(name="rack", constraint=api.TaskConstraint(limit=api.LimitConstraint(limit=0)))
    with pytest.raises(InvalidArgument, match="limit must be positive"):
        build(b.task_config(constraints=[zero]))


def test_thermos_order_finals_and_templates() -> None:
    data = b.thermos_data("run {{mesos.instance}}", "fetch", "cleanup", order=["p1", "p0"],
                          final=("p2",))
    task = runner_task(thermos_command(data))
    assert [(p["name"], p["cmdline"], p["final"]) for p in task["processes"]] == [
        ("p0", "run ${PELOTON_INSTANCE_ID}", False), ("p1", "fetch", False), ("p2", "cleanup", True)]
    assert task["constraints"] == [{"order": ["p1", "p0"]}] and task["finalization_wait"] == 30
    assert (
        bind_templates("x {{mesos.instance}} {{ thermos.ports[http] }} {{unknown}}")
        == "x ${PELOTON_INSTANCE_ID} ${PORT_HTTP} {{unknown}}"
    )
    cyclic = b.thermos_data("a", "b", order=["p0", "p1"])
    cyclic = cyclic.replace(
        '"constraints": [{"order": ["p0", "p1"]}]',
        '"constraints": [{"order": ["p0", "p1"]}, {"order": ["p1", "p0"]}]',
    )
    with pytest.raises(InvalidArgument, match="cycle"):
        thermos_command(cyclic)
    for bad in ("{not json", '{"task": {"processes": []}}', '{"task": {"processes": [{"name": "x"}]}}'):
        with pytest.raises(InvalidArgument, match=r"executorConfig\.data|Thermos"):
            thermos_command(bad)


def test_thermos_checks_name_the_field_and_finalization_wait_sets_the_kill_grace() -> None:
    mixed = b.thermos_data("run", "save", order=["p0", "p1"], final=("p1",))
    with pytest.raises(InvalidArgument, match="mixes final and regular") as err:
        thermos_command(mixed)
    assert err.value.field == "executorConfig.data.task.constraints[0].order"
    task = b.task_config(cmdlines=("serve",))
    task.executorConfig.data = task.executorConfig.data.replace('"finalization_wait": 30',
                                                                '"finalization_wait": 300')
    assert runner_task(task_command(task) or "")["finalization_wait"] == 60  # Aurora's cap
    assert build(task).kill_grace_period_seconds == 60 + 2
    plain = b.task_config(cmdlines=())
    plain.executorConfig = api.ExecutorConfig(name="command", data="sleep 60")
    assert build(plain).kill_grace_period_seconds == 0  # not Thermos: Peloton's default applies


def test_a_plain_command_or_an_image_also_runs_and_nothing_else_does() -> None:
    task = b.task_config(cmdlines=())
    task.executorConfig = api.ExecutorConfig(name="command", data="sleep 60")
    assert task_command(task) == "sleep 60"
    with pytest.raises(InvalidArgument, match="nothing to run"):
        task_command(b.task_config(cmdlines=()))
    assert task_command(b.task_config(cmdlines=(), image="busybox")) is None


def test_job_spec_sla_and_update_specs() -> None:
    task = b.task_config(tier="revocable")
    task.priority = 5
    spec = js.job_spec(task, KEY, 30, "pool-1", build(task))
    assert (spec.name, spec.owner, spec.owning_team, spec.instance_count, spec.respool_id.value) == (
        "www/devel/hello",
        "www",
        "www",
        30,
        "pool-1",
    )
    assert (
        spec.sla.priority,
        spec.sla.preemptible,
        spec.sla.revocable,
        spec.sla.maximum_unavailable_instances,
    ) == (5, True, True, 3)
    assert js.sla_spec(b.task_config(tier="preemptible"), 3).preemptible is False
    assert js.sla_spec(b.task_config(), 3).maximum_unavailable_instances == 1
    settings = b.settings(group=4, pulse_ms=1000, rollback=True)
    settings.maxPerInstanceFailures, settings.maxFailedInstances = 2, 3
    update = js.update_spec(settings, in_place=True)
    assert (
        update.batch_size,
        update.rollback_on_failure,
        update.max_instance_retries,
        update.max_tolerable_instance_failures,
        update.start_paused,
        update.in_place,
        update.start_pods,
    ) == (4, True, 3, 4, True, True, True)
    create = js.create_spec(settings)
    assert (create.batch_size, create.max_instance_retries, create.start_paused) == (4, 3, True)
    settings.updateStrategy = api.JobUpdateStrategy(
        varBatchStrategy=api.VariableBatchJobUpdateStrategy(groupSizes=[2, 5])
    )
    assert js.group_size(settings) == 2


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: setattr(t.job, "role", ""), "job key.role must be a non-empty string"),
        (lambda t: setattr(t.job, "name", "a/b"), "may only contain"),
        (lambda t: setattr(t.job, "name", "x" * 256), "longer than 255"),
        (
            lambda t: setattr(
                t, "resources", [api.Resource(numCpus=-1.0), api.Resource(ramMb=1), api.Resource(diskMb=1)]
            ),
            "numCpus must be greater than 0",
        ),
        (
            lambda t: setattr(t, "resources", [api.Resource(numCpus=1.0), api.Resource(diskMb=1)]),
            "include ram",
        ),
        (lambda t: t.resources.append(api.Resource(numCpus=2.0)), "more than once"),
        (lambda t: t.resources.append(api.Resource(numGpus=-1)), "numGpus must be >= 0"),
        (  # 1e308 cpus overflowed the fixed-point units: INTERNAL (issue 23 item 11)
            lambda t: setattr(
                t, "resources", [api.Resource(numCpus=1e308), api.Resource(ramMb=1), api.Resource(diskMb=1)]
            ),
            "numCpus must be at most",
        ),
        (lambda t: setattr(t, "tier", "gold"), "unknown tier"),
        (lambda t: setattr(t, "priority", -1), "priority"),
        (
            lambda t: setattr(
                t,
                "constraints",
                [
                    api.Constraint(
                        name="dedicated",
                        constraint=api.TaskConstraint(
                            value=api.ValueConstraint(negated=False, values=["other/x"])
                        ),
                    )
                ],
            ),
            "dedicated",
        ),
    ],
)
def test_validation_names_the_problem(mutate: Any, message: str) -> None:
    task = b.task_config()
    mutate(task)
    with pytest.raises(InvalidArgument, match=message):
        validation.check_task(task, 1, LIMITS)


def test_environment_rule_is_configurable_and_accepts_any_by_default() -> None:
    task = b.task_config()
    task.job.environment = "dc1"
    assert validation.check_task(task, 1, LIMITS).key.environment == "dc1"  # Peloton's bridge's rule
    aurora = ValidationSettings(allowed_environments=AURORA_ENVIRONMENTS)
    with pytest.raises(InvalidArgument, match="allowed pattern") as raised:
        validation.check_task(task, 1, aurora)
    assert raised.value.field == "environment"
    task.job.environment = "staging2"
    assert validation.check_task(task, 1, aurora).key.environment == "staging2"


def test_instance_counts_settings_and_ranges() -> None:
    for count in (0, -3, 4001):
        with pytest.raises(InvalidArgument, match="instanceCount"):
            validation.check_task(b.task_config(), count, LIMITS)
    for field, value in (
        ("updateGroupSize", 0),
        ("maxFailedInstances", -1),
        ("minWaitInInstanceRunningMs", -5),
        ("blockIfNoPulsesAfterMs", -1),
    ):
        settings = b.settings()
        setattr(settings, field, value)
        with pytest.raises(InvalidArgument, match=field):
            validation.check_update_settings(settings, 2)
    with pytest.raises(InvalidArgument, match="range"):
        validation.check_update_settings(b.settings(only=[(3, 1)]), 4)
    with pytest.raises(InvalidArgument, match="scheduleCronJob"):
        config = b.job_configuration()
        config.cronSchedule = "* * * * *"
        validation.check_job_configuration(config, LIMITS)


def test_status_filters_are_the_inverse_of_the_read_mapping() -> None:
    pending = pod_states([api.ScheduleStatus.PENDING])
    assert pending == sorted([pod_pb2.POD_STATE_PENDING, pod_pb2.POD_STATE_READY, pod_pb2.POD_STATE_PLACING])
    assert pod_states([api.ScheduleStatus.THROTTLED]) == []
    assert pod_pb2.POD_STATE_DELETED in pod_states([api.ScheduleStatus.KILLED])


def test_a_pod_read_back_from_peloton_compares_equal_to_the_one_sent() -> None:
    """Peloton answers pod specs through the v0 config it stored (command and entrypoint,
    container and image, ...); the update pinning must still see them as unchanged."""
    from aurorabridge.handlers.instance_specs import comparable
    from peloton.api.convert.v0_v1 import pod_spec_to_v0, task_config_to_v1

    sent = build(b.task_config(cmdlines=("./serve",)))
    read_back = task_config_to_v1(pod_spec_to_v0(sent), "job-0")
    assert read_back != sent and read_back.containers[0].HasField("command")
    assert comparable(read_back) == comparable(sent)
    changed = build(b.task_config(cmdlines=("./serve --other",)))
    assert comparable(changed) != comparable(sent)
