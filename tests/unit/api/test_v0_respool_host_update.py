"""Resource pools, hosts and v0 updates: core <-> v0 wire."""

from __future__ import annotations

import pytest

from peloton.api import yaml_load
from peloton.api.convert import v0_host, v0_respool, v0_update
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v0.update import update_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.host import HostInfo
from peloton.core.model.ids import ROOT_POOL_ID
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.respool import ReservationType
from peloton.core.model.update import UpdateInfo, UpdateSpec
from peloton.core.states import HostState, WorkflowState, WorkflowType
from tests.unit.api.helpers import JOB_ID, fixture_text


def _pool() -> respool_pb2.ResourcePoolConfig:
    return yaml_load.load_respool_config(fixture_text("respool.yaml")).message


def test_respool_fixture_to_core() -> None:
    cfg = v0_respool.respool_config_from_v0(_pool())
    assert cfg.name == "analytics" and cfg.parent_id == ROOT_POOL_ID
    memory = cfg.resource(ResourceKind.MEMORY)
    assert (memory.reservation, memory.limit, memory.share, memory.type) == (
        4096, 8192, 2, ReservationType.STATIC)
    # An unset reservation type is elastic; an unset share stays 0 as on the wire.
    disk = cfg.resource(ResourceKind.DISK)
    assert disk.type is ReservationType.ELASTIC and disk.share == 0
    assert (cfg.controller_limit_percent, cfg.slack_limit_percent) == (10, 25)


def test_respool_round_trip() -> None:
    msg = _pool()
    msg.parent.value = "pool-parent"
    core = v0_respool.respool_config_from_v0(msg)
    back = v0_respool.respool_config_to_v0(core)
    assert v0_respool.respool_config_from_v0(back) == core
    assert back.resources[2].type == respool_pb2.ELASTIC and back.policy == respool_pb2.PriorityFIFO
    no_limits = _pool()
    no_limits.ClearField("controllerLimit")
    no_limits.ClearField("slackLimit")
    core = v0_respool.respool_config_from_v0(no_limits)
    assert core.controller_limit_percent is None and core.slack_limit_percent is None
    out = v0_respool.respool_config_to_v0(core)
    assert not out.HasField("controllerLimit") and not out.HasField("slackLimit")


@pytest.mark.parametrize(("edit", "field"), [
    (lambda m: setattr(m.resources[0], "kind", "cpus"), "resources[0].kind"),
    (lambda m: setattr(m.resources[1], "kind", "cpu"), "resources[1].kind"),
    (lambda m: setattr(m.resources[2], "reservation", -1.0), "resources[2].reservation"),
    (lambda m: setattr(m.resources[0], "share", float("inf")), "resources[0].share"),
    (lambda m: setattr(m.resources[0], "type", 5), "resources[0].type"),
    (lambda m: setattr(m.controllerLimit, "maxPercent", 101.0), "controllerLimit.maxPercent"),
    (lambda m: setattr(m.slackLimit, "maxPercent", -1.0), "slackLimit.maxPercent"),
    (lambda m: setattr(m, "name", "a/b"), "name"),
    (lambda m: setattr(m, "policy", 4), "policy"),
])
def test_respool_wire_rules_name_the_field(edit: object, field: str) -> None:
    msg = _pool()
    edit(msg)  # type: ignore[operator]
    with pytest.raises(InvalidArgument) as err:
        v0_respool.respool_config_from_v0(msg)
    assert err.value.field == field


def test_respool_info_and_path() -> None:
    core = v0_respool.respool_config_from_v0(_pool())
    info = v0_respool.respool_info_to_v0("pool-1", core, path="/analytics", children=["c1"],
                                         allocation=Resources(cpu=2, mem_mb=100),
                                         slack=Resources(cpu=0.5))
    assert (info.id.value, info.path.value, info.parent.value) == ("pool-1", "/analytics", "root")
    assert [c.value for c in info.children] == ["c1"]
    usage = {u.kind: (u.allocation, u.slack) for u in info.usage}
    assert usage == {"cpu": (2, 0.5), "memory": (100, 0), "disk": (0, 0), "gpu": (0, 0)}
    assert not v0_respool.respool_info_to_v0("pool-1", core, path="/analytics").usage
    assert v0_respool.respool_path_from_v0(respool_pb2.ResourcePoolPath(value="/a/b")) == "/a/b"
    for bad in ("a/b", "/a/", "/a//b", ""):
        with pytest.raises(InvalidArgument):
            v0_respool.respool_path_from_v0(respool_pb2.ResourcePoolPath(value=bad))


def test_host_round_trip_and_states() -> None:
    host = HostInfo(hostname="h1", ip="10.0.0.1", state=HostState.DRAINING,
                    goal_state=HostState.DOWN, labels=(Label("zone", "a"),), current_pool="p1",
                    desired_pool="p2")
    wire = v0_host.host_info_to_v0(host)
    assert wire.state == host_pb2.HOST_STATE_DRAINING and wire.goal_state == host_pb2.HOST_STATE_DOWN
    assert v0_host.host_info_from_v0(wire) == host
    for state in HostState:
        assert v0_host.host_state_from_v0(v0_host.host_state_to_v0(state)) is state
    with pytest.raises(InvalidArgument) as err:
        v0_host.host_info_from_v0(host_pb2.HostInfo(hostname="h", state=host_pb2.HOST_STATE_UP))
    assert err.value.field == "goal_state"


def test_update_config_round_trip() -> None:
    msg = yaml_load.load_update_config(fixture_text("update.yaml")).message
    spec = v0_update.update_spec_from_v0(msg)
    assert spec == UpdateSpec(batch_size=2, rollback_on_failure=True, max_instance_attempts=3,
                              max_failure_instances=1, in_place=True)
    assert v0_update.update_spec_to_v0(spec) == msg
    with pytest.raises(InvalidArgument) as err:
        v0_update.update_spec_from_v0(update_pb2.UpdateConfig(batchPercentage=150))
    assert err.value.field == "updateConfig.batchPercentage"


def test_update_info_and_states() -> None:
    info = UpdateInfo(update_id="u1", job_id=JOB_ID, type=WorkflowType.UPDATE,
                      state=WorkflowState.ROLLING_FORWARD, spec=UpdateSpec(batch_size=2),
                      config_version=3, prev_config_version=2, instances_total=6,
                      instances_done=(0, 1), instances_failed=(2,), opaque_data="blob")
    out = v0_update.update_info_to_v0(info)
    assert (out.updateId.value, out.jobId.value, out.opaque_data.data) == ("u1", JOB_ID, "blob")
    assert (out.status.numTasksDone, out.status.numTasksFailed, out.status.numTasksRemaining) == (2, 1, 3)
    assert out.status.state == update_pb2.ROLLING_FORWARD
    assert (out.configVersion, out.prevConfigVersion, out.config.batchSize) == (3, 2, 2)
    for state in WorkflowState:
        assert v0_update.update_state_from_v0(v0_update.update_state_to_v0(state)) is state
    with pytest.raises(InvalidArgument):
        v0_update.update_state_from_v0(update_pb2.INVALID)
