"""The Mesos backend's pure parts: JSON converters, cutting launches out of offers, the host table."""

from __future__ import annotations

import base64
import uuid

import pytest

from peloton.core.model.constraints import Label
from peloton.core.model.resources import PortRange, Resources
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import CommandSpec, HealthCheckSpec, PortSpec, TaskSpec
from peloton.core.states import HealthState, TaskState
from peloton.hostmgr.backends.mesos_driver import master_address
from peloton.hostmgr.backends.mesos_hosts import HostTable
from peloton.hostmgr.backends.mesos_offers import HeldOffer, OfferBook, Picker
from peloton.hostmgr.backends.mesos_wire import (
    Json,
    host_from_agent_json,
    status_from_json,
    task_info_to_json,
    uuid_from_json,
    uuid_to_json,
)
from tests.harness.fake_mesos_agent import ranges, scalar

JOB = "6d1b7c0e-0000-4000-8000-000000000001"
RUN = f"{JOB}-4-2"


def status(state: str, message: str = "", **extra: object) -> Json:
    return {"task_id": {"value": RUN}, "agent_id": {"value": "a1"}, "state": state,
            "message": message, "timestamp": 12.5, **extra}


@pytest.mark.parametrize(("state", "message", "ours", "code", "said"), [
    ("TASK_STARTING", "", TaskState.STARTING, None, ""),
    ("TASK_STAGING", "Reconciliation: Latest task state", TaskState.STARTING, None,
     "Reconciliation: Latest task state"),
    ("TASK_RUNNING", "", TaskState.RUNNING, None, ""),
    ("TASK_KILLING", "", TaskState.RUNNING, None, ""),
    ("TASK_FINISHED", "Command exited with status 0", TaskState.SUCCEEDED, 0, "exited with code 0"),
    ("TASK_FINISHED", "", TaskState.SUCCEEDED, 0, "exited with code 0"),
    ("TASK_FAILED", "Command exited with status 3", TaskState.FAILED, 3, "exited with code 3"),
    ("TASK_FAILED", "Memory limit exceeded", TaskState.FAILED, None, "Memory limit exceeded"),
    ("TASK_KILLED", "Command terminated with signal Terminated", TaskState.KILLED, None,
     "Command terminated with signal Terminated"),
    ("TASK_ERROR", "Task uses more resources than available", TaskState.FAILED, None,
     "Task uses more resources than available"),
    ("TASK_LOST", "", TaskState.LOST, None, ""),
    ("TASK_DROPPED", "", TaskState.LOST, None, ""),
    ("TASK_GONE", "", TaskState.LOST, None, ""),
    ("TASK_UNREACHABLE", "", TaskState.LOST, None, ""),
    ("TASK_UNKNOWN", "", TaskState.LOST, None, ""),
    ("TASK_FROM_THE_FUTURE", "", TaskState.LOST, None, ""),
])
def test_task_states_exit_codes_and_messages(state: str, message: str, ours: TaskState,
                                             code: int | None, said: str) -> None:
    update = status_from_json(status(state, message, reason="REASON_X"), "h1", "u-1")
    assert (update.state, update.exit_code, update.message) == (ours, code, said)
    assert (update.run_id, update.agent_id, update.hostname) == (RUN, "a1", "h1")
    assert (update.uuid, update.reason, update.timestamp) == ("u-1", "REASON_X", 12.5)


def test_health_and_uuids() -> None:
    assert status_from_json(status("TASK_RUNNING", healthy=False), "h", "u").healthy is \
        HealthState.UNHEALTHY
    assert status_from_json(status("TASK_RUNNING"), "h", "u", health_checked=True).healthy is \
        HealthState.HEALTH_UNKNOWN
    assert status_from_json(status("TASK_RUNNING"), "h", "u").healthy is None
    raw = uuid.uuid4()
    wire = base64.b64encode(raw.bytes).decode()
    assert uuid_from_json(wire) == str(raw)
    assert uuid_to_json(uuid_from_json(wire)) == wire


def test_task_info_carries_command_environment_ports_and_kill_policy() -> None:
    spec = TaskSpec(name="web", resources=Resources(cpu=0.5, mem_mb=64),
                    command=CommandSpec(value="/bin/server", shell=False,
                                        arguments=("server", "--port"),
                                        environment=(("PORT", "1"), ("MODE", "x"))),
                    ports=(PortSpec("http", 0, "HTTP_PORT"), PortSpec("admin", 9000)),
                    health_check=HealthCheckSpec(command="true"), kill_grace_period_secs=2.5,
                    labels=(Label("team", "a"),))
    info = task_info_to_json(LaunchSpec(RUN, spec, (("http", 31005),)), "a1", [])
    assert info["task_id"] == {"value": RUN} and info["agent_id"] == {"value": "a1"}
    assert info["command"]["shell"] is False and info["command"]["value"] == "/bin/server"
    assert info["command"]["arguments"] == ["server", "--port"]
    env = {v["name"]: v["value"] for v in info["command"]["environment"]["variables"]}
    assert env["PELOTON_JOB_ID"] == JOB and env["PELOTON_INSTANCE_ID"] == "4"
    assert env["PELOTON_TASK_ID"] == RUN
    assert (env["PORT0"], env["PORT_HTTP"], env["HTTP_PORT"]) == ("31005", "31005", "31005")
    assert (env["PORT1"], env["PORT_ADMIN"]) == ("9000", "9000")
    assert env["PORT"] == "1" and env["MODE"] == "x"  # the spec's own variables win
    assert info["kill_policy"] == {"grace_period": {"nanoseconds": 2_500_000_000}}
    assert info["health_check"]["type"] == "COMMAND"
    assert info["health_check"]["command"] == {"shell": True, "value": "true"}
    assert info["labels"] == {"labels": [{"key": "team", "value": "a"}]}


def test_a_host_is_what_our_role_may_use_of_an_agent() -> None:
    volume = {**scalar("disk", 500, role="peloton"), "disk": {"persistence": {"id": "v"}}}
    agent = {"agent_info": {"hostname": "h1", "id": {"value": "a1"}, "port": 5051, "attributes": [
        {"name": "rack", "type": "TEXT", "text": {"value": "r1"}},
        {"name": "cores", "type": "SCALAR", "scalar": {"value": 8.0}},
        {"name": "zone", "type": "SET", "set": {"item": ["a", "b"]}},
        {"name": "ids", "type": "RANGES", "ranges": {"range": [{"begin": 1, "end": 3}]}}]},
        "active": True, "pid": "slave(1)@10.0.0.5:5051", "total_resources": [
            scalar("cpus", 4), scalar("cpus", 2, role="peloton"), scalar("cpus", 8, role="other"),
            scalar("cpus", 3, revocable=True), scalar("mem", 1024), scalar("disk", 100), volume,
            scalar("gpus", 1), ranges("ports", ((31000, 31009), (30000, 30001)))]}
    host = host_from_agent_json(agent, "peloton")
    assert host.capacity == Resources(cpu=6, mem_mb=1024, disk_mb=100, gpu=1)
    assert host.revocable_cpu == 3
    assert host.ports == (PortRange(30000, 30001), PortRange(31000, 31009))
    assert host.labels == (Label("rack", "r1"), Label("cores", "8"), Label("zone", "a"),
                           Label("zone", "b"), Label("ids", "[1-3]"))
    assert (host.hostname, host.agent_id, host.address) == ("h1", "a1", "10.0.0.5:5051")


def offer(oid: str, *resources: Json) -> HeldOffer:
    return HeldOffer(oid, "a1", "h1", tuple({**r, "allocation_info": {"role": "peloton"}}
                                            for r in resources), 0.0)


def launch(cpu: float, mem: float = 0.0, ports: tuple[int, ...] = (),
           revocable: bool = False) -> LaunchSpec:
    spec = TaskSpec(resources=Resources(cpu=cpu, mem_mb=mem), revocable=revocable)
    return LaunchSpec(RUN, spec, tuple((f"p{i}", p) for i, p in enumerate(ports)))


def test_launch_resources_are_cut_from_offers_as_offered() -> None:
    picker = Picker([offer("o1", scalar("cpus", 1), scalar("mem", 100),
                           ranges("ports", ((31000, 31002),))),
                     offer("o2", scalar("cpus", 2, role="peloton"), scalar("cpus", 5, role="other"),
                           scalar("cpus", 1, revocable=True))], "peloton")
    got = picker.take(launch(2.5, 60, ports=(31001,)))
    assert got is not None
    cpus = [(r["role"], r["scalar"]["value"]) for r in got if r["name"] == "cpus"]
    assert cpus == [("*", 1.0), ("peloton", 1.5)]
    assert all(r["allocation_info"] == {"role": "peloton"} for r in got)
    assert [r["ranges"] for r in got if r["name"] == "ports"] == [
        {"range": [{"begin": 31001, "end": 31001}]}]
    assert picker.take(launch(1.0)) is None           # 0.5 regular cpus left ("other" is not ours)
    assert picker.take(launch(0.1, ports=(31001,))) is None    # that port is taken
    assert picker.take(launch(1.0, revocable=True)) is not None  # revocable cpus for revocable runs
    assert picker.take(launch(0.5, 40)) is not None   # a refused run took nothing


def test_offer_book_holds_by_agent_and_expires() -> None:
    book = OfferBook()
    book.add({"id": {"value": "o1"}, "agent_id": {"value": "a1"}, "hostname": "h1"}, now=0.0)
    book.add({"id": {"value": "o2"}, "agent_id": {"value": "a2"}, "hostname": "h2"}, now=5.0)
    assert [o.offer_id for o in book.of("a1")] == ["o1"]
    assert [o.offer_id for o in book.expired(now=10.0, hold_secs=8.0)] == ["o1"]
    assert book.remove("o2") is not None and len(book) == 0


def agents(*entries: tuple[str, str, bool, float]) -> Json:
    return {"get_agents": {"agents": [
        {"agent_info": {"hostname": h, "id": {"value": a}}, "active": up,
         "total_resources": [scalar("cpus", cpus)]} for h, a, up, cpus in entries]}}


def test_host_table_follows_the_agent_list() -> None:
    table = HostTable("peloton")
    changes = table.apply(agents(("h1", "a1", True, 4), ("h2", "a2", True, 4)))
    assert [h.hostname for h in changes.up] == ["h1", "h2"] and changes.gone == ()
    assert table.apply(agents(("h1", "a1", True, 4), ("h2", "a2", True, 4))).up == ()
    changes = table.apply(agents(("h1", "a1", True, 8), ("h2", "a2", False, 4)))
    assert [h.capacity.cpu for h in changes.up] == [8] and changes.gone == ("h2",)
    recovering = {"get_agents": {"agents": [], "recovered_agents": [
        {"hostname": "h1", "id": {"value": "a1"}}]}}
    assert table.apply(recovering) == type(changes)()  # a recovering agent keeps its state
    assert table.apply(agents(("h1", "a9", True, 8))).up[0].agent_id == "a9"  # re-registered
    assert table.name_of("a2") == "h2"  # remembered, for its late updates
    assert table.lose("a1") == "" and table.lose("a9") == "h1" and table.get("h1") is None


@pytest.mark.parametrize(("url", "address"), [
    ("http://10.0.0.1:5050", "10.0.0.1:5050"), ("10.0.0.1:5051", "10.0.0.1:5051"),
    ("http://master/", "master:5050"), ("zk://zk1:2181,zk2:2181/mesos", "zk://zk1:2181,zk2:2181/mesos"),
])
def test_master_urls(url: str, address: str) -> None:
    assert master_address(url) == address


def test_https_masters_are_refused() -> None:
    with pytest.raises(ValueError, match="unsupported Mesos master"):
        master_address("https://master:5050")
